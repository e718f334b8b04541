//! `--watch-env PID|UNIT`: the OpenSSL capability variable in the environment
//! of a service the operator points at. nginx, HAProxy or PostgreSQL started
//! with `OPENSSL_ia32cap=~0x200000200000000` run AES in software whatever the
//! agent's own environment says; the coordinator's `openssl-masked` names them.
//!
//! A number is a process id: its `/proc/PID/environ` (the environment it was
//! started with) and `/proc/PID/comm`. Anything else is a systemd unit: its
//! `MainPID`'s environment, or its `Environment=` when it has no process the
//! agent can read (not running; or hidden from the agent, as the installed
//! unit's `ProtectProc=invisible` hides other users' processes).
//!
//! Of another process's environment only the capability variable is kept: the
//! rest can hold secrets. A target that cannot be read is reported with its
//! reason, never fatal. What a value masks is the one rule in core
//! ([`masked_by`]).

use std::fmt;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cipherfleet_core::provider::facts::WatchedService;
use cipherfleet_core::provider::openssl::{capability_variable, masked_by};
use cipherfleet_core::wire;

/// At most this many `--watch-env` targets: each is a line of the facts.
pub const MAX_TARGETS: usize = 16;

/// How long `systemctl` may take to answer before the target is reported unread.
const SYSTEMCTL_TIMEOUT: Duration = Duration::from_secs(5);

/// One `--watch-env` argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchTarget {
    Pid(u32),
    /// A systemd unit, as given (`nginx` means `nginx.service` to systemctl).
    Unit(String),
}

impl WatchTarget {
    /// A `--watch-env` value: digits are a process id, anything else a unit.
    /// Refuses what is obviously no target: empty, a control character (NUL,
    /// newline), a leading `-` (systemctl would read it as an option), pid 0.
    pub fn parse(s: &str) -> Result<WatchTarget, String> {
        if s.trim().is_empty() {
            return Err("empty: give a process id or a systemd unit".into());
        }
        if s.chars().any(char::is_control) {
            return Err(format!(
                "{:?} holds a control character: give a process id or a systemd unit",
                s
            ));
        }
        if s.bytes().all(|b| b.is_ascii_digit()) {
            return match s.parse::<u32>() {
                Ok(0) | Err(_) => Err(format!("{s} is not a process id")),
                Ok(pid) => Ok(WatchTarget::Pid(pid)),
            };
        }
        if s.starts_with('-') || s.chars().any(char::is_whitespace) || s.len() > wire::MAX_FIELD_LEN {
            return Err(format!("{s:?} is neither a process id nor a systemd unit name"));
        }
        Ok(WatchTarget::Unit(s.to_string()))
    }
}

impl fmt::Display for WatchTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WatchTarget::Pid(pid) => write!(f, "pid {pid}"),
            WatchTarget::Unit(unit) => write!(f, "unit {unit}"),
        }
    }
}

/// The targets as a whole: at most [`MAX_TARGETS`], none twice.
pub fn check_targets(targets: &[WatchTarget]) -> Result<(), String> {
    if targets.len() > MAX_TARGETS {
        return Err(format!("{} targets; at most {MAX_TARGETS}", targets.len()));
    }
    for (i, t) in targets.iter().enumerate() {
        if targets[..i].contains(t) {
            return Err(format!("{t} given twice"));
        }
    }
    Ok(())
}

/// What `target`'s environment holds of this architecture's capability
/// variable, read now (a restarted service has a new process).
pub fn read(target: &WatchTarget) -> WatchedService {
    let mut watched = WatchedService {
        target: target.to_string(),
        ..WatchedService::default()
    };
    let Some(variable) = capability_variable(std::env::consts::ARCH) else {
        watched.error = Some("no OpenSSL capability variable is known for this architecture".into());
        return watched;
    };
    let found = match target {
        WatchTarget::Pid(pid) => read_process(*pid, variable),
        WatchTarget::Unit(unit) => read_unit(unit, variable),
    };
    match found {
        Ok(found) => {
            watched.name = found.name;
            watched.source = found.source;
            if let Some(value) = found.value {
                watched.masked = masked_by(variable, &value).into_iter().map(str::to_string).collect();
                watched.capability_env = Some(format!("{variable}={value}"));
            }
        }
        Err(why) => watched.error = Some(wire::truncate(why, wire::MAX_FIELD_LEN)),
    }
    watched
}

/// What was read of one target.
struct Found {
    name: Option<String>,
    source: String,
    value: Option<String>,
}

fn read_process(pid: u32, variable: &str) -> Result<Found, String> {
    let source = format!("/proc/{pid}/environ");
    let environ = std::fs::read(&source).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("no process {pid} (or hidden from the agent)"),
        std::io::ErrorKind::PermissionDenied => {
            format!("permission denied reading {source}: the agent reads another user's processes only as root")
        }
        _ => format!("reading {source}: {e}"),
    })?;
    let name = std::fs::read(format!("/proc/{pid}/comm"))
        .ok()
        .map(|comm| text(comm.strip_suffix(b"\n").unwrap_or(&comm)));
    Ok(Found {
        name,
        source,
        value: capability_in_environ(&environ, variable),
    })
}

fn read_unit(unit: &str, variable: &str) -> Result<Found, String> {
    let main_pid = systemctl(&["show", "--property=MainPID", "--value", "--", unit])?;
    let pid: u32 = main_pid.trim().parse().map_err(|_| {
        format!(
            "systemctl gives no MainPID for {unit}: {:?}",
            wire::truncate(main_pid.trim().to_string(), 64)
        )
    })?;
    let unread = if pid == 0 {
        "not running".to_string()
    } else {
        match read_process(pid, variable) {
            Ok(found) => return Ok(found),
            Err(why) => why,
        }
    };
    let shown = systemctl(&["show", "--property=LoadState", "--property=Environment", "--", unit])?;
    let property = |name: &str| {
        shown
            .lines()
            .find_map(|l| l.strip_prefix(name).and_then(|l| l.strip_prefix('=')))
            .unwrap_or("")
    };
    if property("LoadState") == "not-found" {
        return Err(format!("no unit {unit}"));
    }
    Ok(Found {
        name: None,
        source: format!("the unit's Environment= ({unread})"),
        value: capability_in_unit_environment(property("Environment"), variable),
    })
}

/// The value of `variable` in an environment block as `/proc/PID/environ`
/// holds it (`NAME=value` entries, each ended by a NUL): the first, as
/// `getenv` finds it. Bytes that are not UTF-8 read as U+FFFD.
pub fn capability_in_environ(environ: &[u8], variable: &str) -> Option<String> {
    environ
        .split(|b| *b == 0)
        .find_map(|entry| entry.strip_prefix(variable.as_bytes())?.strip_prefix(b"="))
        .map(text)
}

/// The value of `variable` in a unit's `Environment` property as `systemctl
/// show` prints it (`A=1 "B=two words"`): the last, as systemd lets a later
/// assignment replace an earlier one.
pub fn capability_in_unit_environment(environment: &str, variable: &str) -> Option<String> {
    let prefix = format!("{variable}=");
    shell_words(environment)
        .iter()
        .rev()
        .find_map(|w| w.strip_prefix(&prefix).map(|v| text(v.as_bytes())))
}

/// `text` split at blanks outside double or single quotes, quotes removed and
/// a backslash taking the next character as it is.
fn shell_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, '"' | '\'') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (Some(q), c) if c == q => quote = None,
            (_, '\\') => word.get_or_insert_with(String::new).extend(chars.next()),
            (_, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// Another process's bytes as facts may carry them: UTF-8 (else U+FFFD), no
/// longer than a field may be.
fn text(bytes: &[u8]) -> String {
    wire::truncate(String::from_utf8_lossy(bytes).into_owned(), wire::MAX_FIELD_LEN)
}

/// `systemctl ARGS…`'s stdout, or why it gave none within [`SYSTEMCTL_TIMEOUT`].
fn systemctl(args: &[&str]) -> Result<String, String> {
    let mut child = Command::new("systemctl")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "no systemctl on PATH (not a systemd host?)".to_string(),
            _ => format!("could not start systemctl: {e}"),
        })?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < SYSTEMCTL_TIMEOUT => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("systemctl gave no answer in {} s", SYSTEMCTL_TIMEOUT.as_secs()));
            }
            Err(e) => return Err(format!("waiting for systemctl: {e}")),
        }
    };
    let mut out = Vec::new();
    let mut err = Vec::new();
    // Small answers: they fit the pipe, so the process could exit before they are read.
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_end(&mut out);
    }
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_end(&mut err);
    }
    if !status.success() {
        let said = String::from_utf8_lossy(&err);
        let said = said.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        return Err(format!("systemctl {} failed ({status}): {said}", args.join(" ")));
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_is_a_pid_anything_else_a_unit_and_nonsense_is_refused() {
        assert_eq!(WatchTarget::parse("1234"), Ok(WatchTarget::Pid(1234)));
        assert_eq!(
            WatchTarget::parse("nginx.service"),
            Ok(WatchTarget::Unit("nginx.service".into()))
        );
        assert_eq!(
            WatchTarget::parse("postgresql@16-main"),
            Ok(WatchTarget::Unit("postgresql@16-main".into()))
        );
        assert_eq!(WatchTarget::parse("1234").unwrap().to_string(), "pid 1234");
        assert_eq!(WatchTarget::parse("nginx").unwrap().to_string(), "unit nginx");
        for bad in [
            "",
            "  ",
            "0",
            "99999999999",
            "ngi\0nx",
            "nginx\n",
            "a\nb",
            "-H",
            "--host=x",
            "two words",
        ] {
            assert!(WatchTarget::parse(bad).is_err(), "{bad:?} accepted");
        }
        let targets = [WatchTarget::Pid(1), WatchTarget::Unit("a".into()), WatchTarget::Pid(1)];
        assert_eq!(check_targets(&targets[..2]), Ok(()));
        assert_eq!(check_targets(&targets), Err("pid 1 given twice".into()));
        let many: Vec<WatchTarget> = (1..=MAX_TARGETS as u32 + 1).map(WatchTarget::Pid).collect();
        assert!(check_targets(&many).unwrap_err().contains("at most 16"));
    }

    #[test]
    fn the_variable_is_found_in_a_nul_separated_environment_and_nothing_else_is_kept() {
        let environ = b"PATH=/usr/bin\0SECRET=hunter2\0OPENSSL_ia32cap=~0x200000200000000\0OPENSSL_ia32cap=0\0";
        assert_eq!(
            capability_in_environ(environ, "OPENSSL_ia32cap").as_deref(),
            Some("~0x200000200000000"),
            "the first, as getenv reads it"
        );
        // A name that only starts with the variable's, and a missing one.
        assert_eq!(capability_in_environ(b"OPENSSL_ia32capX=1\0", "OPENSSL_ia32cap"), None);
        assert_eq!(capability_in_environ(b"HOME=/root\0", "OPENSSL_ia32cap"), None);
        assert_eq!(capability_in_environ(b"", "OPENSSL_armcap"), None);
        // The last entry without its NUL, an empty value, bytes that are not UTF-8.
        assert_eq!(
            capability_in_environ(b"A=1\0OPENSSL_armcap=0", "OPENSSL_armcap").as_deref(),
            Some("0")
        );
        assert_eq!(
            capability_in_environ(b"OPENSSL_armcap=\0", "OPENSSL_armcap").as_deref(),
            Some("")
        );
        assert_eq!(
            capability_in_environ(b"OPENSSL_ia32cap=~0x2\xff\xfe\0", "OPENSSL_ia32cap").as_deref(),
            Some("~0x2\u{FFFD}\u{FFFD}")
        );
        let long = [b"OPENSSL_ia32cap=".as_slice(), &[b'f'; 1000]].concat();
        assert_eq!(
            capability_in_environ(&long, "OPENSSL_ia32cap").unwrap().len(),
            wire::MAX_FIELD_LEN
        );
    }

    #[test]
    fn the_variable_is_found_in_a_units_environment_property() {
        let v = |text: &str| capability_in_unit_environment(text, "OPENSSL_ia32cap");
        assert_eq!(
            v("LANG=C OPENSSL_ia32cap=~0x200000200000000 \"GREETING=hello world\"").as_deref(),
            Some("~0x200000200000000")
        );
        assert_eq!(
            v("\"OPENSSL_ia32cap=~0x2 :~0x20\" OTHER=1").as_deref(),
            Some("~0x2 :~0x20")
        );
        assert_eq!(v("OPENSSL_ia32cap=1 OPENSSL_ia32cap=~0x2").as_deref(), Some("~0x2"));
        assert_eq!(v("'OPENSSL_ia32cap=a\\'b'").as_deref(), Some("a'b"));
        assert_eq!(v("LANG=C \"X=OPENSSL_ia32cap=1\""), None);
        assert_eq!(v(""), None);
    }

    /// Waits until `pid`'s new environment is in place: `spawn` returns once
    /// exec has closed the parent's pipe, a moment before the kernel sets it up.
    fn settled(pid: u32) {
        let started = Instant::now();
        while std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|e| e.is_empty())
            && started.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_process_environment_is_read_for_its_variable_and_a_missing_one_is_reported() {
        let Some(variable) = capability_variable(std::env::consts::ARCH) else {
            return;
        };
        let mut child = Command::new("sleep")
            .arg("30")
            .env(variable, "~0x200000200000000")
            .env("CIPHERFLEET_TEST_SECRET", "do-not-copy")
            .spawn()
            .unwrap();
        settled(child.id());
        let watched = read(&WatchTarget::Pid(child.id()));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(watched.error, None, "{watched:?}");
        assert_eq!(watched.name.as_deref(), Some("sleep"));
        assert_eq!(watched.source, format!("/proc/{}/environ", child.id()));
        assert_eq!(watched.capability_env, Some(format!("{variable}=~0x200000200000000")));
        assert_eq!(
            watched.masked,
            masked_by(variable, "~0x200000200000000"),
            "the one rule in core"
        );
        assert!(!format!("{watched:?}").contains("do-not-copy"));
        // pid_max is at most 2^22: no such process.
        let gone = read(&WatchTarget::Pid(u32::MAX));
        assert!(
            gone.error.as_deref().is_some_and(|e| e.contains("no process")),
            "{gone:?}"
        );
        assert_eq!((gone.capability_env, gone.masked.len()), (None, 0));
    }
}
