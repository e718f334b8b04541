//! Finding the PostgreSQL server binaries (`initdb`, `pg_ctl`, `postgres`).
//!
//! Looked for on `PATH` first (an administrator's choice wins), then in Debian's
//! versioned layout `/usr/lib/postgresql/<major>/bin`, highest major first.
//! Debian puts no `pg_ctl` on `PATH` by default, so the second place is the
//! usual hit there.

use std::path::{Path, PathBuf};

use tokio::process::Command;

use super::PgError;

/// Where Debian and Ubuntu install each major version's server binaries.
const VERSIONED_ROOT: &str = "/usr/lib/postgresql";

/// A directory holding a complete set of server binaries of one major version.
#[derive(Debug, Clone)]
pub(crate) struct Binaries {
    pub dir: PathBuf,
    /// Major version (`15` for 15.8); a cluster only runs under its own major.
    pub major: u32,
}

impl Binaries {
    pub fn pg_ctl(&self) -> PathBuf {
        self.dir.join("pg_ctl")
    }

    pub fn initdb(&self) -> PathBuf {
        self.dir.join("initdb")
    }

    /// Finds binaries able to run a cluster of major version `cluster_major`
    /// (an existing cluster), or the preferred binaries for a new cluster.
    pub async fn find(cluster_major: Option<u32>) -> Result<Self, PgError> {
        Self::find_among(candidate_dirs(), cluster_major).await
    }

    async fn find_among(candidates: Vec<PathBuf>, cluster_major: Option<u32>) -> Result<Self, PgError> {
        if candidates.is_empty() {
            return Err(PgError::NoBinaries);
        }
        let mut found = Vec::new();
        for dir in candidates {
            let Some(major) = major_version(&dir).await else {
                continue;
            };
            if cluster_major.is_none_or(|want| want == major) {
                return Ok(Binaries { dir, major });
            }
            found.push(major.to_string());
        }
        match cluster_major {
            Some(want) if !found.is_empty() => Err(PgError::VersionMismatch {
                cluster: want,
                found: found.join(", "),
            }),
            _ => Err(PgError::NoBinaries),
        }
    }
}

/// Server binary directories in order of preference, without duplicates
/// (`/usr/local/bin/pg_ctl` is often a symlink into the versioned layout).
fn candidate_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let pg_ctl = dir.join("pg_ctl");
            if !pg_ctl.is_file() {
                continue;
            }
            // pg_ctl finds `postgres` next to its resolved self, so the
            // symlink's target directory is the one that counts.
            let resolved = pg_ctl
                .canonicalize()
                .ok()
                .and_then(|p| p.parent().map(Path::to_path_buf));
            let dir = resolved.filter(|d| is_server_dir(d)).unwrap_or(dir);
            if is_server_dir(&dir) {
                dirs.push(dir);
            }
        }
    }
    dirs.extend(versioned_dirs(Path::new(VERSIONED_ROOT)));
    let mut seen = Vec::new();
    dirs.retain(|d| {
        let key = d.canonicalize().unwrap_or_else(|_| d.clone());
        let new = !seen.contains(&key);
        seen.push(key);
        new
    });
    dirs
}

/// `<root>/<major>/bin` directories holding server binaries, highest major first.
fn versioned_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut versions: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let major = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            is_server_dir(&bin).then_some((major, bin))
        })
        .collect();
    versions.sort_by_key(|v| std::cmp::Reverse(v.0));
    versions.into_iter().map(|(_, dir)| dir).collect()
}

fn is_server_dir(dir: &Path) -> bool {
    ["pg_ctl", "initdb", "postgres"].iter().all(|b| dir.join(b).is_file())
}

/// Major version from `postgres --version` (`postgres (PostgreSQL) 15.8 (Debian …)`).
async fn major_version(dir: &Path) -> Option<u32> {
    let out = Command::new(dir.join("postgres"))
        .arg("--version")
        .output()
        .await
        .ok()?;
    parse_major(&String::from_utf8_lossy(&out.stdout))
}

fn parse_major(version_line: &str) -> Option<u32> {
    let rest = version_line.split("(PostgreSQL)").nth(1)?.trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_version_is_read_from_version_line() {
        let cases = [
            ("postgres (PostgreSQL) 15.8 (Debian 15.8-0+deb12u1)\n", Some(15)),
            ("postgres (PostgreSQL) 17.2\n", Some(17)),
            ("postgres (PostgreSQL) 9.6.24\n", Some(9)),
            ("postgres (PostgreSQL) 18beta1\n", Some(18)),
            ("something else\n", None),
        ];
        for (line, want) in cases {
            assert_eq!(parse_major(line), want, "{line:?}");
        }
    }

    /// Fake server binaries whose `postgres --version` reports `major`.
    fn fake_bin_dir(bin: &Path, major: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(bin).unwrap();
        for b in ["pg_ctl", "initdb", "postgres"] {
            let path = bin.join(b);
            std::fs::write(&path, format!("#!/bin/sh\necho 'postgres (PostgreSQL) {major}.3'\n")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    #[test]
    fn versioned_dirs_are_ordered_highest_major_first() {
        let root = std::env::temp_dir().join(format!("cipherfleet-bins-{}", std::process::id()));
        for major in ["9", "15", "13", "notaversion"] {
            fake_bin_dir(&root.join(major).join("bin"), major);
        }
        // A major without a complete set of binaries (client-only install) is skipped.
        std::fs::create_dir_all(root.join("16").join("bin")).unwrap();

        let got = versioned_dirs(&root);
        std::fs::remove_dir_all(&root).unwrap();
        let want: Vec<PathBuf> = ["15", "13", "9"].iter().map(|m| root.join(m).join("bin")).collect();
        assert_eq!(got, want);
    }

    #[tokio::test]
    async fn no_binaries_is_an_error_that_says_how_to_install_them() {
        let err = Binaries::find_among(Vec::new(), None).await.unwrap_err();
        assert!(matches!(err, PgError::NoBinaries));
        assert!(err.to_string().contains("apt-get install postgresql"), "{err}");
    }

    #[tokio::test]
    async fn an_existing_cluster_needs_binaries_of_its_major_version() {
        let root = std::env::temp_dir().join(format!("cipherfleet-majors-{}", std::process::id()));
        fake_bin_dir(&root.join("16"), "16");
        fake_bin_dir(&root.join("15"), "15");
        let dirs = vec![root.join("16"), root.join("15")];

        let for_new = Binaries::find_among(dirs.clone(), None).await.unwrap();
        let for_15 = Binaries::find_among(dirs.clone(), Some(15)).await.unwrap();
        let for_14 = Binaries::find_among(dirs, Some(14)).await.unwrap_err();
        std::fs::remove_dir_all(&root).unwrap();

        assert_eq!((for_new.major, for_15.major), (16, 15));
        assert_eq!(for_15.dir, root.join("15"));
        assert!(
            matches!(for_14, PgError::VersionMismatch { cluster: 14, .. }),
            "{for_14}"
        );
    }
}
