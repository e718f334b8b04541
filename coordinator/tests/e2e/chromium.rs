//! A real headless Chromium driven over the DevTools protocol, without a
//! browser-automation crate: Chromium started with `--remote-debugging-pipe`
//! reads JSON commands from fd 3 and writes answers and events to fd 4, each
//! message ended by a NUL byte. One page (a flattened target session) is enough
//! for the report's tests: navigate, evaluate, screenshot — and record every
//! sign of trouble (dialogs, uncaught exceptions, console errors, CSP violations).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::app::TempDir;

/// How long one command or one page load may take before the test fails
/// (a debug build of the coordinator on a busy 2-core machine is slow, but not this slow).
const TIMEOUT: Duration = Duration::from_secs(30);

/// Installed before any page script runs: CSP violations are also reported as
/// DOM events, which (unlike console messages) say exactly which directive failed.
const VIOLATION_RECORDER: &str = "window.__cspViolations = [];\
     document.addEventListener('securitypolicyviolation', e => window.__cspViolations.push(\
     e.violatedDirective + ' blocked ' + (e.blockedURI || 'inline') + ' at ' + e.sourceFile + ':' + e.lineNumber));";

/// Where Chromium is: `$CIPHERFLEET_CHROMIUM`, else `chromium` or `chromium-browser` on `PATH`.
pub fn find_chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CIPHERFLEET_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| [dir.join("chromium"), dir.join("chromium-browser")])
        .find(|p| p.is_file())
}

/// Everything a page did wrong since the last [`Browser::take_trouble`].
#[derive(Debug, Default)]
pub struct Trouble {
    /// `alert()`, `confirm()`, `prompt()` messages: on this report, only injected script opens one.
    pub dialogs: Vec<String>,
    /// Uncaught exceptions in page scripts.
    pub exceptions: Vec<String>,
    /// `console.error` calls and browser log entries at level error (failed loads, CSP).
    pub errors: Vec<String>,
    /// Content-Security-Policy violations as the page saw them (inline style or script refused).
    pub csp: Vec<String>,
}

impl Trouble {
    pub fn is_empty(&self) -> bool {
        self.dialogs.is_empty() && self.exceptions.is_empty() && self.errors.is_empty() && self.csp.is_empty()
    }
}

/// A running Chromium with one page. Killed (its whole process group) on drop.
pub struct Browser {
    child: Child,
    commands: std::io::PipeWriter,
    messages: Receiver<Value>,
    /// Events read while waiting for an answer, kept for [`Browser::wait_event`].
    pending: VecDeque<Value>,
    next_id: u64,
    session: String,
    trouble: Trouble,
    /// Profile and Chromium's stderr; declared last so it goes after the process.
    profile: TempDir,
}

impl Browser {
    /// Starts Chromium, or `None` (the test skips) when it is not installed.
    /// With `CIPHERFLEET_REQUIRE_CHROMIUM` set, as `deploy/test.sh` sets it, or
    /// `CI` set, a missing Chromium fails the test instead: there
    /// `deploy/install-deps.sh` has installed it, so a skip would hide a broken
    /// install and let the browser and XSS tests pass without running.
    pub fn launch() -> Option<Browser> {
        let Some(binary) = find_chromium() else {
            for required_by in ["CIPHERFLEET_REQUIRE_CHROMIUM", "CI"] {
                assert!(
                    std::env::var_os(required_by).is_none(),
                    "{required_by} is set but chromium is not installed (neither chromium nor \
                     chromium-browser on PATH): run deploy/install-deps.sh (or set CIPHERFLEET_CHROMIUM)"
                );
            }
            eprintln!(
                "\n!!! SKIPPING the browser test: chromium is not installed.\n\
                 !!! Run deploy/install-deps.sh (or set CIPHERFLEET_CHROMIUM=/path/to/chromium).\n"
            );
            return None;
        };
        Some(Browser::start(&binary))
    }

    fn start(binary: &Path) -> Browser {
        let profile = TempDir::new("chromium");
        let (to_chromium, commands) = std::io::pipe().expect("command pipe");
        let (answers, from_chromium) = std::io::pipe().expect("answer pipe");
        let (read_fd, write_fd) = (to_chromium.as_raw_fd(), from_chromium.as_raw_fd());
        let stderr = std::fs::File::create(profile.path().join("stderr.log")).expect("chromium log file");
        let mut command = Command::new(binary);
        command
            .args([
                "--headless=new",
                // The tests run as root, where Chromium's sandbox refuses to start.
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--hide-scrollbars",
                "--window-size=1400,1000",
                "--remote-debugging-pipe",
            ])
            .arg(format!("--user-data-dir={}", profile.path().join("profile").display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            // Its own process group: Drop kills the renderers and helpers too.
            .process_group(0);
        // SAFETY: between fork and exec only async-signal-safe calls (fcntl, dup2,
        // close) on descriptors this process owns; no allocation.
        unsafe {
            command.pre_exec(move || {
                // Move both ends above 4 first so the two dup2 calls cannot clobber each other;
                // dup2 leaves the copies without close-on-exec, which is what passes them on.
                let r = libc::fcntl(read_fd, libc::F_DUPFD, 5);
                let w = libc::fcntl(write_fd, libc::F_DUPFD, 5);
                if r < 0 || w < 0 || libc::dup2(r, 3) < 0 || libc::dup2(w, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(r);
                libc::close(w);
                Ok(())
            });
        }
        let child = command.spawn().unwrap_or_else(|e| {
            panic!(
                "starting {}: {e} (install it with deploy/install-deps.sh)",
                binary.display()
            )
        });
        // The child's ends live on in Chromium only: its exit then ends the reader with EOF.
        drop((to_chromium, from_chromium));

        let (tx, messages) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(answers);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(0, &mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                if buf.last() == Some(&0) {
                    buf.pop();
                }
                let Ok(message) = serde_json::from_slice::<Value>(&buf) else {
                    continue;
                };
                if tx.send(message).is_err() {
                    return;
                }
            }
        });

        let mut browser = Browser {
            child,
            commands,
            messages,
            pending: VecDeque::new(),
            next_id: 1,
            session: String::new(),
            trouble: Trouble::default(),
            profile,
        };
        let target = browser.browser_call("Target.createTarget", json!({"url": "about:blank"}));
        let target_id = target["targetId"].as_str().expect("targetId").to_string();
        let attached = browser.browser_call("Target.attachToTarget", json!({"targetId": target_id, "flatten": true}));
        browser.session = attached["sessionId"].as_str().expect("sessionId").to_string();
        for domain in ["Page.enable", "Runtime.enable", "Log.enable"] {
            browser.call(domain, json!({}));
        }
        browser.call(
            "Page.addScriptToEvaluateOnNewDocument",
            json!({"source": VIOLATION_RECORDER}),
        );
        browser
    }

    /// Loads `url` and waits for its load event (stylesheets and scripts done).
    /// Returns the HTTP status of the document.
    pub fn goto(&mut self, url: &str) -> u16 {
        self.pending
            .retain(|m| m["method"] != "Page.loadEventFired" || m["sessionId"] != self.session.as_str());
        let navigated = self.call("Page.navigate", json!({"url": url}));
        if let Some(error) = navigated["errorText"].as_str() {
            panic!("loading {url}: {error}");
        }
        self.wait_event("Page.loadEventFired", &format!("{url} to load"));
        let violations = self.eval("window.__cspViolations || []");
        for v in violations.as_array().into_iter().flatten() {
            self.trouble
                .csp
                .push(format!("{url}: {}", v.as_str().unwrap_or_default()));
        }
        let status = self.eval("performance.getEntriesByType('navigation')[0].responseStatus");
        status
            .as_u64()
            .unwrap_or_else(|| panic!("{url}: no response status ({status})")) as u16
    }

    /// Evaluates `expression` in the page (promises awaited); its value as JSON.
    pub fn eval(&mut self, expression: &str) -> Value {
        let answer = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        if let Some(details) = answer.get("exceptionDetails") {
            panic!("evaluating {expression:?} threw: {}", describe_exception(details));
        }
        answer["result"].get("value").cloned().unwrap_or(Value::Null)
    }

    /// The whole page (not only the viewport) as PNG bytes, at `scale` (1 = CSS pixels).
    pub fn screenshot(&mut self, scale: f64) -> Vec<u8> {
        let metrics = self.call("Page.getLayoutMetrics", json!({}));
        let size = &metrics["cssContentSize"];
        let clip = json!({
            "x": 0, "y": 0, "scale": scale,
            "width": size["width"].as_f64().unwrap_or(1400.0).ceil(),
            "height": size["height"].as_f64().unwrap_or(1000.0).ceil(),
        });
        let shot = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true, "clip": clip}),
        );
        base64_decode(shot["data"].as_str().expect("screenshot data"))
    }

    /// What went wrong since the last call, and starts a new record.
    pub fn take_trouble(&mut self) -> Trouble {
        // Events already read but not yet looked at count too.
        self.drain();
        std::mem::take(&mut self.trouble)
    }

    /// A command on the page's session; its `result`.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        self.send_and_wait(method, params, Some(&session))
    }

    fn browser_call(&mut self, method: &str, params: Value) -> Value {
        self.send_and_wait(method, params, None)
    }

    fn send(&mut self, method: &str, params: Value, session: Option<&str>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            message["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        if let Err(e) = self.commands.write_all(&bytes) {
            panic!("sending {method} to chromium: {e}{}", self.stderr_tail());
        }
        id
    }

    fn send_and_wait(&mut self, method: &str, params: Value, session: Option<&str>) -> Value {
        let id = self.send(method, params, session);
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let message = self.next_message(deadline, &format!("the answer to {method}"));
            if message["id"].as_u64() == Some(id) {
                if let Some(error) = message.get("error") {
                    panic!("chromium refused {method}: {error}");
                }
                return message["result"].clone();
            }
            self.pending.push_back(message);
        }
    }

    /// Waits for an event of this page named `method`; earlier events stay queued.
    fn wait_event(&mut self, method: &str, what: &str) -> Value {
        if let Some(i) = self
            .pending
            .iter()
            .position(|m| m["method"] == method && m["sessionId"] == self.session.as_str())
        {
            return self.pending.remove(i).unwrap();
        }
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let message = self.next_message(deadline, what);
            if message["method"] == method && message["sessionId"] == self.session.as_str() {
                return message;
            }
            self.pending.push_back(message);
        }
    }

    /// The next message from Chromium; events that need an answer at once
    /// (a dialog blocks the page until dismissed) or a record are handled here.
    fn next_message(&mut self, deadline: Instant, what: &str) -> Value {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = match self.messages.recv_timeout(left) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => panic!("timed out after {TIMEOUT:?} waiting for {what}"),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("chromium exited while waiting for {what}{}", self.stderr_tail())
            }
        };
        self.record(&message);
        message
    }

    /// Reads whatever Chromium has sent without waiting.
    fn drain(&mut self) {
        while let Ok(message) = self.messages.try_recv() {
            self.record(&message);
            self.pending.push_back(message);
        }
        // Nobody waits for old events beyond the current page: keep the queue short.
        self.pending
            .retain(|m| m.get("id").is_some() || m["method"] == "Page.loadEventFired");
    }

    fn record(&mut self, message: &Value) {
        let params = &message["params"];
        match message["method"].as_str() {
            Some("Page.javascriptDialogOpening") => {
                self.trouble.dialogs.push(format!(
                    "{} {:?} on {}",
                    params["type"].as_str().unwrap_or("dialog"),
                    params["message"].as_str().unwrap_or_default(),
                    params["url"].as_str().unwrap_or_default()
                ));
                // The page is frozen until the dialog goes; the answer is not waited for.
                let session = message["sessionId"].as_str().map(str::to_string);
                self.send(
                    "Page.handleJavaScriptDialog",
                    json!({"accept": false}),
                    session.as_deref(),
                );
            }
            Some("Runtime.exceptionThrown") => {
                self.trouble
                    .exceptions
                    .push(describe_exception(&params["exceptionDetails"]));
            }
            Some("Runtime.consoleAPICalled") if matches!(params["type"].as_str(), Some("error" | "assert")) => {
                let text: Vec<String> = params["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| {
                        a.get("value")
                            .map(Value::to_string)
                            .unwrap_or_else(|| a["description"].to_string())
                    })
                    .collect();
                self.trouble.errors.push(format!("console.error: {}", text.join(" ")));
            }
            // Browsers ask for /favicon.ico on their own; the report has none and needs none.
            Some("Log.entryAdded")
                if params["entry"]["level"] == "error"
                    && !params["entry"]["url"]
                        .as_str()
                        .is_some_and(|u| u.ends_with("/favicon.ico")) =>
            {
                let entry = &params["entry"];
                self.trouble.errors.push(format!(
                    "{} {}: {} ({})",
                    entry["source"].as_str().unwrap_or_default(),
                    entry["level"].as_str().unwrap_or_default(),
                    entry["text"].as_str().unwrap_or_default(),
                    entry["url"].as_str().unwrap_or_default()
                ));
            }
            _ => {}
        }
    }

    /// The end of Chromium's stderr, for a failure message.
    fn stderr_tail(&self) -> String {
        let log = std::fs::read_to_string(self.profile.path().join("stderr.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        format!("\nchromium stderr (last lines):\n{tail}")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The group id is the child's pid (process_group(0)): this reaches exactly the
        // processes Chromium started, renderers included, and nothing else.
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) with a negative pid signals that process group; no memory involved.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

fn describe_exception(details: &Value) -> String {
    let description = details["exception"]["description"].as_str();
    format!(
        "{} at {}:{}",
        description.unwrap_or_else(|| details["text"].as_str().unwrap_or("exception")),
        details["url"].as_str().unwrap_or("?"),
        details["lineNumber"]
    )
}

/// Standard base64 (with padding) as Chromium sends screenshots; no crate for
/// twenty lines.
fn base64_decode(text: &str) -> Vec<u8> {
    fn value(c: u8) -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {:?}", c as char),
        }
    }
    let bytes: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let data: Vec<u8> = chunk.iter().copied().filter(|&c| c != b'=').collect();
        let mut n = 0u32;
        for (i, &c) in data.iter().enumerate() {
            n |= value(c) << (18 - 6 * i);
        }
        let produced = data.len().saturating_sub(1);
        out.extend_from_slice(&n.to_be_bytes()[1..1 + produced]);
    }
    out
}

#[test]
fn base64_decodes_padded_and_unpadded_ends() {
    for (text, bytes) in [
        ("", &b""[..]),
        ("Zg==", b"f"),
        ("Zm8=", b"fo"),
        ("Zm9v", b"foo"),
        ("Zm9vYmFy", b"foobar"),
        ("iVBORw0KGgo=", b"\x89PNG\r\n\x1a\n"),
    ] {
        assert_eq!(base64_decode(text), bytes, "{text}");
    }
}
