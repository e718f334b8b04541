//! The fleet's harness: `deploy/fleet.sh` with names and a subnet of this
//! test process's own, the clean-up of killed runs, and what the machine must
//! have for the process hosts and for the VM hosts.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::app::TempDir;

use super::{NETNS_PREFIX, PROCESS_HOSTS, VM_HOSTS};

pub(super) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// One run of `deploy/fleet.sh` with names and a subnet of this process's own,
/// so two test runs (or a quickstart fleet) never meet. `down --purge` on drop.
pub(super) struct Fleet {
    env: Vec<(&'static str, String)>,
    /// The hosts this run starts.
    pub(super) hosts: Vec<&'static str>,
    pub(super) bridge_ip: String,
    dir: PathBuf,
    /// Holds `dir`; dropped after `down`.
    _tmp: TempDir,
}

impl Fleet {
    pub(super) fn for_pid(pid: u32, tmp: TempDir, vms: bool) -> Fleet {
        let net = format!("10.{}.{}", 150 + (pid >> 8) % 50, pid & 0xff);
        let dir = tmp.path().join("fleet");
        let mut hosts = PROCESS_HOSTS.to_vec();
        if vms {
            hosts.extend(VM_HOSTS);
        }
        let env = vec![
            ("CIPHERFLEET_FLEET_HOSTS", hosts.join(" ")),
            // The same CPU (QEMU's `max`) wherever the test runs, KVM or not.
            ("CIPHERFLEET_FLEET_VM_ACCEL", "tcg".into()),
            ("CIPHERFLEET_FLEET_DIR", dir.display().to_string()),
            ("CIPHERFLEET_FLEET_SUBNET", format!("{net}.0/24")),
            ("CIPHERFLEET_FLEET_BRIDGE", format!("cff{pid}")),
            ("CIPHERFLEET_FLEET_NETNS", format!("{NETNS_PREFIX}{pid}-")),
            ("CIPHERFLEET_FLEET_BIN", repo().join("dist").display().to_string()),
            // Workers at the default niceness get too little CPU on a busy machine to measure.
            ("CIPHERFLEET_FLEET_AGENT_ARGS", "--nice 0".into()),
        ];
        Fleet {
            env,
            hosts,
            bridge_ip: format!("{net}.1"),
            dir,
            _tmp: tmp,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(repo().join("deploy/fleet.sh"));
        c.args(args).envs(self.env.iter().map(|(k, v)| (*k, v.as_str())));
        c.env_remove("CIPHERFLEET_COORDINATOR")
            .env_remove("CIPHERFLEET_CA_CERT");
        c
    }

    /// `fleet.sh ARGS…`; panics with its output (and the agents' logs) when it fails.
    pub(super) async fn run(&self, args: &[&str]) -> String {
        let out: Output = tokio::process::Command::from(self.command(args))
            .output()
            .await
            .expect("running deploy/fleet.sh");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "fleet.sh {}: {}\n{stdout}{}\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr),
            self.logs()
        );
        stdout
    }

    /// The agent's pid as `fleet.sh up` recorded it.
    pub(super) fn pid(&self, host: &str) -> i32 {
        let path = self.dir.join("run").join(format!("{host}.pid"));
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .trim()
            .parse()
            .unwrap()
    }

    /// A host's log: the agent's, or a VM's console.
    pub(super) fn log(&self, host: &str) -> String {
        let bytes = std::fs::read(self.dir.join("log").join(format!("{host}.log"))).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The kernel release a VM host's console says it booted last (`uname -r` in its init).
    pub(super) fn booted_kernel(&self, host: &str) -> String {
        let log = self.log(host);
        log.lines()
            .filter(|l| l.contains("reached /init"))
            .filter_map(|l| l.strip_prefix("cipherfleet-vm: kernel ")?.split(' ').next())
            .next_back()
            .unwrap_or_else(|| panic!("{host}'s console names no kernel:\n{log}"))
            .to_string()
    }

    /// The end of every agent's log, for a failure message.
    pub(super) fn logs(&self) -> String {
        self.hosts
            .iter()
            .map(|h| {
                let log = self.log(h);
                let tail: Vec<&str> = log.lines().rev().take(15).collect();
                format!(
                    "--- {h}.log (last lines)\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        match self.command(&["down", "--purge"]).output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "fleet.sh down failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => eprintln!("fleet.sh down did not run: {e}"),
        }
    }
}

/// Fleets of earlier runs that were killed before their `down` (their pid is gone).
pub(super) fn remove_stale_fleets() {
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return;
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_prefix(NETNS_PREFIX)?.split('-').next()?.parse().ok()
        })
        .filter(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        .collect();
    pids.sort_unstable();
    pids.dedup();
    for pid in pids {
        kill_stale_vms(pid);
        drop(Fleet::for_pid(pid, TempDir::new("stale-fleet"), false));
    }
}

/// The VMs of a killed run: their pid files went with its directory, so they are
/// found by their tap on that run's bridge (`ifname=cff<pid>-N`).
fn kill_stale_vms(run: u32) {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    let tap = format!("ifname=cff{run}-");
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline.starts_with("qemu-system-") && cmdline.contains(&tap) {
            // SAFETY: kill has no memory preconditions; the pid is a qemu of this test's own.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// Why the test cannot run here (skipped, or failed where it is required).
pub(super) fn unsuitable_machine() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root: network namespaces and a bridge need root (CI runs the tests as root)".into());
    }
    let probe = format!("{NETNS_PREFIX}probe-{}", std::process::id());
    let made = Command::new("ip").args(["netns", "add", &probe]).output();
    match made {
        Ok(out) if out.status.success() => {
            let _ = Command::new("ip").args(["netns", "del", &probe]).status();
            None
        }
        Ok(out) => Some(format!(
            "no network namespaces here: ip netns add: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Some(format!("no network namespaces here: ip (iproute2): {e}")),
    }
}

/// What an installation or build step provides, if missing.
pub(super) fn missing_prerequisite() -> Option<String> {
    if std::env::consts::ARCH != "x86_64" {
        return Some("not x86-64: most of the fleet's hosts are x86-64".into());
    }
    let binaries = [
        "x86_64-unknown-linux-musl/cipherfleet-agent",
        "x86_64-unknown-linux-musl/cipherfleet-agent-soft",
        "aarch64-unknown-linux-musl/cipherfleet-agent",
    ];
    for bin in binaries {
        let path = repo().join("dist").join(bin);
        if !path.is_file() {
            return Some(format!("{} is missing: run deploy/build-static.sh", path.display()));
        }
    }
    for qemu in ["qemu-x86_64-static", "qemu-aarch64-static"] {
        if !Command::new(qemu)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Some(format!("{qemu} is missing: run deploy/install-deps.sh"));
        }
    }
    None
}

/// Why the VM hosts cannot run here: qemu-system, or what `deploy/vm/image.sh`
/// needs to make their boot files (it says which package is missing).
pub(super) fn missing_vm_prerequisite() -> Option<String> {
    if !Command::new("qemu-system-x86_64")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Some("qemu-system-x86_64 is missing: run deploy/install-deps.sh".into());
    }
    let image = Command::new(repo().join("deploy/vm/image.sh"))
        .args(["build", "amd64"])
        .env("CIPHERFLEET_FLEET_BIN", repo().join("dist"))
        .output();
    match image {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        Err(e) => Some(format!("deploy/vm/image.sh did not run: {e}")),
    }
}

/// Skips (returns true) or, where the variables say the machine must run it, fails.
pub(super) fn skip(why: &str, required_by: &[&str]) -> bool {
    for var in required_by {
        assert!(std::env::var_os(var).is_none(), "{var} is set but {why}");
    }
    eprintln!("\n!!! SKIPPED every_host_of_the_fleet_runs_one_campaign_through_link_cuts_and_kills: {why}\n");
    true
}
