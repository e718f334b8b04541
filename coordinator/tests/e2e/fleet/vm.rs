//! What the VM hosts' own kernels show, checked after the fleet's campaign,
//! and what they measured through AF_ALG in the providers campaign.

use cipherfleet_core::provider::Provider;
use serde_json::Value;

use crate::app::App;

use super::harness::Fleet;
use super::providers::ProvidersCampaigns;
use super::{VM_HOSTS, features};

/// What the VM hosts' own kernels make of them, today: each runs the kernel it
/// booted (not this machine's), x86-noxsave's XCR0 lacks AVX state so its
/// `os-disabled` finding comes from that kernel, x86-kernel-generic's kernel
/// serves `aes` from the generic driver while its userspace has AES-NI (each
/// VM's boot check, in `fleet.sh status`) and so has `kernel-crypto-generic`
/// naming `aesni_intel`, the restarted VM enrolled once, and
/// x86-noxsave's agent is the one `install-agent.sh` installed inside it.
pub(super) async fn vm_hosts_show_their_own_kernels<'a>(
    app: &App,
    fleet: &Fleet,
    open: &[(String, String, String)],
    row: &dyn Fn(&str) -> &'a Value,
) {
    let ours = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    for host in VM_HOSTS {
        let booted = fleet.booted_kernel(host);
        assert_ne!(booted, ours.trim(), "{host} boots Debian's kernel, not this machine's");
        assert_eq!(row(host)["kernel"], booted.as_str(), "{host}'s facts: {:?}", row(host));
        assert_eq!(row(host)["arch"], "x86_64");
    }
    let findings = |h: &str| -> Vec<(&str, &str)> {
        open.iter()
            .filter(|(host, ..)| host == h)
            .map(|(_, r, s)| (r.as_str(), s.as_str()))
            .collect()
    };
    assert!(
        findings("x86-noxsave").contains(&("os-disabled", "avx-state")),
        "{open:?}"
    );
    let (usable, advertised) = features(app, "x86-noxsave").await;
    assert!(
        advertised.iter().any(|f| f == "avx") && !usable.iter().any(|f| f == "avx"),
        "noxsave: CPUID has AVX, XCR0 not: {usable:?} {advertised:?}"
    );
    assert!(usable.iter().any(|f| f == "aes"), "{usable:?}");
    let (usable, _) = features(app, "x86-kernel-generic").await;
    for f in ["aes", "pclmulqdq", "avx"] {
        assert!(
            usable.iter().any(|u| u == f),
            "x86-kernel-generic's userspace has {f}: {usable:?}"
        );
    }
    assert!(
        !findings("x86-kernel-generic")
            .iter()
            .any(|(r, _)| ["cpu-lacks", "os-disabled", "hypervisor-masks"].contains(r)),
        "x86-kernel-generic's CPU and XCR0 are whole: {open:?}"
    );
    assert_eq!(row("x86-kernel-generic")["acceleration"], "accelerated");

    // Its kernel's generic AES is a finding that names the module to load; x86-noxsave's kernel has it.
    assert!(
        findings("x86-kernel-generic").contains(&("kernel-crypto-generic", "kernel-aes")),
        "{open:?}"
    );
    assert!(
        !findings("x86-noxsave")
            .iter()
            .any(|(r, _)| *r == "kernel-crypto-generic"),
        "x86-noxsave's kernel loads aesni_intel: {open:?}"
    );
    let id = &row("x86-kernel-generic")["id"];
    let listed: Vec<Value> =
        serde_json::from_str(&app.get(&format!("/api/v1/hosts/{id}/findings")).await.body).unwrap();
    let kernel = listed
        .iter()
        .find(|f| f["reason"] == "kernel-crypto-generic" && f["status"] == "open")
        .unwrap_or_else(|| panic!("x86-kernel-generic's kernel finding: {listed:?}"));
    let summary = kernel["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("modprobe aesni_intel") && summary.contains("aes → aes-generic"),
        "{summary}"
    );
    assert!(
        kernel["evidence"]["load_modules"][0]
            .as_str()
            .is_some_and(|m| m.starts_with("aesni_intel"))
    );
    let providers: Value = serde_json::from_str(&app.get(&format!("/api/v1/hosts/{id}/providers")).await.body).unwrap();
    let aes = providers["kernel_drivers"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["name"] == "aes"))
        .unwrap_or_else(|| panic!("the kernel's aes driver: {providers}"));
    assert_eq!(
        (&aes["driver"], &aes["generic"]),
        (&Value::from("aes-generic"), &Value::from(true))
    );

    // Each VM's own check of /proc/crypto at boot, as `fleet.sh status` reports it.
    let status = fleet.run(&["status"]).await;
    let check = |host: &str| {
        status
            .lines()
            .find(|l| l.starts_with(host) && l.contains("kernel aes:"))
            .unwrap_or_else(|| panic!("no kernel aes line for {host}: {status}"))
            .to_string()
    };
    let generic = check("x86-kernel-generic");
    assert!(
        generic.contains("driver aes-generic (generic), expected generic: ok"),
        "{generic}"
    );
    let accelerated = check("x86-noxsave");
    assert!(
        accelerated.contains("driver aes-aesni (accelerated), expected accelerated: ok"),
        "{accelerated}"
    );
    let console = fleet.log("x86-kernel-generic");
    assert!(
        console.contains("modules after ") && !console.contains(" aesni_intel "),
        "the blacklisted driver stays out: {console}"
    );
    for module in ["af_alg", "algif_skcipher", "algif_aead"] {
        assert!(
            console.contains(&format!(" {module} ")),
            "{module} is loaded: {console}"
        );
    }
    // The SIGKILLed VM booted twice and enrolled once: its second boot found its credential.
    assert_eq!(console.matches("reached /init").count(), 2, "{console}");
    assert_eq!(console.matches("no host credential yet").count(), 1, "{console}");

    // deploy/install-agent.sh inside x86-noxsave, on its non-systemd path.
    let console = fleet.log("x86-noxsave");
    for said in [
        "install-agent: systemd is not running here: skipped systemctl restart cipherfleet-agent.service",
        "install-agent: installed for",
        "starting the installed agent as cipherfleet-agent",
    ] {
        assert!(console.contains(said), "x86-noxsave's console says {said:?}: {console}");
    }
}

/// The kernel crypto API measured through AF_ALG on both VM hosts, as the
/// providers campaigns left it: AES-128-CBC at 16 KiB on both paths.
/// x86-kernel-generic's kernel serves AES from its generic driver with AF_ALG
/// loaded, so both paths are measured and the accelerated request, having run
/// the generic driver, says software and names it. x86-noxsave's kernel has
/// AES-NI: its points are measured on it, or skipped with the reason its
/// agent gives (AF_ALG not loaded there).
pub(super) async fn vm_kernels_measured_through_af_alg(app: &App, campaigns: &ProvidersCampaigns) {
    let rows: Vec<(String, String, String, f64, Value)> = sqlx::query_as(
        "SELECT h.name, r.path, r.path_used, r.throughput_mb_s, r.measurement FROM results r \
         JOIN jobs j ON j.id = r.job_id JOIN hosts h ON h.id = r.host_id \
         WHERE j.campaign_id = ANY($1) AND r.provider = 'kernel' AND r.algorithm = 'aes-128-cbc' \
         AND r.size_bytes = 16384 AND h.name = ANY($2) ORDER BY h.name, r.path",
    )
    .bind(&campaigns.ids)
    .bind(VM_HOSTS.as_slice())
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let of =
        |host: &str| -> Vec<&(String, String, String, f64, Value)> { rows.iter().filter(|r| r.0 == host).collect() };
    let generic = of("x86-kernel-generic");
    let [(_, accelerated, used, mb_s, m), (_, software, _, _, _)] = generic.as_slice() else {
        panic!("two kernel results on x86-kernel-generic: {rows:?}");
    };
    assert_eq!((accelerated.as_str(), software.as_str()), ("accelerated", "software"));
    assert!(*mb_s > 0.0, "{m}");
    assert_eq!(used, "software", "the generic driver ran: {m}");
    let driver = m["implementation"]["name"].as_str().unwrap_or_default();
    assert!(driver.contains("generic"), "the driver the kernel picked: {m}");
    match of("x86-noxsave").as_slice() {
        [(_, accelerated, used, _, m), _] => {
            assert_eq!(
                (accelerated.as_str(), used.as_str()),
                ("accelerated", "accelerated"),
                "{m}"
            );
            let driver = m["implementation"]["name"].as_str().unwrap_or_default();
            assert!(driver.contains("aesni"), "AES-NI's driver: {m}");
        }
        [] => {
            // Every point of the suite is measured or skipped with a reason (providers.rs): here skipped.
            let skipped = campaigns.skipped("x86-noxsave", Provider::Kernel);
            assert!(
                skipped.is_some_and(|s| !s.reason.trim().is_empty()),
                "x86-noxsave's kernel points skipped with a reason: {skipped:?}"
            );
        }
        other => panic!("x86-noxsave: both kernel points or none: {other:?}"),
    }
}
