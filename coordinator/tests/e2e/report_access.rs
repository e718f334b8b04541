//! Who may read the report, over real HTTP: the `Host` check against DNS
//! rebinding (always on), the token of `--http-auth-token-file` (as a browser
//! sends it and as Prometheus does), and the host page's copy-paste command,
//! which must keep a hostile host name one inert shell word.

use std::process::Command;

use base64::Engine;

use crate::app::{TempDir, spawn_app};
use crate::browser::host_id;

const REPORT_TOKEN: &str = "report-token-0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_answers_known_host_names_and_asks_for_its_token() {
    let mut app = spawn_app().await;
    // Without any flag: addresses and localhost pass, a rebound name does not.
    assert_eq!(app.get("/").await.status, 200);
    assert_eq!(app.get_as("/", "localhost", &[]).await.status, 200);
    let rebound = app.get_as("/", "attacker.example:8080", &[]).await;
    assert_eq!(rebound.status, 421, "{}", rebound.body);
    assert!(
        rebound.body.contains("attacker.example") && rebound.body.contains("--http-allowed-host"),
        "{}",
        rebound.body
    );

    let token_file = app.dir.path().join("report.token");
    std::fs::write(&token_file, REPORT_TOKEN).unwrap();
    std::fs::set_permissions(&token_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    app.kill_coordinator();
    app.set_serve_args(&[
        "--http-auth-token-file",
        token_file.to_str().unwrap(),
        "--http-allowed-host",
        "report.e2e.example",
    ]);
    app.start_coordinator("127.0.0.1:0".parse().unwrap());
    let host = app.http.to_string();
    let bearer = format!("Bearer {REPORT_TOKEN}");
    let basic = |password: &str| {
        let pair = format!("someone:{password}");
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair))
    };

    // No token: 401 with the challenge a browser turns into a login prompt.
    for path in ["/", "/hosts", "/api/v1/hosts", "/metrics", "/static/style.css"] {
        let refused = app.get(path).await;
        assert_eq!(refused.status, 401, "{path}: {}", refused.body);
        assert!(
            refused
                .header("www-authenticate")
                .is_some_and(|v| v.starts_with("Basic ")),
            "{path}: {:?}",
            refused.headers
        );
        assert!(refused.body.contains("--http-auth-token-file"), "{}", refused.body);
    }
    for wrong in [basic("not-the-token"), "Bearer not-the-token".to_string()] {
        assert_eq!(app.get_as("/", &host, &[("Authorization", &wrong)]).await.status, 401);
    }
    // What a browser sends after the prompt, and what curl or Prometheus send.
    let page = app.get_as("/", &host, &[("Authorization", &basic(REPORT_TOKEN))]).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let metrics = app.get_as("/metrics", &host, &[("Authorization", &bearer)]).await;
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    assert!(metrics.body.contains("cipherfleet_"), "{}", metrics.body);
    // Probes need no token.
    assert_eq!(app.get("/healthz").await.status, 200);

    // The allowed name, with or without a port; another name, even with the token, is refused first.
    for allowed in ["report.e2e.example", "REPORT.e2e.example:8080"] {
        let page = app.get_as("/", allowed, &[("Authorization", &bearer)]).await;
        assert_eq!(page.status, 200, "{allowed}: {}", page.body);
    }
    let rebound = app.get_as("/", "attacker.example", &[("Authorization", &bearer)]).await;
    assert_eq!(rebound.status, 421, "{}", rebound.body);
    let unchallenged = app.get_as("/", "attacker.example", &[]).await;
    assert_eq!(
        unchallenged.status, 421,
        "a rebound page must not even get the login prompt"
    );
}

/// What a browser shows of `html` text: named and numeric entities decoded.
fn unescape(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let Some(semi) = rest.find(';') else { break };
        let entity = &rest[1..semi];
        let decoded = match entity {
            "lt" => Some('<'),
            "gt" => Some('>'),
            "amp" => Some('&'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .map(|hex| u32::from_str_radix(hex, 16))
                .or_else(|| entity.strip_prefix('#').map(str::parse))
                .and_then(Result::ok)
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_page_command_keeps_a_hostile_name_one_inert_word() {
    // Relative: the shell runs in `scratch`, and a name holds no `/` (it names the spool too).
    let name = "db' $(touch pwned) `touch pwned` \"<b>x</b>\" ; touch pwned";
    let scratch = TempDir::new("e2e-host-quote");
    let marker = scratch.path().join("pwned");
    let mut app = spawn_app().await;
    app.spawn_agent(name, &[]);
    app.wait_online(1).await;
    let id = host_id(&app, name).await;

    let page = app.get(&format!("/hosts/{id}")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(!page.body.contains("<b>x</b>"), "the name reached the page as markup");
    let start = page
        .body
        .find("<code class=\"command\">")
        .expect("the copy-paste command on the host page")
        + "<code class=\"command\">".len();
    let end = start + page.body[start..].find("</code>").unwrap();
    let command = unescape(&page.body[start..end]);
    let args = command
        .strip_prefix("cipherfleet-coordinator campaign start --select ")
        .unwrap_or_else(|| panic!("unexpected command {command:?}"));

    // Pasted into a real shell: one argument, the selector term exactly.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("printf '%s|' {args}"))
        .current_dir(scratch.path())
        .output()
        .expect("running sh");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("host={name}|"));
    assert!(!marker.exists(), "pasting the command ran a command");
}
