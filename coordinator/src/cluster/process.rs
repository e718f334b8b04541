//! Telling whether a coordinator's process still runs, from `/proc`: a PID
//! with its start time is one process of one boot, seen alike by every process
//! of its PID namespace. Only a process that is certainly gone counts as dead;
//! anything that cannot be read counts as alive.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use uuid::Uuid;

use crate::store::coordinators::Process;

/// This process.
pub fn this() -> Process {
    let pid = std::process::id() as i32;
    Process {
        boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .and_then(|s| Uuid::parse_str(s.trim()).ok()),
        pid_namespace: std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino() as i64),
        // SAFETY: geteuid has no preconditions and cannot fail.
        uid: Some(i64::from(unsafe { libc::geteuid() })),
        pid,
        pid_start: start_ticks(Path::new("/proc/self/stat")),
    }
}

/// This process's network namespace (the inode of `/proc/self/ns/net`).
pub fn net_namespace() -> Option<i64> {
    std::fs::metadata("/proc/self/ns/net").ok().map(|m| m.ino() as i64)
}

/// Whether process `pid` started at `start` (clock ticks after boot) is gone:
/// no such PID, or the PID now belongs to a process started at another time.
/// False when it runs, or when `/proc` cannot tell.
pub fn is_gone(pid: i32, start: i64) -> bool {
    let stat = Path::new("/proc").join(pid.to_string()).join("stat");
    match std::fs::read_to_string(&stat) {
        Ok(text) => parse_start(&text).is_some_and(|now| now != start),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

fn start_ticks(stat: &Path) -> Option<i64> {
    parse_start(&std::fs::read_to_string(stat).ok()?)
}

/// Field 22 of `/proc/PID/stat`, `starttime`. The second field, the command,
/// is in parentheses and may itself hold spaces and parentheses, so fields
/// are counted after the last `)`.
fn parse_start(stat: &str) -> Option<i64> {
    let after = &stat[stat.rfind(')')? + 1..];
    // After the command come fields 3 (state) onwards.
    after.split_whitespace().nth(22 - 3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_read_after_a_command_with_spaces_and_parentheses() {
        let stat = "4242 (cipher (fleet) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 98765 1000 10";
        assert_eq!(parse_start(stat), Some(98765));
        assert_eq!(parse_start("4242 (short) S 1"), None);
        assert_eq!(parse_start("garbage"), None);
    }

    #[test]
    fn this_process_runs_and_a_pid_with_another_start_time_is_another_process() {
        let me = this();
        let start = me.pid_start.expect("/proc/self/stat readable");
        assert!(me.boot_id.is_some() && me.pid_namespace.is_some());
        assert!(!is_gone(me.pid, start), "this process runs");
        assert!(is_gone(me.pid, start + 1), "the same PID started at another time");
        // PIDs never reach i32::MAX (the kernel's limit is 2^22).
        assert!(is_gone(i32::MAX, start), "no such PID");
    }
}
