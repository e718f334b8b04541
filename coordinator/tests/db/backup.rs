//! The documented dump and restore of an external database (docs/operations.md,
//! "Backups") bring back a database this build starts on. The private
//! cluster's `backup` and `restore` are tested end to end (e2e `backup`).

use std::process::Command;

use cipherfleet_coordinator::store::schema::{self, Functions};

use crate::helpers::{TempDir, empty_db, fresh_db, host, url_of as url};

/// Debian's newest `/usr/lib/postgresql/<major>/bin`, where the test cluster's
/// server comes from too; the tools on `PATH` elsewhere.
fn client_binaries() -> std::path::PathBuf {
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.file_name().to_str()?.parse::<u32>().ok()?, e.path().join("bin"))))
        .filter(|(_, bin)| bin.join("pg_dump").is_file())
        .max_by_key(|(major, _)| *major);
    newest.map(|(_, bin)| bin).unwrap_or_default()
}

/// The commands docs/operations.md gives for an external database.
#[tokio::test]
async fn the_documented_dump_of_an_external_database_restores_into_an_empty_one() {
    let source = fresh_db().await;
    let id = host(&source, "dumped-01").await;
    let dir = TempDir::new("db-dump");
    let dump = dir.path().join("cipherfleet.dump");
    let bin = client_binaries();

    let dumped = Command::new(bin.join("pg_dump"))
        .args(["--format=custom", "--file"])
        .arg(&dump)
        .arg(url(&source))
        .output()
        .expect("running pg_dump");
    assert!(dumped.status.success(), "{}", String::from_utf8_lossy(&dumped.stderr));
    let target = empty_db().await;
    let restored = Command::new(bin.join("pg_restore"))
        .args([
            "--no-owner",
            "--no-privileges",
            "--exit-on-error",
            "--single-transaction",
            "--dbname",
        ])
        .arg(url(&target))
        .arg(&dump)
        .output()
        .expect("running pg_restore");
    assert!(
        restored.status.success(),
        "{}",
        String::from_utf8_lossy(&restored.stderr)
    );

    // A coordinator starts on it as on the source: nothing left to migrate.
    assert_eq!(schema::apply(&target).await.unwrap(), Functions::Applied);
    let hosts: Vec<(i64, String)> = sqlx::query_as("SELECT id, name FROM hosts")
        .fetch_all(&target)
        .await
        .unwrap();
    assert_eq!(hosts, [(id, "dumped-01".to_string())]);
    // Identities continue after the restored rows.
    let next = host(&target, "dumped-02").await;
    assert!(next > id, "{next} after {id}");
}
