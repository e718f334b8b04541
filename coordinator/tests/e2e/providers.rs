//! The provider dimension end to end: one campaign on a real agent asks for
//! two algorithms on both paths on every provider. Each provider gets only
//! the points it runs (ring: its AEAD on the accelerated path); the host's
//! OpenSSL runs both paths, its software path masked and saying so; the
//! kernel's points run where this machine's kernel offers AF_ALG and are
//! skipped with the agent's reason where it does not (this development
//! machine's kernel has no AF_ALG). Every stored result carries the provider
//! its job asked for, the other providers' latest points land in
//! `provider_points`, and the plain pages' `result_points` stays RustCrypto's.

use std::time::Duration;

use cipherfleet_proto::v1;

use crate::app::{both_paths, matrix, spawn_app};

const HOST: &str = "e2e-providers";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_on_every_provider_measures_what_each_runs_and_skips_what_the_host_lacks() {
    let mut app = spawn_app().await;
    app.spawn_agent(HOST, &[]);
    app.wait_online(1).await;
    let points = v1::Matrix {
        paths: both_paths(),
        providers: vec![
            v1::Provider::Rustcrypto as i32,
            v1::Provider::Ring as i32,
            v1::Provider::Openssl as i32,
            v1::Provider::Kernel as i32,
        ],
        ..matrix(&["aes-128-gcm", "aes-128-cbc"], &[1024], 0.1)
    };
    let started = app.start_campaign_on("providers", points, &[]).await;
    // rustcrypto 2 × 2, ring 1 (AES-128-GCM, accelerated), openssl 2 × 2, kernel 2 × 2.
    assert_eq!(started.jobs_created + started.points_skipped, 13, "{started:?}");
    let status = app.wait_finished(&started.campaign_id, Duration::from_secs(240)).await;
    assert_eq!(status.state, v1::CampaignState::Completed as i32, "{status:?}");
    let overall = status.overall.unwrap();
    assert_eq!(overall.failed, 0, "{:?}", status.failures);
    let id: i64 = started.campaign_id.parse().unwrap();

    // Each document is stored once: the session left out the host facts its
    // snapshot holds and the figures the columns hold, and the API puts them back.
    let (result_id, keys, kept, doc, in_columns, samples): (
        i64,
        Option<Vec<String>>,
        serde_json::Value,
        serde_json::Value,
        i32,
        Vec<f64>,
    ) = sqlx::query_as(
        "SELECT r.id, r.host_from_snapshot, r.measurement -> 'host', r.measurement, r.figures_in_columns, \
             r.sample_throughputs FROM results r JOIN jobs j ON j.id = r.job_id \
         WHERE j.campaign_id = $1 ORDER BY r.id LIMIT 1",
    )
    .bind(started.campaign_id.parse::<i64>().unwrap())
    .fetch_one(&app.pool)
    .await
    .unwrap();
    let keys = keys.expect("the host facts taken from the snapshot are named");
    assert!(keys.iter().any(|k| k == "cpu"), "{keys:?}");
    assert!(
        keys.iter().all(|k| kept.get(k).is_none()),
        "{keys:?} not stored twice: {kept}"
    );
    let whole = app.get(&format!("/api/v1/results/{result_id}")).await;
    assert_eq!(whole.status, 200, "{}", whole.body);
    let whole: serde_json::Value = serde_json::from_str(&whole.body).unwrap();
    for k in &keys {
        assert!(whole["measurement"]["host"].get(k).is_some(), "{k} read back: {whole}");
    }
    assert_eq!(in_columns, 0xffff, "the agent's figures all match their columns: {doc}");
    for k in [
        "throughput_mb_s",
        "latency_ns",
        "sample_throughputs_mb_s",
        "cpu_user_seconds",
        "memory",
    ] {
        assert!(doc.get(k).is_none(), "{k} is not stored twice: {doc}");
        assert!(whole["measurement"].get(k).is_some(), "{k} read back: {whole}");
    }
    assert_eq!(
        whole["measurement"]["sample_throughputs_mb_s"],
        serde_json::json!(samples)
    );

    // What the kernel provider can do here, by the agent's own facts.
    let kernel: serde_json::Value = sqlx::query_scalar(
        "SELECT c FROM hosts h JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id, \
             jsonb_array_elements(s.facts #> '{providers,capabilities}') c \
         WHERE h.name = $1 AND c->>'provider' = 'kernel'",
    )
    .bind(HOST)
    .fetch_one(&app.pool)
    .await
    .expect("the agent reports the kernel provider's capability in its facts");
    let kernel_runs = |alg: &str| {
        kernel["available"] == true
            && kernel["algorithms"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x == alg))
    };
    let kernel_points = ["aes-128-gcm", "aes-128-cbc"].iter().filter(|a| kernel_runs(a)).count() as i64 * 2;
    assert_eq!(i64::from(started.points_skipped), 4 - kernel_points, "{kernel}");

    // Every job's result is of its provider; counts per provider as asked.
    let per_provider: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT j.provider, count(*), count(*) FILTER (WHERE r.provider = j.provider) \
         FROM jobs j JOIN results r ON r.job_id = j.id WHERE j.campaign_id = $1 \
         GROUP BY j.provider ORDER BY j.provider",
    )
    .bind(id)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let mut expected = vec![
        ("openssl".to_string(), 4, 4),
        ("ring".to_string(), 1, 1),
        ("rustcrypto".to_string(), 4, 4),
    ];
    if kernel_points > 0 {
        expected.push(("kernel".to_string(), kernel_points, kernel_points));
        expected.sort();
    }
    assert_eq!(per_provider, expected);

    // OpenSSL's software path ran with its capability vector masked, and says so.
    let openssl: Vec<(String, String, serde_json::Value)> = sqlx::query_as(
        "SELECT path, path_used, measurement FROM results WHERE provider = 'openssl' \
         AND algorithm = 'aes-128-gcm' ORDER BY path",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let [(accelerated, _, _), (software, used, m)] = openssl.as_slice() else {
        panic!("both openssl paths of aes-128-gcm: {openssl:?}");
    };
    assert_eq!((accelerated.as_str(), software.as_str()), ("accelerated", "software"));
    assert_eq!(used, "software", "{m}");
    assert_eq!(m["provider"], "openssl", "{m}");
    assert_eq!(m["path_basis"], "inferred", "{m}");

    // The latest points: the other providers' in provider_points, RustCrypto's alone in result_points.
    let latest: Vec<(String, i64)> =
        sqlx::query_as("SELECT provider, count(*) FROM provider_points GROUP BY provider ORDER BY provider")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    let mut want = vec![("openssl".to_string(), 4), ("ring".to_string(), 1)];
    if kernel_points > 0 {
        want.insert(0, ("kernel".to_string(), kernel_points));
    }
    assert_eq!(latest, want);
    let plain: i64 = sqlx::query_scalar("SELECT count(*) FROM result_points")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(plain, 4, "result_points holds RustCrypto's four points alone");

    // /providers sets the stored figures side by side (one host: its figure is the class's median).
    let stored: f64 = sqlx::query_scalar(
        "SELECT throughput_mb_s FROM results WHERE provider = 'openssl' AND algorithm = 'aes-128-gcm' \
         AND path = 'accelerated'",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    let api = app.get("/api/v1/providers").await;
    assert_eq!(api.status, 200, "{}", api.body);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&api.body).unwrap();
    let row = |provider: &str| {
        rows.iter()
            .find(|r| r["provider"] == provider && r["algorithm"] == "aes-128-gcm" && r["size_bytes"] == 1024)
            .unwrap_or_else(|| panic!("a {provider} row for aes-128-gcm at 1 KiB: {rows:#?}"))
    };
    assert_eq!(row("openssl")["accelerated_mb_s"].as_f64(), Some(stored), "{rows:#?}");
    assert!(
        row("openssl")["fallback_cost"].as_f64().is_some_and(|c| c > 0.0),
        "{rows:#?}"
    );
    assert!(row("ring")["accelerated_mb_s"].as_f64().is_some_and(|v| v > 0.0));
    assert!(row("rustcrypto")["software_mb_s"].as_f64().is_some_and(|v| v > 0.0));
    let page = app.get("/providers").await;
    assert_eq!(page.status, 200);
    for provider in ["rustcrypto", "ring", "openssl"] {
        assert!(page.body.contains(provider), "/providers names {provider}");
    }

    // The host page lists every provider's results, each other than the
    // built-in crates marked with its provider; its chart and the plain
    // pages say whose figures they show.
    let host_id: i64 = sqlx::query_scalar("SELECT host_id FROM results LIMIT 1")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let page = app.get(&format!("/hosts/{host_id}")).await;
    assert_eq!(page.status, 200);
    for provider in ["openssl", "ring"] {
        let mark = format!(r#"<span class="cv provider">on {provider}</span>"#);
        assert!(page.body.contains(&mark), "{mark} on the host page");
    }
    assert!(!page.body.contains("on rustcrypto"));
    for path in [format!("/hosts/{host_id}"), "/compare".into(), "/fallback".into()] {
        let page = app.get(&path).await;
        assert!(
            page.body
                .contains("Measured on the crates built into the agent (RustCrypto)"),
            "{path} says whose figures it shows"
        );
    }

    // /fallback on the host's OpenSSL: its own two paths side by side, saying whose they are;
    // the default view keeps the built-in crates' figures.
    let figure = |provider: &'static str, path: &'static str| {
        sqlx::query_scalar::<_, f64>(
            "SELECT throughput_mb_s FROM results WHERE provider = $1 AND algorithm = 'aes-128-gcm' \
             AND size_bytes = 1024 AND path = $2",
        )
        .bind(provider)
        .bind(path)
        .fetch_one(&app.pool)
    };
    let (accelerated, software) = (
        figure("openssl", "accelerated").await.unwrap(),
        figure("openssl", "software").await.unwrap(),
    );
    let gcm_row = |path: &str, body: &str| -> serde_json::Value {
        let rows: Vec<serde_json::Value> = serde_json::from_str(body).unwrap();
        rows.into_iter()
            .find(|r| r["algorithm"] == "aes-128-gcm" && r["host_name"] == HOST)
            .unwrap_or_else(|| panic!("{path} has the host's aes-128-gcm row: {body}"))
    };
    let path = "/api/v1/fallback?size=1KiB&provider=openssl";
    let api = app.get(path).await;
    assert_eq!(api.status, 200, "{}", api.body);
    let row = gcm_row(path, &api.body);
    // serde_json reads a float back to within a unit in the last place.
    let close = |field: &str, want: f64| {
        let shown = row[field].as_f64().unwrap_or_else(|| panic!("{field}: {row}"));
        assert!((shown - want).abs() <= want.abs() * 1e-12, "{field} {want}: {row}");
    };
    close("accelerated_mb_s", accelerated);
    close("software_mb_s", software);
    close("ratio", accelerated / software);
    assert_eq!(row["provider"], "openssl", "{row}");
    let path = "/api/v1/fallback?size=1KiB";
    let plain = app.get(path).await;
    assert_eq!(plain.status, 200, "{}", plain.body);
    let row = gcm_row(path, &plain.body);
    assert!(row.get("provider").is_none(), "the default rows are as before: {row}");
    let crates = figure("rustcrypto", "accelerated").await.unwrap();
    let shown = row["accelerated_mb_s"].as_f64().unwrap_or_else(|| panic!("{row}"));
    assert!(
        (shown - crates).abs() <= crates * 1e-12,
        "the built-in crates' {crates}: {row}"
    );
    let page = app.get("/fallback?size=1KiB&provider=openssl").await;
    assert_eq!(page.status, 200, "{}", page.body);
    for shown in [
        "through its openssl speed",
        "capability vector masked",
        r#"<option value="openssl" selected>"#,
        r#"data-algorithm="aes-128-gcm""#,
        "/api/v1/fallback?size=1024&#38;provider=openssl&#38;format=csv",
    ] {
        assert!(page.body.contains(shown), "/fallback?provider=openssl shows {shown}");
    }
    assert!(!page.body.contains("Measured on the crates built into the agent"));
    for path in ["/fallback?provider=libsodium", "/api/v1/fallback?provider=libsodium"] {
        let refused = app.get(path).await;
        assert_eq!(refused.status, 400, "{path}: {}", refused.body);
        assert!(
            refused.body.contains("provider=") && refused.body.contains("openssl"),
            "{path} names the parameter and what it takes: {}",
            refused.body
        );
    }

    // Capacity planned for a service on the host's OpenSSL uses OpenSSL's figure.
    let plan = app
        .get("/api/v1/capacity?algorithm=aes-128-gcm&size=1024&provider=openssl")
        .await;
    assert_eq!(plan.status, 200, "{}", plan.body);
    let plan: serde_json::Value = serde_json::from_str(&plan.body).unwrap();
    assert_eq!(plan["inputs"]["provider"], "openssl", "{plan}");
    assert_eq!(plan["rows"][0]["per_core_mb_s"].as_f64(), Some(stored), "{plan}");

    // /compare and /modes of another provider show that provider's figures,
    // and say whose they are; an unknown provider is refused by name.
    let cells = app
        .get("/api/v1/compare?provider=openssl&size=1024&algorithms=aes-128-gcm&format=json")
        .await;
    assert_eq!(cells.status, 200, "{}", cells.body);
    let cells: Vec<serde_json::Value> = serde_json::from_str(&cells.body).unwrap();
    let [cell] = cells.as_slice() else {
        panic!("one host cell: {cells:#?}")
    };
    assert_eq!(
        (cell["provider"].as_str(), cell["throughput_mb_s"].as_f64()),
        (Some("openssl"), Some(stored)),
        "{cell}"
    );
    let classes = app
        .get("/api/v1/compare?rows=classes&provider=openssl&size=1024&algorithms=aes-128-gcm&format=json")
        .await;
    let classes: Vec<serde_json::Value> = serde_json::from_str(&classes.body).unwrap();
    assert_eq!(
        classes[0]["median_throughput_mb_s"].as_f64(),
        Some(stored),
        "{classes:#?}"
    );
    let page = app.get("/compare?provider=openssl&size=1024").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("through its openssl speed"), "{}", page.body);
    assert!(page.body.contains(r#"<option value="openssl" selected>"#));
    let builtin = app
        .get("/api/v1/compare?size=1024&algorithms=aes-128-gcm&format=json")
        .await;
    assert!(!builtin.body.contains("openssl"), "{}", builtin.body);
    for path in ["/compare?provider=libsodium", "/modes?host=1&provider=libsodium"] {
        let refused = app.get(path).await;
        assert_eq!(refused.status, 400, "{path}");
        assert!(
            refused.body.contains("provider") && refused.body.contains("libsodium"),
            "{}",
            refused.body
        );
    }
    let curves = app
        .get(&format!("/api/v1/modes?host={host_id}&provider=openssl&format=json"))
        .await;
    assert_eq!(curves.status, 200, "{}", curves.body);
    let curves: Vec<serde_json::Value> = serde_json::from_str(&curves.body).unwrap();
    assert!(
        curves.iter().any(|r| r["provider"] == "openssl"
            && r["algorithm"] == "aes-128-gcm"
            && r["size_bytes"] == 1024
            && r["throughput_mb_s"].as_f64() == Some(stored)),
        "{curves:#?}"
    );
    let page = app.get(&format!("/modes?host={host_id}&provider=ring")).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("ring, built into the agent"), "{}", page.body);

    // The campaign page says what was skipped and why.
    let page = app.get(&format!("/campaigns/{id}")).await;
    assert_eq!(page.status, 200);
    if kernel_points < 4 {
        assert!(
            status.skipped.iter().any(|s| s.provider == v1::Provider::Kernel as i32
                && s.host_name == HOST
                && i64::from(s.points) == 4 - kernel_points
                && !s.reason.is_empty()),
            "{:?}",
            status.skipped
        );
        assert!(page.body.contains(r#"data-provider="kernel""#), "{}", page.body);
        let reason = kernel["reason"].as_str().unwrap_or_default();
        assert!(
            !reason.is_empty(),
            "the agent says why the kernel provider cannot run: {kernel}"
        );
        let skipped = app.get(&format!("/api/v1/campaigns/{id}/skipped")).await;
        assert!(skipped.body.contains("kernel"), "{}", skipped.body);
    }
}

/// A host whose OpenSSL does not use the CPU's AES: here the first `openssl`
/// on the agent's PATH is a wrapper that masks AES-NI for every run (as a
/// `no-asm` build or a CPU too new for the library would leave it), while
/// the agent's own environment is clean. Both paths then measure alike, and
/// the host gets `openssl-no-acceleration` naming the point and its ratio,
/// and not `openssl-masked` (nothing in the agent's environment masks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openssl_running_aes_at_its_software_speed_is_a_finding() {
    let Some((variable, mask)) = cipherfleet_core::provider::openssl::software_env(std::env::consts::ARCH) else {
        eprintln!("no OpenSSL capability mask is known for this architecture: skipped");
        return;
    };
    let Some(real) = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("openssl"))
        .find(|p| p.is_file())
    else {
        panic!("no openssl on PATH: deploy/install-deps.sh installs it");
    };
    let mut app = spawn_app().await;
    let bin = app.dir.path().join("masking-openssl");
    std::fs::create_dir_all(&bin).unwrap();
    let wrapper = bin.join("openssl");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\n{variable}='{mask}' exec '{}' \"$@\"\n", real.display()),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin.clone()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();
    let child = app
        .agent_command("e2e-no-asm-openssl")
        .env("PATH", path)
        .spawn()
        .expect("starting the agent");
    app.track_agent(child);
    app.wait_online(1).await;
    // Each path's figure is one short wall-clock run, which a test beside it
    // on 2 cores can halve: a campaign whose two runs did not measure alike
    // is run again, at most three times in all. Unmasked, the accelerated
    // path runs several times faster in every one.
    let points = v1::Matrix {
        paths: both_paths(),
        providers: vec![v1::Provider::Openssl as i32],
        ..matrix(&["aes-128-gcm"], &[16 * 1024], 0.2)
    };
    let mut measured = Vec::new();
    for attempt in 1..=3 {
        let started = app
            .start_campaign_on(&format!("masked openssl {attempt}"), points.clone(), &[])
            .await;
        assert_eq!((started.jobs_created, started.points_skipped), (2, 0), "{started:?}");
        let status = app.wait_finished(&started.campaign_id, Duration::from_secs(180)).await;
        assert_eq!(status.overall.unwrap().failed, 0, "{:?}", status.failures);
        let (accelerated, software): (f64, f64) = sqlx::query_as(
            "SELECT max(r.throughput_mb_s) FILTER (WHERE r.path = 'accelerated'), \
                 max(r.throughput_mb_s) FILTER (WHERE r.path = 'software') \
             FROM results r JOIN jobs j ON j.id = r.job_id \
             WHERE r.provider = 'openssl' AND j.campaign_id = $1",
        )
        .bind(started.campaign_id.parse::<i64>().unwrap())
        .fetch_one(&app.pool)
        .await
        .unwrap();
        measured.push((accelerated, software));
        if accelerated / software < 1.5 {
            break;
        }
    }
    let &(accelerated, software) = measured.last().unwrap();
    let ratio = accelerated / software;
    let reasons = crate::app::wait_for("the openssl finding", Duration::from_secs(90), || async {
        let rows: Vec<(String, String)> =
            sqlx::query_as("SELECT reason, summary FROM findings WHERE status = 'open' ORDER BY reason")
                .fetch_all(&app.pool)
                .await
                .unwrap();
        rows.iter()
            .any(|(r, _)| r == "openssl-no-acceleration" || ratio >= 1.5)
            .then_some(rows)
    })
    .await;
    // Both paths ran masked: they measure alike (the rule's threshold is 1.5×).
    assert!(
        ratio < 1.5,
        "masked both ways, yet accelerated vs software MB/s in each campaign: {measured:.0?}"
    );
    let (_, summary) = reasons
        .iter()
        .find(|(r, _)| r == "openssl-no-acceleration")
        .unwrap_or_else(|| panic!("{reasons:?}"));
    assert!(summary.contains("aes-128-gcm at 16384 B"), "{summary}");
    assert!(summary.contains("nginx"), "{summary}");
    assert!(
        !reasons.iter().any(|(r, _)| r == "openssl-masked"),
        "the agent's own environment masks nothing: {reasons:?}"
    );

    // /fallback on OpenSSL shows the pair with that finding as its reason;
    // the built-in crates' view has no row of it.
    let api = app.get("/api/v1/fallback?provider=openssl").await;
    assert_eq!(api.status, 200, "{}", api.body);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&api.body).unwrap();
    let [row] = rows.as_slice() else {
        panic!("one openssl pair: {rows:#?}")
    };
    assert_eq!(row["algorithm"], "aes-128-gcm", "{row}");
    // serde_json reads a float back to within a unit in the last place.
    let shown = row["ratio"].as_f64().unwrap_or_else(|| panic!("a ratio: {row}"));
    assert!((shown - ratio).abs() <= ratio * 1e-12, "{row}");
    assert_eq!(row["reasons"], "openssl-no-acceleration: openssl-aes", "{row}");
    let plain = app.get("/api/v1/fallback").await;
    assert_eq!(plain.body, "[]", "no built-in crates' results here");
}

/// `--watch-env`: services started with a capability variable that masks
/// AES-NI and CLMUL, watched by pid and as systemd units (a fake `systemctl`
/// on the agent's PATH answers for them: one running as that process, one
/// stopped with the variable in its `Environment=`), raise one
/// `openssl-masked` finding on their host naming each; the agent's own
/// environment is clean. A host whose watched process has no variable
/// raises nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_service_whose_environment_masks_openssl_is_a_finding() {
    let (variable, value) = match std::env::consts::ARCH {
        "x86_64" => ("OPENSSL_ia32cap", "~0x200000200000000"),
        "aarch64" => ("OPENSSL_armcap", "0"),
        other => {
            eprintln!("no OpenSSL capability variable is known for {other}: skipped");
            return;
        }
    };
    let mut app = spawn_app().await;
    let sleep = |env: Option<&str>| {
        let mut c = std::process::Command::new("sleep");
        c.arg("600").env_remove(variable);
        if let Some(v) = env {
            c.env(variable, v);
        }
        Killed(c.spawn().expect("starting sleep"))
    };
    let masked = sleep(Some(value));
    let clean = sleep(None);
    // The agent that reads them starts seconds later, long after exec set their environment up.
    let bin = app.dir.path().join("fake-systemctl");
    std::fs::create_dir_all(&bin).unwrap();
    let systemctl = bin.join("systemctl");
    std::fs::write(
        &systemctl,
        format!(
            "#!/bin/sh\n\
             case \"$*\" in\n\
             *MainPID*masked.service) echo {pid} ;;\n\
             *MainPID*stopped.service) echo 0 ;;\n\
             *Environment*stopped.service) echo LoadState=loaded; echo 'Environment=LANG=C {variable}={value}' ;;\n\
             *) echo \"Unit $* could not be found.\" >&2; exit 1 ;;\n\
             esac\n",
            pid = masked.0.id()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&systemctl, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();

    // The clean host first: the facts pass that judges the masked host has judged it too.
    let clean_pid = clean.0.id().to_string();
    let child = app
        .agent_command("e2e-watch-clean")
        .args(["--watch-env", &clean_pid])
        .env_remove(variable)
        .spawn()
        .expect("starting the agent");
    app.track_agent(child);
    app.wait_online(1).await;
    let masked_pid = masked.0.id().to_string();
    let child = app
        .agent_command("e2e-watch-masked")
        .args(["--watch-env", &masked_pid, "--watch-env", &clean_pid])
        .args(["--watch-env", "masked.service", "--watch-env", "stopped.service"])
        .env_remove(variable)
        .env("PATH", path)
        .spawn()
        .expect("starting the agent");
    app.track_agent(child);
    app.wait_online(2).await;

    let (subject, summary, evidence) = crate::app::wait_for("openssl-masked", Duration::from_secs(90), || async {
        sqlx::query_as::<_, (String, String, serde_json::Value)>(
            "SELECT f.subject, f.summary, f.evidence FROM findings f JOIN hosts h ON h.id = f.host_id \
             WHERE h.name = 'e2e-watch-masked' AND f.reason = 'openssl-masked' AND f.status = 'open'",
        )
        .fetch_optional(&app.pool)
        .await
        .unwrap()
    })
    .await;
    assert_eq!(
        subject, "openssl",
        "one finding per host, as for the agent's own environment"
    );
    let masks = cipherfleet_core::provider::openssl::masked_by(variable, value).join(", ");
    for named in [
        format!("{variable}={value} in the environment of the watched service pid {masked_pid} (sleep) masks {masks}"),
        format!("the watched service unit masked.service (sleep) masks {masks}"),
        format!("the watched service unit stopped.service masks {masks}"),
        "`systemctl restart stopped.service`".to_string(),
    ] {
        assert!(summary.contains(&named), "{named:?} in {summary}");
    }
    assert!(!summary.contains("agent's environment"), "{summary}");
    assert!(
        !summary.contains(&format!("pid {clean_pid}")),
        "the clean process is no source: {summary}"
    );
    // The evidence holds every watched service as the agent read it, and none of the rest of their environment.
    let watched = evidence["openssl"]["watched"].as_array().cloned().unwrap_or_default();
    let targets: Vec<&str> = watched.iter().filter_map(|w| w["target"].as_str()).collect();
    assert_eq!(
        targets,
        [
            format!("pid {masked_pid}").as_str(),
            &format!("pid {clean_pid}"),
            "unit masked.service",
            "unit stopped.service"
        ],
        "{evidence}"
    );
    assert_eq!(watched[1]["capability_env"], serde_json::Value::Null, "{evidence}");
    assert!(!evidence.to_string().contains("PATH="), "{evidence}");

    let clean_findings: Vec<String> = sqlx::query_scalar(
        "SELECT f.reason FROM findings f JOIN hosts h ON h.id = f.host_id WHERE h.name = 'e2e-watch-clean'",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert!(
        !clean_findings.iter().any(|r| r == "openssl-masked"),
        "{clean_findings:?}"
    );
    // The host page lists the watched services and what each masks.
    let host_id: i64 = sqlx::query_scalar("SELECT id FROM hosts WHERE name = 'e2e-watch-masked'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let page = app.get(&format!("/hosts/{host_id}")).await;
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains(&format!("pid {masked_pid} (sleep): {variable}={value} (masks {masks})")),
        "{}",
        page.body
    );
}

/// A child process killed when the test ends, pass or fail.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A campaign queued for a host while it was away (its stored facts said it
/// has OpenSSL) meets an agent that came back without an `openssl`: the
/// OpenSSL jobs are skipped at its hello with the agent's reason, as points
/// on a path it lacks are, instead of being sent to fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_openssl_jobs_of_an_agent_that_lost_openssl_are_skipped_at_its_hello() {
    const LOST: &str = "e2e-lost-openssl";
    let mut app = spawn_app().await;
    let first = app.spawn_agent(LOST, &[]);
    app.wait_online(1).await;
    app.kill_agent(first);
    app.wait_host(LOST, false).await;
    let points = v1::Matrix {
        providers: vec![v1::Provider::Openssl as i32],
        ..matrix(&["aes-128-gcm"], &[1024], 0.1)
    };
    let request = v1::StartCampaignRequest {
        points: Some(v1::start_campaign_request::Points::Matrix(points)),
        hosts: Some(v1::HostSelector {
            host_names: vec![LOST.into()],
            ..Default::default()
        }),
        include_offline: true,
        started_by: "e2e".into(),
        name: "openssl gone".into(),
        ..Default::default()
    };
    let started = app
        .admin()
        .await
        .start_campaign(request)
        .await
        .expect("campaign starts")
        .into_inner();
    assert_eq!((started.jobs_created, started.points_skipped), (1, 0), "{started:?}");

    // Back, with no `openssl` on its PATH.
    let child = app
        .agent_command(LOST)
        .env("PATH", app.dir.path().join("no-such-dir"))
        .spawn()
        .expect("starting the agent");
    app.track_agent(child);
    let status = app.wait_finished(&started.campaign_id, Duration::from_secs(120)).await;
    let overall = status.overall.unwrap();
    assert_eq!(
        (status.state, overall.done, overall.failed),
        (v1::CampaignState::Completed as i32, 0, 0),
        "{status:?}"
    );
    let skipped = status
        .skipped
        .iter()
        .find(|s| s.provider == v1::Provider::Openssl as i32 && s.host_name == LOST)
        .unwrap_or_else(|| panic!("the OpenSSL point skipped for {LOST}: {status:?}"));
    assert_eq!(skipped.points, 1);
    assert!(
        skipped.reason.contains("openssl"),
        "the agent's reason: {}",
        skipped.reason
    );
}
