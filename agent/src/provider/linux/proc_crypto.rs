//! `/proc/crypto`: every implementation the kernel crypto API has registered,
//! and the one it picks for a name.
//!
//! Entries are blocks of `key : value` lines separated by blank lines:
//! `name`, `driver`, `module`, `priority`, `refcnt`, `selftest`, `internal`
//! (4.6 and later), `type`, then per-type fields. The kernel allocates, for a
//! name, the highest-priority implementation whose self-test passed; internal
//! ones (`__cbc-aes-aesni`, reached only through their SIMD wrappers) are never
//! picked by name.

use cipherfleet_core::provider::CpuFlags;
use cipherfleet_core::provider::facts::KernelDriver;
use cipherfleet_core::provider::kernel;

/// One registered implementation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub driver: String,
    pub module: String,
    pub priority: i64,
    /// `passed`, or `unknown` where the kernel did not test it.
    pub selftest: String,
    pub internal: bool,
    pub kind: String,
}

/// Every entry of a `/proc/crypto` text.
pub fn parse(text: &str) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut current: Option<Entry> = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            if line.trim().is_empty()
                && let Some(e) = current.take()
            {
                entries.push(e);
            }
            continue;
        };
        let (key, value) = (key.trim(), value.trim().to_string());
        let e = current.get_or_insert_with(Entry::default);
        match key {
            "name" if !e.name.is_empty() => {
                // A new block without a blank line before it.
                let done = std::mem::take(e);
                entries.push(done);
                current = Some(Entry {
                    name: value,
                    ..Entry::default()
                });
            }
            "name" => e.name = value,
            "driver" => e.driver = value,
            "module" => e.module = value,
            "priority" => e.priority = value.parse().unwrap_or(0),
            "selftest" => e.selftest = value,
            "internal" => e.internal = value == "yes",
            "type" => e.kind = value,
            _ => {}
        }
    }
    entries.extend(current.filter(|e| !e.name.is_empty()));
    entries
}

/// The implementation the kernel picks for `name`, and how many it has
/// registered under that name: the highest priority among those not
/// internal whose self-test passed (or, with tests disabled, `unknown`).
pub fn chosen<'a>(entries: &'a [Entry], name: &str) -> Option<(&'a Entry, u32)> {
    let candidates: Vec<&Entry> = entries.iter().filter(|e| e.name == name && !e.internal).collect();
    let passed: Vec<&Entry> = candidates.iter().copied().filter(|e| e.selftest == "passed").collect();
    let pool = if passed.is_empty() {
        candidates.iter().copied().filter(|e| e.selftest != "failed").collect()
    } else {
        passed
    };
    pool.into_iter()
        .max_by_key(|e| e.priority)
        .map(|e| (e, candidates.len() as u32))
}

/// The chosen driver of every name in [`kernel::NAMES`] the text registers,
/// and the names it does not.
pub fn drivers(text: &str, arch: &str, cpu: &CpuFlags) -> (Vec<KernelDriver>, Vec<String>) {
    let entries = parse(text);
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for name in kernel::NAMES {
        match chosen(&entries, name) {
            Some((e, candidates)) => found.push(KernelDriver {
                name: name.to_string(),
                driver: e.driver.clone(),
                module: e.module.clone(),
                priority: e.priority,
                kind: e.kind.clone(),
                generic: kernel::is_generic(&e.driver),
                path: kernel::path(name, &e.driver, arch, cpu),
                candidates,
            }),
            None => missing.push(name.to_string()),
        }
    }
    (found, missing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipherfleet_core::path::PathUsed;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!("{}/fixtures/proc-crypto/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    fn driver<'a>(drivers: &'a [KernelDriver], name: &str) -> &'a KernelDriver {
        drivers
            .iter()
            .find(|d| d.name == name)
            .unwrap_or_else(|| panic!("{name}: {drivers:?}"))
    }

    /// What the development VM's CPU offers (AMD EPYC): AES-NI, PCLMULQDQ, AVX2.
    fn epyc() -> CpuFlags {
        CpuFlags {
            aes: true,
            pclmulqdq: true,
            ssse3: true,
            sse41: true,
            avx: true,
            avx2: true,
            ..CpuFlags::default()
        }
    }

    #[test]
    fn this_machines_kernel_runs_aes_in_generic_c() {
        let (found, missing) = drivers(&fixture("x86_64-6.18-no-aesni.txt"), "x86_64", &epyc());
        let aes = driver(&found, "aes");
        assert_eq!((aes.driver.as_str(), aes.module.as_str()), ("aes-fixed-time", "kernel"));
        assert!(aes.generic && aes.path == PathUsed::Software, "{aes:?}");
        assert_eq!(aes.candidates, 2, "aes-generic and aes-fixed-time");
        let cbc = driver(&found, "cbc(aes)");
        assert_eq!(cbc.driver, "cbc(ecb(aes-fixed-time))");
        assert_eq!(cbc.kind, "lskcipher");
        assert!(cbc.generic);
        for absent in ["gcm(aes)", "xts(aes)", "rfc7539(chacha20,poly1305)"] {
            assert!(missing.iter().any(|m| m == absent), "{absent}: {missing:?}");
        }
    }

    #[test]
    fn an_aesni_kernel_picks_the_aesni_drivers() {
        let (found, _) = drivers(&fixture("x86_64-6.1-aesni.txt"), "x86_64", &epyc());
        let aes = driver(&found, "aes");
        assert_eq!((aes.driver.as_str(), aes.module.as_str()), ("aes-aesni", "aesni_intel"));
        assert!(!aes.generic && aes.path == PathUsed::Accelerated, "{aes:?}");
        let gcm = driver(&found, "gcm(aes)");
        assert_eq!(gcm.driver, "generic-gcm-aesni");
        assert_eq!(gcm.path, PathUsed::Accelerated);
        let rfc4106 = driver(&found, "rfc4106(gcm(aes))");
        assert_eq!(rfc4106.driver, "rfc4106-gcm-aesni");
        let cbc = driver(&found, "cbc(aes)");
        assert_eq!(
            cbc.driver, "cbc-aes-aesni",
            "the SIMD wrapper, not the internal __cbc-aes-aesni"
        );
        assert!(cbc.candidates >= 1);
        let chacha = driver(&found, "chacha20");
        assert_eq!(chacha.driver, "chacha20-simd");
        assert_eq!(chacha.path, PathUsed::Accelerated, "AVX2 on this CPU");
        // Instantiated by the agent's probe binding it, as a first user would.
        let aead = driver(&found, "rfc7539(chacha20,poly1305)");
        assert_eq!(aead.driver, "rfc7539(chacha20-simd,poly1305-simd)");
        assert_eq!(aead.path, PathUsed::Accelerated);
    }

    #[test]
    fn an_arm64_kernel_picks_the_crypto_extensions() {
        let a72 = CpuFlags {
            aes: true,
            pmull: true,
            sha: true,
            neon: true,
            ..CpuFlags::default()
        };
        let (found, _) = drivers(&fixture("arm64-6.1-ce.txt"), "aarch64", &a72);
        let gcm = driver(&found, "gcm(aes)");
        assert_eq!((gcm.driver.as_str(), gcm.module.as_str()), ("gcm-aes-ce", "ghash_ce"));
        assert_eq!(gcm.path, PathUsed::Accelerated);
        let ctr = driver(&found, "ctr(aes)");
        assert_eq!(ctr.driver, "ctr-aes-ce");
        let chacha = driver(&found, "chacha20");
        assert_eq!(chacha.driver, "chacha20-neon");
        assert!(
            !chacha.generic && chacha.path == PathUsed::Software,
            "NEON is software by the rule"
        );
    }

    #[test]
    fn blocks_without_blank_lines_and_internal_entries_are_handled() {
        let text = "name : aes\ndriver : __aes-x\nmodule : m\npriority : 900\nselftest : passed\ninternal : yes\ntype : cipher\nname : aes\ndriver : aes-generic\nmodule : kernel\npriority : 100\nselftest : passed\ninternal : no\ntype : cipher\n";
        let entries = parse(text);
        assert_eq!(entries.len(), 2);
        let (e, n) = chosen(&entries, "aes").unwrap();
        assert_eq!((e.driver.as_str(), n), ("aes-generic", 1));
        assert!(chosen(&entries, "gcm(aes)").is_none());
    }
}
