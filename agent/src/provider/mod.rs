//! The providers other than the built-in crates, on this host: whether each
//! can run here and why not, and how the ones outside the binary are reached.
//!
//! - [`openssl`]: the host's `openssl` binary (`openssl speed`, `openssl version -a`).
//! - [`linux`]: the kernel crypto API (`/proc/crypto`, AF_ALG).
//!
//! ring is built in ([`crate::kernel::ring`]); its path is inferred from the
//! CPU ([`cipherfleet_core::provider::ring`]).
//!
//! This file: [`facts`] (every provider's capability here, for `probe`),
//! [`refuses`] (what a provider cannot measure, before a worker starts)
//! and [`what_ran`] (the worker's record of the implementation).

pub mod linux;
pub mod openssl;

use std::path::Path as FsPath;

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::measurement::{Harness, Implementation};
use cipherfleet_core::path::Path;
use cipherfleet_core::provider::facts::{Capability, KernelCrypto, OpensslBuild, ProviderFacts};
use cipherfleet_core::provider::{CpuFlags, Provider};
use cipherfleet_core::spec::JobSpec;

use crate::worker;
use openssl::watch::WatchTarget;

/// Every provider's capability here, the kernel's drivers and the OpenSSL
/// build. `openssl` is `--openssl PATH`, else the first `openssl` on `PATH`;
/// the build carries what each of `watch` (`--watch-env`) has in its
/// environment, read now.
pub fn facts(openssl: Option<&FsPath>, watch: &[WatchTarget]) -> ProviderFacts {
    let arch = std::env::consts::ARCH;
    let cpu = crate::probe::cpu_flags();
    let build = openssl::find(openssl)
        .and_then(|binary| openssl::inspect(&binary))
        .map(|build| OpensslBuild {
            watched: watch.iter().map(openssl::watch::read).collect(),
            ..build
        });
    let kernel = linux::facts(arch, &cpu);
    let capabilities = Provider::ALL
        .iter()
        .map(|p| match p {
            Provider::RustCrypto => rustcrypto(),
            Provider::Ring => ring(),
            Provider::Openssl => openssl_capability(&build),
            Provider::Kernel => kernel_capability(kernel.as_ref()),
        })
        .collect();
    ProviderFacts {
        capabilities,
        cpu,
        openssl: build.ok(),
        kernel,
    }
}

fn rustcrypto() -> Capability {
    let sibling = worker::binary_for(Path::Software);
    Capability {
        provider: Provider::RustCrypto,
        available: true,
        reason: None,
        algorithms: Provider::RustCrypto.algorithms(),
        software_path: match sibling {
            Ok(p) => format!("the software build, {}", p.display()),
            Err(_) => "the software build cipherfleet-agent-soft, not installed beside this binary".into(),
        },
    }
}

fn ring() -> Capability {
    Capability {
        provider: Provider::Ring,
        available: true,
        reason: None,
        algorithms: Provider::Ring.algorithms(),
        software_path: "none: ring cannot be built software-only; its software figures come from hosts \
                        without the instructions (emulated ones)"
            .into(),
    }
}

fn openssl_capability(build: &Result<OpensslBuild, String>) -> Capability {
    match build {
        Ok(b) => {
            let mask = cipherfleet_core::provider::openssl::software_env(std::env::consts::ARCH);
            let mut limits = Vec::new();
            if !b.speed_bytes_seconds {
                limits.push(format!("{} measures only its fixed sizes (16 B to 8 KiB)", b.version));
            }
            if b.no_asm {
                limits.push("a no-asm build: C code only".to_string());
            }
            if !b.masked.is_empty() {
                limits.push(format!(
                    "{} in the agent's environment masks {}",
                    b.capability_env.as_deref().unwrap_or(""),
                    b.masked.join(", ")
                ));
            }
            Capability {
                provider: Provider::Openssl,
                available: true,
                reason: (!limits.is_empty()).then(|| limits.join("; ")),
                algorithms: Provider::Openssl.algorithms(),
                software_path: match mask {
                    Some((name, value)) => format!("{name}={value}"),
                    None => "none: no capability mask is known for this architecture".into(),
                },
            }
        }
        Err(why) => unavailable(Provider::Openssl, why.clone()),
    }
}

fn kernel_capability(kernel: Option<&KernelCrypto>) -> Capability {
    let Some(k) = kernel else {
        return unavailable(Provider::Kernel, "/proc/crypto cannot be read".into());
    };
    let usable = |a: &Algorithm| {
        let aead = matches!(
            a.mode,
            cipherfleet_core::algorithm::Mode::Gcm | cipherfleet_core::algorithm::Mode::Poly1305
        );
        if aead {
            k.af_alg_aead.available
        } else {
            k.af_alg_skcipher.available
        }
    };
    let algorithms: Vec<Algorithm> = Provider::Kernel.algorithms().into_iter().filter(usable).collect();
    // Without AF_ALG at all both types give the same reason: say it once.
    let mut reasons: Vec<String> = [&k.af_alg_skcipher, &k.af_alg_aead]
        .iter()
        .filter_map(|a| a.reason.clone())
        .collect();
    reasons.dedup();
    Capability {
        provider: Provider::Kernel,
        available: !algorithms.is_empty(),
        reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
        algorithms,
        software_path:
            "the generic drivers bound by name (cbc(aes-generic), gcm_base(ctr(aes-generic),ghash-generic), \
                        rfc7539(chacha20-generic,poly1305-generic))"
                .into(),
    }
}

fn unavailable(provider: Provider, reason: String) -> Capability {
    Capability {
        provider,
        available: false,
        reason: Some(reason),
        algorithms: Vec::new(),
        software_path: "none".into(),
    }
}

/// ring's backends on this CPU (its path is inferred: ring does not say).
pub fn ring_backends(cpu: &CpuFlags) -> cipherfleet_core::path::Backends {
    cipherfleet_core::provider::ring::backends(std::env::consts::ARCH, cpu)
}

/// Why `spec`'s provider cannot measure it, before any worker starts: the
/// point's own rule ([`JobSpec::validate`]: what the provider runs) and the
/// harness, which shapes the crates' kernels alone.
pub fn refuses(spec: &JobSpec, harness: Harness) -> Option<String> {
    let provider = spec.point.provider;
    if let Err(e) = spec.validate() {
        return Some(e.message);
    }
    if provider != Provider::RustCrypto && harness != Harness::Engine {
        return Some(format!(
            "--openssl-compat shapes the crates' kernels; the {provider} provider has its own"
        ));
    }
    None
}

/// The backends a point ran on the engine's kernels and, for the providers
/// that do not say, what ran: ring's by the CPU features its dispatcher reads,
/// the kernel's by the driver it picked (or the generic one bound).
pub fn what_ran(provider: Provider, spec: &JobSpec) -> (cipherfleet_core::path::Backends, Option<Implementation>) {
    match provider {
        Provider::RustCrypto | Provider::Openssl => (crate::backend::backends(), None),
        Provider::Ring => (
            ring_backends(&crate::probe::cpu_flags()),
            Some(Implementation {
                name: format!("ring {}", crate::probe::crate_version("ring").unwrap_or("unknown")),
                ..Implementation::default()
            }),
        ),
        Provider::Kernel => {
            let transform = linux::bind_for(spec.point.algorithm, spec.point.path);
            let (driver, module, bound) = match &transform {
                Ok(t) => {
                    let (d, m) = linux::driver_of(t);
                    (d, m, format!("AF_ALG {} {}", t.kind.as_str(), t.name))
                }
                Err(e) => (e.clone(), "unknown".into(), String::new()),
            };
            let backends = cipherfleet_core::path::Backends {
                // hkdf-per-user derives its keys with the crates' HKDF: their SHA-256 ran.
                sha256: crate::backend::backends().sha256,
                ..cipherfleet_core::provider::kernel::backends(
                    &driver,
                    std::env::consts::ARCH,
                    &crate::probe::cpu_flags(),
                )
            };
            (
                backends,
                Some(Implementation {
                    name: driver,
                    library: Some(module),
                    command: Some(bound),
                    ..Implementation::default()
                }),
            )
        }
    }
}
