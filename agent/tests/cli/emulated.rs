//! Points on an emulated CPU (qemu-user): the worker runs under the emulator
//! through `CIPHERFLEET_WORKER_PREFIX`, as on an emulated test host.
//!
//! An emulated debug build is far too slow for a 10 MiB 3DES point (minutes
//! per operation: docs/performance.md, "Emulated hosts and the time budget"),
//! so this uses an optimised agent: the static build `deploy/build-static.sh`
//! leaves in `dist/x86_64-unknown-linux-musl/` (the test command builds it
//! first), or the binary named by `CIPHERFLEET_OPTIMISED_AGENT`. Without one
//! the test skips, unless `CIPHERFLEET_REQUIRE_STATIC` is set.

use std::path::PathBuf;
use std::process::Command;

use crate::helpers::*;

const NEHALEM: &str = "qemu-x86_64-static -cpu Nehalem";

fn optimised_agent() -> Option<PathBuf> {
    let candidate = std::env::var_os("CIPHERFLEET_OPTIMISED_AGENT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dist/x86_64-unknown-linux-musl/cipherfleet-agent")
        });
    let qemu = Command::new("qemu-x86_64-static").arg("--version").output();
    let missing = if !candidate.is_file() {
        format!("{} is not built (deploy/build-static.sh)", candidate.display())
    } else if !qemu.is_ok_and(|o| o.status.success()) {
        "qemu-x86_64-static is missing (deploy/install-deps.sh)".to_string()
    } else {
        return Some(candidate);
    };
    assert!(std::env::var_os("CIPHERFLEET_REQUIRE_STATIC").is_none(), "{missing}");
    eprintln!("skipping: {missing}");
    None
}

#[test]
fn ten_mib_3des_decrypt_under_qemu_nehalem_completes_with_ten_samples() {
    if std::env::consts::ARCH != "x86_64" {
        return;
    }
    let Some(agent) = optimised_agent() else {
        return;
    };
    let o = run_with(
        agent,
        &[
            "bench",
            "-a",
            "des-ede3-cbc",
            "--size",
            "10MiB",
            "--direction",
            "decrypt",
            "--seconds",
            "1",
            "--format",
            "json",
        ],
        &[("CIPHERFLEET_WORKER_PREFIX", NEHALEM)],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r = &json_lines(&o)[0];
    assert_eq!(r["status"], "ok", "{r}");
    // One operation takes seconds here, far longer than a window: every
    // operation is a sample, and the run extended until there were ten.
    assert_eq!(r["sample_kind"], "operation", "{r}");
    assert!(r["samples"].as_u64().unwrap() >= 10, "{r}");
    assert_eq!(r["low_samples"], false, "{r}");
    assert_eq!(r["memory"]["allocs_per_op"].as_f64(), Some(0.0), "{r}");
}
