//! gRPC over TLS (rustls on ring): the `--tls-cert` / `--tls-key` pair, read
//! and checked before anything starts, so a bad file stops `serve` with an
//! error naming it instead of failing every agent's handshake later; or a pair
//! made here ([`self_signed`], `--self-signed DIR`). Plain gRPC carries the
//! tokens in clear, so it is for loopback only unless `--insecure-plaintext`.
//! With `--client-ca` ([`require_client_certs`]) every gRPC client must show a
//! certificate that CA signed, and an agent's host is bound to its name
//! ([`client_cert`]).

pub mod client_cert;
pub mod self_signed;

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};

/// A client that opened a connection has this long to finish the TLS
/// handshake; the default is to wait forever, holding a task per stalled socket.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server's TLS settings from `--tls-cert` and `--tls-key`: both for TLS,
/// neither for plain gRPC.
pub fn server_tls(cert: Option<&Path>, key: Option<&Path>) -> anyhow::Result<Option<ServerTlsConfig>> {
    let (cert, key) = match (cert, key) {
        (None, None) => return Ok(None),
        (Some(cert), Some(key)) => (cert, key),
        (Some(_), None) => bail!("--tls-cert needs --tls-key: give both for gRPC over TLS, or neither for plain gRPC"),
        (None, Some(_)) => bail!("--tls-key needs --tls-cert: give both for gRPC over TLS, or neither for plain gRPC"),
    };
    let cert_pem = read_certificates("--tls-cert", cert)?;
    let key_pem = read_key(key)?;
    let config = ServerTlsConfig::new()
        .identity(Identity::from_pem(cert_pem, key_pem))
        .timeout(HANDSHAKE_TIMEOUT);
    // What rustls checks beyond the PEM (the key type, that it matches the certificate).
    Server::builder().tls_config(config.clone()).map_err(|e| {
        anyhow::anyhow!(
            "--tls-cert {} and --tls-key {} do not make a usable TLS identity: {}",
            cert.display(),
            key.display(),
            chain(&e)
        )
    })?;
    Ok(Some(config))
}

/// `--client-ca`: every gRPC client (agents and operator commands alike) must
/// present a certificate signed by the CA in `client_ca`, or the handshake
/// fails. Needs TLS: refused without `--tls-cert`/`--tls-key` or `--self-signed`.
pub fn require_client_certs(
    tls: Option<ServerTlsConfig>,
    client_ca: Option<&Path>,
) -> anyhow::Result<Option<ServerTlsConfig>> {
    let Some(ca) = client_ca else { return Ok(tls) };
    let Some(tls) = tls else {
        bail!(
            "--client-ca {} needs TLS: client certificates are checked in the TLS handshake; give --tls-cert and \
             --tls-key, or --self-signed DIR",
            ca.display()
        )
    };
    let pem = read_certificates("--client-ca", ca)?;
    let config = tls.client_ca_root(Certificate::from_pem(pem));
    Server::builder().tls_config(config.clone()).map_err(|e| {
        anyhow::anyhow!(
            "cannot use --client-ca {} as the CA of client certificates: {}",
            ca.display(),
            chain(&e)
        )
    })?;
    Ok(Some(config))
}

/// Refuses plain gRPC on `listen` unless it is a loopback address or the
/// operator passed `--insecure-plaintext` (then warns: once here, and again for
/// every agent session, see `server`).
pub fn check_plaintext(listen: SocketAddr, insecure_plaintext: bool) -> anyhow::Result<()> {
    if insecure_plaintext {
        tracing::warn!(
            %listen,
            "--insecure-plaintext: gRPC is plain text; enrollment tokens, the admin token and results cross \
             the network in clear"
        );
        return Ok(());
    }
    if listen.ip().is_loopback() {
        return Ok(());
    }
    bail!(
        "--grpc-listen {listen} is reachable from other machines but gRPC would be plain text, sending the \
         agents' and operators' tokens in clear; serve TLS with --tls-cert and --tls-key (or --self-signed DIR \
         to make a private CA here), listen on 127.0.0.1 only, or pass --insecure-plaintext on a network you trust"
    )
}

/// The PEM of `flag`'s file, once it is known to hold at least one certificate.
fn read_certificates(flag: &str, path: &Path) -> anyhow::Result<Vec<u8>> {
    let shown = path.display();
    let pem = std::fs::read(path).with_context(|| format!("reading {flag} {shown}"))?;
    let count = CertificateDer::pem_slice_iter(&pem)
        .try_fold(0, |n, c| c.map(|_| n + 1))
        .with_context(|| format!("{flag} {shown} is not valid PEM"))?;
    if count == 0 {
        bail!("{flag} {shown} holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)");
    }
    Ok(pem)
}

/// The private key's PEM, once it is known to hold a key.
fn read_key(path: &Path) -> anyhow::Result<Vec<u8>> {
    let shown = path.display();
    let pem = std::fs::read(path).with_context(|| format!("reading --tls-key {shown}"))?;
    match PrivateKeyDer::from_pem_slice(&pem) {
        Ok(_) => {}
        Err(pem::Error::NoItemsFound) => {
            bail!("--tls-key {shown} holds no private key (expected PEM: PKCS#8, PKCS#1 RSA or SEC1 EC)")
        }
        Err(e) => bail!("--tls-key {shown} is not valid PEM: {e}"),
    }
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o004 != 0
    {
        tracing::warn!("the TLS key {shown} is readable by every user; chmod 600 it");
    }
    Ok(pem)
}

/// `e` and its sources: tonic's "transport error" alone says nothing.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn temp_file(name: &str, content: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("cipherfleet-server-tls-{}-{name}", std::process::id()));
        std::fs::write(&path, content).unwrap();
        path
    }

    #[test]
    fn plain_grpc_is_for_loopback_unless_insisted_on() {
        for local in ["127.0.0.1:7443", "[::1]:7443", "127.0.0.2:0"] {
            assert!(check_plaintext(local.parse().unwrap(), false).is_ok(), "{local}");
        }
        for remote in ["0.0.0.0:7443", "[::]:7443", "10.0.0.5:7443"] {
            let err = check_plaintext(remote.parse().unwrap(), false).unwrap_err().to_string();
            assert!(
                err.contains("--insecure-plaintext") && err.contains("--tls-cert") && err.contains("--self-signed"),
                "{err}"
            );
            assert!(check_plaintext(remote.parse().unwrap(), true).is_ok(), "{remote}");
        }
    }

    #[test]
    fn client_ca_needs_tls_and_a_certificate() {
        let ca = Path::new("/nonexistent/clients-ca.pem");
        assert!(require_client_certs(None, None).unwrap().is_none());
        let plain = require_client_certs(None, Some(ca)).unwrap_err().to_string();
        assert!(
            plain.contains("--client-ca") && plain.contains("needs TLS") && plain.contains("--self-signed"),
            "{plain}"
        );
        let missing = require_client_certs(Some(ServerTlsConfig::new()), Some(ca)).unwrap_err();
        assert!(format!("{missing:#}").contains("reading --client-ca"), "{missing:#}");
        let key = temp_file(
            "client-ca-key.pem",
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        );
        let not_a_ca = require_client_certs(Some(ServerTlsConfig::new()), Some(&key))
            .unwrap_err()
            .to_string();
        std::fs::remove_file(&key).unwrap();
        assert!(
            not_a_ca.contains("--client-ca") && not_a_ca.contains("holds no certificate"),
            "{not_a_ca}"
        );
    }

    #[test]
    fn cert_and_key_go_together() {
        let (cert, key) = (Path::new("cert.pem"), Path::new("key.pem"));
        assert!(server_tls(None, None).unwrap().is_none());
        let no_key = server_tls(Some(cert), None).unwrap_err().to_string();
        assert!(no_key.contains("--tls-cert needs --tls-key"), "{no_key}");
        let no_cert = server_tls(None, Some(key)).unwrap_err().to_string();
        assert!(no_cert.contains("--tls-key needs --tls-cert"), "{no_cert}");
    }

    #[test]
    fn unusable_files_are_named() {
        let missing = std::env::temp_dir().join("cipherfleet-no-such-cert.pem");
        let key = temp_file(
            "key.pem",
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        );
        let err = format!("{:#}", server_tls(Some(&missing), Some(&key)).unwrap_err());
        assert!(
            err.contains("reading --tls-cert") && err.contains("no-such-cert.pem"),
            "{err}"
        );

        // The key where the certificate should be.
        let err = format!("{:#}", server_tls(Some(&key), Some(&key)).unwrap_err());
        assert!(err.contains("holds no certificate") && err.contains("key.pem"), "{err}");

        let cut = temp_file("cut.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n");
        let err = format!("{:#}", server_tls(Some(&cut), Some(&key)).unwrap_err());
        assert!(err.contains("--tls-cert") && err.contains("is not valid PEM"), "{err}");
        for path in [key, cut] {
            std::fs::remove_file(path).unwrap();
        }
    }
}
