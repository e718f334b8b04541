//! The fleet's report in headless Chromium.

use serde_json::{Value, json};

use crate::app::{App, kernel_aes_generic_here};
use crate::browser::{Problems, Screenshots, fits_1400_px, says_what_fills_it, texts, visit};
use crate::chromium::Browser;

use super::harness::Fleet;
use super::{EMULATED, OLD_KERNEL, SCENARIOS};

/// The report in Chromium: every page loads clean (no script error, no CSP
/// violation), the overview and hosts list name every host, each host's page
/// its facts, features, emulation badge and findings.
pub(super) async fn pages_show_the_fleet(
    browser: &mut Browser,
    app: &App,
    fleet: &Fleet,
    hosts: &[Value],
    shots: &Screenshots,
    campaign: &str,
) {
    let base = format!("http://{}", app.http);
    let mut p = Problems::default();
    if let Some(page) = visit(browser, &base, "/", "overview", shots, &mut p) {
        for host in &fleet.hosts {
            p.check(page.shows(host), format!("/: names {host}"));
        }
    }
    if let Some(page) = visit(browser, &base, "/hosts", "hosts", shots, &mut p) {
        for host in &fleet.hosts {
            p.check(page.shows(host), format!("/hosts: lists {host}"));
        }
    }
    for &host in &fleet.hosts {
        let id = hosts.iter().find(|h| h["name"] == host).unwrap()["id"].clone();
        let path = format!("/hosts/{id}");
        let Some(page) = visit(browser, &base, &path, &format!("host-{host}"), shots, &mut p) else {
            continue;
        };
        let badge = browser.eval("!!document.querySelector('h1 .badge.emulated')");
        p.check(
            badge == json!(EMULATED.contains(&host)),
            format!("{path}: {host} has the emulated badge exactly when emulated: {badge}"),
        );
        let feature = |browser: &mut Browser, name: &str| {
            browser.eval(&format!(
                "Array.from(document.querySelectorAll('table.features tr[data-feature={}] td'), td => td.textContent.trim())",
                json!(name)
            ))
        };
        let kernel_driver = |browser: &mut Browser, name: &str| {
            browser.eval(&format!(
                "Array.from(document.querySelectorAll('table.kernel-drivers tr[data-kernel-name={}] td'), td => td.textContent.trim().replace(/\\s+/g, ' '))",
                json!(name)
            ))
        };
        match host {
            "x86-old-kernel" => {
                p.check(page.shows(OLD_KERNEL), format!("{path}: shows kernel {OLD_KERNEL}"));
                let avx = feature(browser, "avx");
                p.check(avx == json!(["avx", "no", "no"]), format!("{path}: AVX absent: {avx}"));
            }
            "arm64" => {
                p.check(page.shows("aarch64"), format!("{path}: shows aarch64"));
                let aes = feature(browser, "aes");
                p.check(
                    aes == json!(["aes", "yes", "yes"]),
                    format!("{path}: AES usable: {aes}"),
                );
            }
            "x86-no-aesni" => {
                let reasons = browser.eval(&texts("table.findings tbody tr"));
                p.check(
                    reasons.to_string().contains("cpu-lacks"),
                    format!("{path}: a cpu-lacks finding: {reasons}"),
                );
            }
            "x86-soft-build" => {
                let reasons = browser.eval(&texts("table.findings tbody tr"));
                p.check(
                    reasons.to_string().contains("software-build"),
                    format!("{path}: a software-build finding: {reasons}"),
                );
            }
            "x86-noxsave" => {
                let kernel = fleet.booted_kernel(host);
                p.check(page.shows(&kernel), format!("{path}: shows kernel {kernel}"));
                let avx = feature(browser, "avx");
                p.check(
                    avx == json!(["avx", "yes", "advertised but not usable"]),
                    format!("{path}: AVX advertised, not enabled: {avx}"),
                );
                let reasons = browser.eval(&texts("table.findings tbody tr"));
                p.check(
                    reasons.to_string().contains("os-disabled"),
                    format!("{path}: an os-disabled finding: {reasons}"),
                );
            }
            "x86-kernel-generic" => {
                let kernel = fleet.booted_kernel(host);
                p.check(page.shows(&kernel), format!("{path}: shows kernel {kernel}"));
                let aes = feature(browser, "aes");
                p.check(
                    aes == json!(["aes", "yes", "yes"]),
                    format!("{path}: AES-NI usable in userspace: {aes}"),
                );
                // Beside the CPU features, the kernel's own choice: the generic driver.
                let driver = kernel_driver(browser, "aes");
                p.check(
                    driver == json!(["aes", "aes-generic", "kernel", "software generic"]),
                    format!("{path}: the kernel's aes driver, generic: {driver}"),
                );
                let reasons = browser.eval(&texts("table.findings tbody tr"));
                p.check(
                    reasons.to_string().contains("kernel-crypto-generic")
                        && reasons.to_string().contains("aesni_intel"),
                    format!("{path}: a kernel-crypto-generic finding naming aesni_intel: {reasons}"),
                );
            }
            // The native host: this machine's kernel, whose AES is generic without aesni_intel.
            _ if kernel_aes_generic_here() => {
                let reasons = browser.eval(&texts("table.findings tbody tr"));
                let rows = reasons.as_array().map_or(0, Vec::len);
                p.check(
                    rows == 1 && reasons.to_string().contains("kernel-crypto-generic"),
                    format!("{path}: the native host's one finding is its kernel's: {reasons}"),
                );
                let driver = kernel_driver(browser, "aes");
                p.check(
                    driver[3].as_str().is_some_and(|r| r.starts_with("software")),
                    format!("{path}: this machine's kernel aes driver runs software: {driver}"),
                );
            }
            _ => p.check(
                page.shows("No findings"),
                format!("{path}: the native host has no finding"),
            ),
        }
    }
    if let Some(page) = visit(browser, &base, "/fallback", "fallback", shots, &mut p) {
        for host in ["x86-no-aesni", "x86-soft-build"] {
            p.check(page.shows(host), format!("/fallback: names {host}"));
        }
        says_what_fills_it(&page, "/fallback", &mut p);
        fits_1400_px(browser, "/fallback", &mut p);
    }
    let aesni = hosts.iter().find(|h| h["name"] == "x86-aesni").unwrap()["id"].clone();
    let rest = [
        (
            "/compare?rows=hosts&size=16384&threads=1&direction=encrypt&path=accelerated".to_string(),
            "compare".to_string(),
        ),
        (format!("/modes?host={aesni}"), "modes".into()),
        ("/capacity?algorithm=aes-128-gcm&size=1024".into(), "capacity".into()),
        ("/campaigns".into(), "campaigns".into()),
        (format!("/campaigns/{campaign}"), "campaign".into()),
        ("/scenarios".into(), "scenarios".into()),
        ("/providers".into(), "providers".into()),
    ]
    .into_iter()
    .chain(
        SCENARIOS
            .iter()
            .map(|s| (format!("/scenarios/{s}"), format!("scenario-{s}"))),
    );
    for (path, name) in rest {
        let Some(page) = visit(browser, &base, &path, &name, shots, &mut p) else {
            continue;
        };
        // After the tour every view has its answer, or names the command that fills it.
        if ["/scenarios", "/compare", "/capacity", "/providers"]
            .iter()
            .any(|p| path.starts_with(p))
        {
            says_what_fills_it(&page, &path, &mut p);
        }
        if path == "/providers" {
            providers_page_shows_the_campaign(browser, app, hosts, &mut p).await;
        }
        if path.starts_with("/compare") {
            // Emulated hosts are shown, badged and greyed, never on the colour scale.
            let ranked = browser.eval(
                "(() => { const rows = Array.from(document.querySelectorAll('tr[data-row]'))\
                   .filter(r => r.querySelector('.badge.emulated'));\
                   return {emulated: rows.length, ranked: rows.flatMap(r => Array.from(r.querySelectorAll('td.num'))\
                     .filter(td => Array.from(td.classList).some(c => c.startsWith('heat-')))\
                     .map(td => r.dataset.row + ': ' + td.textContent.trim()))}; })()",
            );
            p.check(
                ranked["emulated"].as_u64().is_some_and(|n| n > 0)
                    && ranked["ranked"].as_array().is_some_and(Vec::is_empty),
                format!("{path}: emulated hosts shown, none on the colour scale: {ranked}"),
            );
        }
    }
    p.assert_none();
}

/// `/providers` after the providers campaign: a section per machine class,
/// every provider the campaign measured shown with its figures; each class of
/// native hosts opens with its answer (the fastest provider per algorithm at
/// 16 KiB) and its OpenSSL ran AES-128-GCM accelerated, with the fallback's
/// cost beside it; the Nehalem host's class, emulated, says that its
/// OpenSSL's accelerated request ran software.
async fn providers_page_shows_the_campaign(browser: &mut Browser, app: &App, hosts: &[Value], p: &mut Problems) {
    let sections = browser.eval(PROVIDER_CLASSES);
    let sections = sections.as_array().cloned().unwrap_or_default();
    p.check(
        !sections.is_empty(),
        "/providers: a section per machine class after the providers campaign",
    );
    let measured: Vec<String> = sqlx::query_scalar("SELECT DISTINCT provider FROM provider_points ORDER BY 1")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    for provider in measured.iter().map(String::as_str).chain(["rustcrypto"]) {
        p.check(
            sections.iter().any(|s| {
                s["measured"]
                    .as_array()
                    .is_some_and(|m| m.iter().any(|x| x == provider))
            }),
            format!("/providers: {provider}'s figures shown: {sections:?}"),
        );
    }
    let cpu = |name: &str| {
        hosts
            .iter()
            .find(|h| h["name"] == name)
            .and_then(|h| h["cpu_model"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let nehalem = cpu("x86-no-aesni");
    let class = sections
        .iter()
        .find(|s| s["marked"] == true && s["title"].as_str().is_some_and(|t| t.contains(&nehalem)));
    p.check(
        class.is_some_and(|s| {
            s["openssl_gcm"]
                .as_str()
                .is_some_and(|c| c.contains("(ran software)"))
        }),
        format!("/providers: the Nehalem class ({nehalem}) says its OpenSSL's accelerated AES-128-GCM ran software: {class:?}"),
    );
    for s in sections.iter().filter(|s| s["marked"] == false) {
        p.check(
            s["answers"].as_array().is_some_and(|a| {
                a.iter()
                    .any(|l| l.as_str().is_some_and(|l| l.contains(" is fastest at ")))
            }),
            format!("/providers: a native class opens with its answer: {s}"),
        );
        p.check(
            s["openssl_gcm"]
                .as_str()
                .is_some_and(|c| !c.contains("(ran ") && c.contains("fallback costs")),
            format!(
                "/providers: a native class's OpenSSL ran AES-128-GCM accelerated, its fallback's cost beside it: {s}"
            ),
        );
    }
}

/// Each class section of `/providers`: its title, whether it is marked
/// emulated, its answers, the providers with a figure in it, and OpenSSL's
/// AES-128-GCM cell at 16 KiB.
const PROVIDER_CLASSES: &str = r#"Array.from(document.querySelectorAll('section.provider-class'), s => {
  const heads = Array.from(s.querySelectorAll('table.providers thead th'), th => th.textContent.trim());
  const col = heads.indexOf('16 KiB');
  const rows = Array.from(s.querySelectorAll('tr[data-provider]'));
  const measured = rows
    .filter(r => Array.from(r.cells).slice(2).some(c => !c.textContent.trim().startsWith('not measured')))
    .map(r => r.dataset.provider);
  const gcm = rows.find(r => r.dataset.provider === 'openssl' && r.dataset.algorithm === 'aes-128-gcm');
  return {title: s.querySelector('h2').textContent.trim(), marked: !!s.querySelector('h2 .badge.emulated'),
    answers: Array.from(s.querySelectorAll('ul.provider-answers li'), li => li.textContent.trim()),
    measured: Array.from(new Set(measured)),
    openssl_gcm: gcm && col >= 0 ? gcm.cells[col].textContent.trim().replace(/\s+/g, ' ') : null};
})"#;
