//! The host's OpenSSL, driven through its `openssl` binary: a static agent
//! cannot load libcrypto, so it runs `openssl speed` as the Phoronix Test
//! Suite does, and records which binary, which library and which build ran.
//!
//! - [`version`]: `openssl version -a` read back.
//! - [`speed`]: the `openssl speed` command line and its output read back.
//! - [`measure`]: one point in the worker: runs, figures, the path inferred.
//! - [`watch`]: `--watch-env`: the capability variable in a service's environment.
//!
//! Every `openssl` command runs under the worker prefix
//! ([`crate::worker::PREFIX_ENV`]): on an emulated host the host's OpenSSL
//! runs on the emulated CPU too.

pub mod measure;
pub mod speed;
pub mod version;
pub mod watch;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cipherfleet_core::provider::facts::OpensslBuild;
use cipherfleet_core::provider::openssl::{capability_variable, masked_by};

/// The `openssl` to run: `explicit` (`--openssl PATH`), else the first on `PATH`.
pub fn find(explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(path) = explicit {
        return if path.is_file() {
            Ok(path.to_path_buf())
        } else {
            Err(format!("{} (from --openssl) is not a file", path.display()))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("openssl"))
        .find(|p| p.is_file())
        .ok_or_else(|| "no `openssl` on PATH (install the openssl package, or give --openssl PATH)".to_string())
}

/// `openssl ARGS…` under the worker prefix.
pub fn command(binary: &Path) -> Command {
    match crate::worker::worker_prefix() {
        Some(prefix) => {
            let mut c = Command::new(&prefix[0]);
            c.args(&prefix[1..]).arg(binary);
            c
        }
        None => Command::new(binary),
    }
}

/// Runs `openssl args` with `input` on stdin; its stdout, or why it failed.
pub fn run(binary: &Path, args: &[&str], input: &[u8]) -> Result<Vec<u8>, String> {
    let mut child = command(binary)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not start {}: {e}", binary.display()))?;
    let mut stdin = child.stdin.take().expect("piped");
    // A binary that exits at once closes stdin; its status says why.
    let _ = stdin.write_all(input);
    drop(stdin);
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for {}: {e}", binary.display()))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        let said = String::from_utf8_lossy(&out.stderr);
        let said = said.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        // It reaches the host's facts (a capability's reason): with a NUL the
        // coordinator could store none of them, and would refuse the hello.
        let error = format!("`openssl {}` failed ({}): {said}", args.join(" "), out.status);
        Err(cipherfleet_core::wire::storable_text(&error).into_owned())
    }
}

/// What `binary` is: `openssl version -a`, the libcrypto it maps and any
/// capability override in this process's environment. Fails when the binary
/// does not run or is not OpenSSL.
pub fn inspect(binary: &Path) -> Result<OpensslBuild, String> {
    // Its lines become facts the database stores, which hold no NUL.
    let text = String::from_utf8_lossy(&run(binary, &["version", "-a"], b"")?).replace('\0', "\u{FFFD}");
    if !text.starts_with("OpenSSL") && !text.starts_with("LibreSSL") {
        let first = text.lines().next().unwrap_or("nothing");
        return Err(format!(
            "{} is not OpenSSL: `version -a` says {first:?}",
            binary.display()
        ));
    }
    let mut build = version::parse(&binary.display().to_string(), &text);
    build.libcrypto = libcrypto(binary);
    if let Some(name) = capability_variable(std::env::consts::ARCH)
        && let Ok(value) = std::env::var(name)
    {
        build.masked = masked_by(name, &value).into_iter().map(str::to_string).collect();
        build.capability_env = Some(format!("{name}={value}"));
    }
    Ok(build)
}

/// The libcrypto `binary` maps when it runs: read from `/proc/PID/maps` of an
/// `openssl dgst` waiting on its stdin (under the prefix the emulator maps it).
/// `None` for a static build, or when it could not be seen in time.
fn libcrypto(binary: &Path) -> Option<String> {
    let mut child = command(binary)
        .args(["dgst", "-sha256"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let maps = format!("/proc/{}/maps", child.id());
    let started = Instant::now();
    let mut found = None;
    while started.elapsed() < Duration::from_secs(5) {
        let text = std::fs::read_to_string(&maps).unwrap_or_default();
        found = text
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("libcrypto"))
            .map(str::to_string);
        // The dynamic loader maps libcrypto before main; libc marks it done.
        if found.is_some() || text.contains("/libc.so") || text.contains("/libc-") {
            break;
        }
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(child.stdin.take());
    let _ = child.kill();
    let _ = child.wait();
    found
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn an_openssl_that_fails_saying_a_nul_is_reported_without_it() {
        let dir = std::env::temp_dir().join(format!("cipherfleet-nul-openssl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fake = dir.join("openssl");
        std::fs::write(&fake, "#!/bin/sh\nprintf 'bad\\000byte\\n' >&2\nexit 3\n").unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let error = inspect(&fake).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            !error.contains('\0')
                && error.contains("bad\u{FFFD}byte")
                && error.contains(cipherfleet_core::wire::NUL_REPLACED),
            "{error:?}"
        );
    }
}
