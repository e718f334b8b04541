//! The on-disk spool: every job outcome is written here before it is sent, and
//! stays until the coordinator acknowledges it, across restarts of either side.
//!
//! One file per outcome, `outcome-<job id>.json` (the id percent-encoded so a
//! coordinator-chosen id cannot name another path), written atomically: a
//! temporary file, fsync, rename, fsync of the directory. `running.json` marks
//! the job in progress, so an agent that was killed mid-job reports that job as
//! failed on its next start instead of leaving the coordinator waiting. A lock
//! on `.lock` keeps two agents off one spool.
//!
//! Bounded: at most [`MAX_OUTCOMES`] outcomes and [`MAX_BYTES`] on disk.
//! Making room drops unreadable files first, oldest first, then the oldest
//! outcomes (their jobs are re-run when the coordinator misses them). Files
//! moved aside as `*.unreadable` are deleted after [`UNREADABLE_KEPT`]. A job
//! id too long for a file name is hashed into one. The directory must belong
//! to this user and be closed to others (mode 0700).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};

use cipherfleet_core::spec::JobSpec;

use crate::session::Outcome;

const OUTCOME_PREFIX: &str = "outcome-";
const RUNNING: &str = "running.json";
const TMP_PREFIX: &str = ".tmp-";
const UNREADABLE: &str = "unreadable";

/// Most files kept (outcomes and unreadable ones): what one `Hello` can list as spooled.
pub const MAX_OUTCOMES: usize = cipherfleet_core::wire::MAX_SPOOLED_JOB_IDS;
/// Most bytes the spool's files may take.
pub const MAX_BYTES: u64 = 64 << 20;
/// How long a file moved aside as unreadable is kept for a look.
pub const UNREADABLE_KEPT: Duration = Duration::from_secs(7 * 24 * 3600);
/// Longest encoded job id kept in a file name; longer ones are hashed.
const MAX_NAME_ID_LEN: usize = 96;

/// What `running.json` holds while a job runs.
#[derive(Serialize, Deserialize)]
struct RunningMarker {
    job_id: String,
    spec: JobSpec,
}

/// A spool directory, locked for this process.
#[derive(Clone, Debug)]
pub struct Spool {
    dir: PathBuf,
    // Held open for the lock; the lock goes when the last clone is dropped.
    _lock: Arc<File>,
}

impl Spool {
    /// Creates the directory (mode 0700) if needed, takes its lock, and clears
    /// temporary files a crash left behind.
    pub fn open(dir: &Path) -> anyhow::Result<Spool> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating the spool directory {}", dir.display()))?;
        check_owner_and_mode(dir)?;
        let lock_path = dir.join(".lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .with_context(|| format!("opening {}", lock_path.display()))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => bail!(
                "another agent is using the spool directory {}; give each agent its own --spool-dir",
                dir.display()
            ),
            Err(fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", lock_path.display()));
            }
        }
        let spool = Spool {
            dir: dir.to_path_buf(),
            _lock: Arc::new(lock),
        };
        for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with(TMP_PREFIX) {
                let _ = fs::remove_file(entry.path());
            }
        }
        spool.prune_unreadable(SystemTime::now());
        Ok(spool)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stores an outcome durably, replacing any earlier one for the same job;
    /// first makes room within [`MAX_OUTCOMES`] and [`MAX_BYTES`].
    pub fn write(&self, outcome: &Outcome) -> io::Result<()> {
        let bytes = serde_json::to_vec(outcome).map_err(io::Error::other)?;
        let name = outcome_file(&outcome.job_id);
        self.make_room(&name, bytes.len() as u64, MAX_OUTCOMES, MAX_BYTES)?;
        self.write_atomically(&name, &bytes)
    }

    /// Deletes files until one more of `size` bytes fits within `max_files`
    /// (outcomes and unreadable files) and `max_bytes`: unreadable files first,
    /// then outcomes, each oldest first. `name` (being replaced) does not count.
    fn make_room(&self, name: &str, size: u64, max_files: usize, max_bytes: u64) -> io::Result<()> {
        let mut files: Vec<(bool, SystemTime, PathBuf, u64)> = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            let file_name = entry.file_name().to_string_lossy().into_owned();
            let outcome = file_name.starts_with(OUTCOME_PREFIX) && file_name.ends_with(".json");
            let unreadable = file_name.ends_with(&format!(".{UNREADABLE}"));
            if file_name == name || !(outcome || unreadable) {
                continue;
            }
            let meta = entry.metadata()?;
            files.push((outcome, meta.modified().unwrap_or(UNIX_EPOCH), entry.path(), meta.len()));
        }
        // Unreadable (false) before outcomes (true), each oldest first.
        files.sort();
        // Unreadable files count too: a spool full of junk is still bounded.
        let mut count = files.len();
        let mut bytes: u64 = files.iter().map(|f| f.3).sum();
        for (outcome, _, path, len) in files {
            if count < max_files && bytes + size <= max_bytes {
                break;
            }
            if outcome {
                tracing::warn!("spool full: dropping the oldest outcome {}", path.display());
            }
            fs::remove_file(&path)?;
            bytes -= len;
            count -= 1;
        }
        Ok(())
    }

    /// Deletes `*.unreadable` files older than [`UNREADABLE_KEPT`] at `now`.
    fn prune_unreadable(&self, now: SystemTime) {
        let Ok(entries) = fs::read_dir(&self.dir) else { return };
        for entry in entries.flatten() {
            let stale = entry.file_name().to_string_lossy().ends_with(&format!(".{UNREADABLE}"))
                && entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| now.duration_since(t).unwrap_or_default() > UNREADABLE_KEPT);
            if stale {
                let _ = fs::remove_file(entry.path());
            }
        }
    }

    /// The stored outcome of `job_id`, if any.
    pub fn read(&self, job_id: &str) -> Option<Outcome> {
        let bytes = fs::read(self.dir.join(outcome_file(job_id))).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Every stored outcome, oldest first. A file that does not parse is renamed
    /// to `*.unreadable` and skipped, so one damaged file cannot block the rest.
    pub fn list(&self) -> io::Result<Vec<Outcome>> {
        let mut outcomes = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !(name.starts_with(OUTCOME_PREFIX) && name.ends_with(".json")) {
                continue;
            }
            let parsed = fs::read(entry.path())
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<Outcome>(&b).map_err(|e| e.to_string()));
            match parsed {
                Ok(outcome) => outcomes.push(outcome),
                Err(e) => {
                    tracing::warn!("spool file {} is unreadable ({e}); moved aside", entry.path().display());
                    let _ = fs::rename(entry.path(), entry.path().with_extension(UNREADABLE));
                }
            }
        }
        outcomes.sort_by(|a, b| (a.finished_unix_ms, &a.job_id).cmp(&(b.finished_unix_ms, &b.job_id)));
        Ok(outcomes)
    }

    /// Drops the outcome of attempt `attempt_id` of `job_id` (the coordinator
    /// is done with it); an outcome of another attempt stays. Returns whether
    /// one was dropped.
    pub fn remove(&self, job_id: &str, attempt_id: &str) -> io::Result<bool> {
        if self.read(job_id).is_some_and(|o| o.attempt_id != attempt_id) {
            return Ok(false);
        }
        match fs::remove_file(self.dir.join(outcome_file(job_id))) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Records that `job_id` is running.
    pub fn mark_running(&self, job_id: &str, spec: &JobSpec) -> io::Result<()> {
        let marker = RunningMarker {
            job_id: job_id.to_string(),
            spec: spec.clone(),
        };
        let bytes = serde_json::to_vec(&marker).map_err(io::Error::other)?;
        self.write_atomically(RUNNING, &bytes)
    }

    /// The job is over (its outcome is stored).
    pub fn clear_running(&self) -> io::Result<()> {
        match fs::remove_file(self.dir.join(RUNNING)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// At start-up: a job marked running belonged to an agent that died mid-job
    /// (its worker died with it). Nothing was measured, so nothing is reported:
    /// the coordinator saw the session end and queues the job again (at most
    /// twice). Clears the marker and returns the job's id for the log.
    pub fn recover_interrupted(&self) -> io::Result<Option<String>> {
        let path = self.dir.join(RUNNING);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let recovered = match serde_json::from_slice::<RunningMarker>(&bytes) {
            // With an outcome the agent died between storing it and clearing the marker.
            Ok(marker) if self.read(&marker.job_id).is_none() => Some(marker.job_id),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!("ignoring unreadable {}: {e}", path.display());
                None
            }
        };
        self.clear_running()?;
        Ok(recovered)
    }

    fn write_atomically(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let tmp = self.dir.join(format!("{TMP_PREFIX}{name}"));
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, self.dir.join(name))?;
        // The rename itself is durable only once the directory is synced.
        File::open(&self.dir)?.sync_all()
    }
}

/// `outcome-<id>.json` with every byte outside `[A-Za-z0-9_-]` written as `%XX`:
/// distinct ids give distinct names, and no id can contain a path separator.
/// An id whose encoding is longer than [`MAX_NAME_ID_LEN`] is named by its
/// SHA-256 instead, `outcome-~<hex>.json` (`~` is never left unencoded, so the
/// two kinds of name cannot meet).
fn outcome_file(job_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut encoded = String::with_capacity(job_id.len());
    for b in job_id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            encoded.push(b as char);
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    if encoded.len() > MAX_NAME_ID_LEN {
        let digest = Sha256::digest(job_id.as_bytes());
        encoded = std::iter::once("~".to_string())
            .chain(digest.iter().map(|b| format!("{b:02x}")))
            .collect();
    }
    format!("{OUTCOME_PREFIX}{encoded}.json")
}

/// The spool holds results and decides what is re-sent: it must be this
/// user's own directory, closed to everyone else.
fn check_owner_and_mode(dir: &Path) -> anyhow::Result<()> {
    let meta = fs::symlink_metadata(dir).with_context(|| format!("reading {}", dir.display()))?;
    if !meta.is_dir() {
        bail!(
            "the spool directory {} is not a directory (a symbolic link?)",
            dir.display()
        );
    }
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        bail!(
            "the spool directory {} belongs to user {}, not to this agent's user {me}; chown it or choose another --spool-dir",
            dir.display(),
            meta.uid()
        );
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "the spool directory {} has mode {mode:04o}, open to other users; chmod 700 it",
            dir.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipherfleet_core::Point;
    use cipherfleet_core::path::Path as CryptoPath;
    use cipherfleet_core::spec::{Direction, KeyMode};

    /// A fresh directory under the target's tmp dir, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let dir = std::env::temp_dir().join(format!("cipherfleet-spool-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn spec() -> JobSpec {
        JobSpec {
            point: Point {
                algorithm: "aes-128-gcm".parse().unwrap(),
                direction: Direction::Encrypt,
                size_bytes: 1024,
                threads: 1,
                concurrency: None,
                key_mode: KeyMode::Static,
                path: CryptoPath::Accelerated,
                nonce: cipherfleet_core::spec::Nonce::Counter,
                provider: cipherfleet_core::provider::Provider::RustCrypto,
            },
            seconds: 0.05,
        }
    }

    #[test]
    fn outcomes_survive_reopening_and_come_back_oldest_first() {
        let tmp = TempDir::new("order");
        let spool = Spool::open(&tmp.0).unwrap();
        let mut late = Outcome::failed("job-b".into(), "a1".into(), "late");
        late.finished_unix_ms = 2_000;
        let mut early = Outcome::failed("job-a/../../etc".into(), "a1".into(), "early");
        early.finished_unix_ms = 1_000;
        spool.write(&late).unwrap();
        spool.write(&early).unwrap();
        drop(spool);

        let spool = Spool::open(&tmp.0).unwrap();
        assert_eq!(spool.list().unwrap(), vec![early.clone(), late.clone()]);
        assert_eq!(spool.read("job-a/../../etc"), Some(early));
        assert!(!spool.remove("job-a/../../etc", "a0").unwrap(), "another attempt's ack");
        assert!(spool.remove("job-a/../../etc", "a1").unwrap());
        assert!(!spool.remove("job-a/../../etc", "a1").unwrap());
        assert_eq!(spool.list().unwrap(), vec![late]);
        let names: Vec<String> = fs::read_dir(&tmp.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.starts_with(TMP_PREFIX)), "{names:?}");
    }

    #[test]
    fn encoded_names_are_distinct_and_flat() {
        assert_eq!(outcome_file("job-1_a"), "outcome-job-1_a.json");
        assert_eq!(outcome_file("a/b"), "outcome-a%2Fb.json");
        assert_ne!(outcome_file("a%2Fb"), outcome_file("a/b"));
        assert!(!outcome_file("../..").contains('/'));
    }

    #[test]
    fn a_second_agent_cannot_share_the_spool() {
        let tmp = TempDir::new("lock");
        let _first = Spool::open(&tmp.0).unwrap();
        let err = Spool::open(&tmp.0).unwrap_err().to_string();
        assert!(err.contains("another agent"), "{err}");
    }

    #[test]
    fn a_job_interrupted_by_a_crash_is_forgotten_for_the_coordinator_to_requeue() {
        let tmp = TempDir::new("crash");
        let spool = Spool::open(&tmp.0).unwrap();
        spool.mark_running("job-7", &spec()).unwrap();
        drop(spool);
        let spool = Spool::open(&tmp.0).unwrap();
        assert_eq!(spool.recover_interrupted().unwrap().as_deref(), Some("job-7"));
        assert!(spool.read("job-7").is_none(), "no outcome: nothing was measured");
        assert!(spool.list().unwrap().is_empty());
        assert_eq!(spool.recover_interrupted().unwrap(), None, "the marker is gone");
    }

    #[test]
    fn a_full_spool_drops_unreadable_files_first_then_the_oldest_outcomes() {
        let tmp = TempDir::new("full");
        let spool = Spool::open(&tmp.0).unwrap();
        let old = std::time::SystemTime::now() - Duration::from_secs(3600);
        fs::write(tmp.0.join("outcome-bad.unreadable"), b"{trunc").unwrap();
        File::options()
            .write(true)
            .open(tmp.0.join("outcome-bad.unreadable"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        for id in ["a", "b", "c"] {
            spool.write(&Outcome::failed(id.into(), String::new(), "e")).unwrap();
            std::thread::sleep(Duration::from_millis(10));
        }
        // Room for one more of three outcomes: the unreadable file goes first …
        spool.make_room("outcome-d.json", 10, 4, MAX_BYTES).unwrap();
        assert!(!tmp.0.join("outcome-bad.unreadable").exists());
        assert_eq!(spool.list().unwrap().len(), 3);
        // … then the oldest outcome.
        spool.make_room("outcome-d.json", 10, 3, MAX_BYTES).unwrap();
        let left: Vec<String> = spool.list().unwrap().into_iter().map(|o| o.job_id).collect();
        assert_eq!(left, ["b", "c"]);
        // By size as by count; replacing an outcome does not count it twice.
        spool.make_room("outcome-c.json", 10, 3, 60).unwrap();
        let left: Vec<String> = spool.list().unwrap().into_iter().map(|o| o.job_id).collect();
        assert_eq!(left, ["c"], "b dropped to fit 60 bytes");
    }

    #[test]
    fn unreadable_files_are_deleted_after_a_while() {
        let tmp = TempDir::new("prune");
        let spool = Spool::open(&tmp.0).unwrap();
        let aside = tmp.0.join("outcome-x.unreadable");
        fs::write(&aside, b"{trunc").unwrap();
        let now = std::time::SystemTime::now();
        spool.prune_unreadable(now);
        assert!(aside.exists(), "kept for a look");
        spool.prune_unreadable(now + UNREADABLE_KEPT + Duration::from_secs(60));
        assert!(!aside.exists());
    }

    #[test]
    fn a_long_job_id_is_hashed_into_a_short_name_and_still_found() {
        let tmp = TempDir::new("long");
        let spool = Spool::open(&tmp.0).unwrap();
        let long = "j/".repeat(200);
        let name = outcome_file(&long);
        assert!(name.len() < 80 && name.starts_with("outcome-~"), "{name}");
        assert_ne!(outcome_file(&"j/".repeat(201)), name);
        spool.write(&Outcome::failed(long.clone(), String::new(), "e")).unwrap();
        assert_eq!(spool.read(&long).unwrap().job_id, long);
        assert_eq!(spool.list().unwrap()[0].job_id, long);
        assert_eq!(
            outcome_file("a-uuid-stays-readable"),
            "outcome-a-uuid-stays-readable.json"
        );
    }

    #[test]
    fn a_spool_directory_open_to_others_is_refused() {
        let tmp = TempDir::new("mode");
        fs::create_dir_all(&tmp.0).unwrap();
        fs::set_permissions(&tmp.0, fs::Permissions::from_mode(0o755)).unwrap();
        let err = Spool::open(&tmp.0).unwrap_err().to_string();
        assert!(err.contains("mode 0755") && err.contains("chmod 700"), "{err}");
        fs::set_permissions(&tmp.0, fs::Permissions::from_mode(0o700)).unwrap();
        Spool::open(&tmp.0).unwrap();
    }

    #[test]
    fn a_damaged_file_is_moved_aside() {
        let tmp = TempDir::new("damaged");
        let spool = Spool::open(&tmp.0).unwrap();
        fs::write(tmp.0.join("outcome-x.json"), b"{trunc").unwrap();
        spool.write(&Outcome::failed("y".into(), "a1".into(), "e")).unwrap();
        assert_eq!(spool.list().unwrap().len(), 1);
        assert!(tmp.0.join("outcome-x.unreadable").exists());
    }
}
