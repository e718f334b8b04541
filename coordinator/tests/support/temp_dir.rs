//! `TempDir`, shared by the db and e2e tests and the benchmarks (each includes
//! this file with `#[path]`).

use std::path::{Path, PathBuf};

/// A directory under the system's temporary directory, removed on drop
/// (declare it before a cluster living in it, so the cluster is dropped, and
/// stopped, first).
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(what: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!("cipherfleet-{what}-{}-{nanos:08x}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("creating a temporary directory");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
