//! TLS to PostgreSQL: a server with `ssl = on` and a certificate of a
//! private CA, reached over TCP as a managed database would be. The
//! coordinator connects with `sslmode=verify-full&sslrootcert=CA`, and
//! refuses, saying why, a server whose certificate another CA signed or
//! that does not carry the name it dialled.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use cipherfleet_coordinator::pg::PrivateCluster;
use cipherfleet_coordinator::store;
use cipherfleet_coordinator::tls::self_signed;

use crate::helpers::TempDir;

/// A free TCP port on loopback (bound, then released for the server).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0");
    listener.local_addr().expect("a bound address").port()
}

/// Copies `from` into the data directory as `name`, owned by the server's
/// account and readable by it alone (PostgreSQL refuses a key others can read).
fn install(data_dir: &Path, from: &Path, name: &str) {
    let to = data_dir.join(name);
    std::fs::copy(from, &to).expect("copying a certificate file");
    let owner = std::fs::metadata(data_dir).expect("the data directory");
    std::os::unix::fs::chown(&to, Some(owner.uid()), Some(owner.gid())).expect("giving it to the server's account");
    std::fs::set_permissions(&to, std::os::unix::fs::PermissionsExt::from_mode(0o600)).expect("chmod 600");
}

/// A cluster of its own serving TLS on `127.0.0.1:port` with a certificate for
/// `localhost` signed by the CA in `ca_dir`; its unix socket as before.
async fn tls_cluster(dir: &Path, ca_dir: &Path, port: u16) -> PrivateCluster {
    let cluster = PrivateCluster::start(&dir.join("pg"))
        .await
        .expect("starting PostgreSQL");
    let files = self_signed::ensure(ca_dir, &["localhost".to_string()]).expect("a private CA and a server certificate");
    install(cluster.data_dir(), &files.cert, "server.pem");
    install(cluster.data_dir(), &files.key, "server.key");
    // TLS connections from loopback are trusted; the cluster's own lines refuse every other TCP one.
    let hba = cluster.data_dir().join("pg_hba.conf");
    let rules = std::fs::read_to_string(&hba).expect("pg_hba.conf");
    std::fs::write(&hba, format!("hostssl all all 127.0.0.1/32 trust\n{rules}")).expect("writing pg_hba.conf");
    let pool = sqlx::PgPool::connect_with(cluster.connect_options("postgres"))
        .await
        .expect("the unix socket");
    for setting in [
        "ALTER SYSTEM SET ssl = on".to_string(),
        "ALTER SYSTEM SET ssl_cert_file = 'server.pem'".to_string(),
        "ALTER SYSTEM SET ssl_key_file = 'server.key'".to_string(),
        "ALTER SYSTEM SET listen_addresses = '127.0.0.1'".to_string(),
        format!("ALTER SYSTEM SET port = {port}"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(setting.clone()))
            .execute(&pool)
            .await
            .expect(&setting);
    }
    pool.close().await;
    cluster.restart().await.expect("restarting PostgreSQL with TLS");
    cluster
}

#[tokio::test]
async fn verify_full_connects_with_the_ca_and_refuses_another_ca_or_name_saying_why() {
    let dir = TempDir::new("db-tls");
    let port = free_port();
    let cluster = tls_cluster(dir.path(), &dir.path().join("ca"), port).await;
    let other_ca = self_signed::ensure(&dir.path().join("other-ca"), &["localhost".to_string()]).expect("another CA");
    let ca = dir.path().join("ca").join("ca.pem");
    let url = |host: &str, mode: &str, root: &Path| {
        format!(
            "postgres://cipherfleet@{host}:{port}/cipherfleet?sslmode={mode}&sslrootcert={}",
            root.display()
        )
    };

    let pool = store::connect(&url("localhost", "verify-full", &ca))
        .await
        .expect("verify-full with the server's CA and its name");
    let encrypted: bool = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(encrypted, "the session runs over TLS");
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(applied > 0, "the schema was applied over TLS");
    pool.close().await;

    let wrong_ca = store::connect(&url("localhost", "verify-full", &other_ca.ca))
        .await
        .expect_err("a certificate of another CA");
    let message = wrong_ca.to_string();
    assert!(
        message.starts_with("TLS to PostgreSQL: the server's certificate was refused (invalid peer certificate: ")
            && message.contains("sslrootcert"),
        "says the server's certificate was refused and what to check: {message}"
    );

    let wrong_name = store::connect(&url("127.0.0.1", "verify-full", &ca))
        .await
        .expect_err("a certificate without the name dialled");
    let message = wrong_name.to_string();
    assert!(
        message.starts_with("TLS to PostgreSQL: the server's certificate was refused")
            && message.contains("not valid for name"),
        "says the certificate is not for the name dialled: {message}"
    );
    // verify-ca checks the chain but not the name.
    store::connect(&url("127.0.0.1", "verify-ca", &ca))
        .await
        .expect("verify-ca accepts the CA's certificate whatever name was dialled")
        .close()
        .await;

    cluster.stop().await.expect("stopping PostgreSQL");
}
