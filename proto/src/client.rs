//! Dialing a coordinator, for the agent and the operator commands: the URL
//! check and the TLS settings (rustls on ring) for an `https://` coordinator.
//!
//! With a CA file that CA alone is trusted: a fleet usually has a private
//! CA, and trusting the system store as well would accept any public CA's
//! certificate for the coordinator's name. Without it the system store is used
//! (`/etc/ssl/certs` and the like; `SSL_CERT_FILE` / `SSL_CERT_DIR` override).
//! The name checked is the URL's host, so an `https://10.0.0.5:7443` coordinator
//! needs that IP address in its certificate's subjectAltName.
//!
//! A coordinator that requires client certificates (`serve --client-ca`) gets
//! the pair of `--client-cert` / `--client-key` ([`client_identity`]).

use std::path::Path;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// A coordinator URL or CA file that cannot be used, naming the flag.
#[derive(Debug, thiserror::Error)]
#[error("{flag}: {message}")]
pub struct ClientError {
    pub flag: &'static str,
    pub message: String,
}

fn client_error(flag: &'static str, message: impl Into<String>) -> ClientError {
    ClientError {
        flag,
        message: message.into(),
    }
}

/// Accepts `https://host[:port]` and `http://host[:port]`; `--ca-cert` only with
/// `https://`, where it means something (given with `http://` the token would
/// still travel in clear, which is surely not what was meant). `http://` to a
/// host other than this machine's loopback would send the token in clear
/// across a network, so it needs `insecure_plaintext` (`--insecure-plaintext`).
pub fn check_coordinator_url(url: &str, ca_cert: Option<&Path>, insecure_plaintext: bool) -> Result<(), ClientError> {
    let Some(rest) = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")) else {
        return Err(client_error(
            "--coordinator",
            format!("{url:?} is not an https:// or http:// URL, e.g. https://coordinator.example:7443"),
        ));
    };
    if rest.trim_end_matches('/').is_empty() {
        return Err(client_error("--coordinator", format!("{url:?} has no host")));
    }
    if ca_cert.is_some() && url.starts_with("http://") {
        return Err(client_error(
            "--ca-cert",
            format!("only used with an https:// coordinator, and {url:?} is plain http://"),
        ));
    }
    let endpoint = Endpoint::from_shared(url.to_string())
        .map_err(|e| client_error("--coordinator", format!("{url:?} is not a valid URL: {e}")))?;
    if url.starts_with("http://") && !insecure_plaintext {
        let host = endpoint.uri().host().unwrap_or_default();
        if !is_loopback_host(host) {
            return Err(client_error(
                "--coordinator",
                format!(
                    "{url:?} is plain http:// to {host}, which would send the token in clear across the \
                     network; use an https:// URL (with --ca-cert for a private CA, e.g. the one \
                     `serve --self-signed` prints), or pass --insecure-plaintext on a network you trust"
                ),
            ));
        }
    }
    Ok(())
}

/// `localhost`, `127.0.0.0/8` or `::1`: a connection that never leaves this machine.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// TLS settings for a coordinator at `url` (checked by [`check_coordinator_url`]):
/// `None` for `http://`. Everything is read and checked now, so a bad file or an
/// empty system store is a usage error at start rather than a reconnect loop.
pub fn client_tls(url: &str, ca_cert: Option<&Path>) -> Result<Option<ClientTlsConfig>, ClientError> {
    if !url.starts_with("https://") {
        return Ok(None);
    }
    let (flag, config) = match ca_cert {
        Some(path) => ("--ca-cert", ClientTlsConfig::new().ca_certificate(read_ca(path)?)),
        None => ("--coordinator", ClientTlsConfig::new().with_native_roots()),
    };
    // Building the connector is what reads the system store and parses the CA.
    let endpoint = Endpoint::from_shared(url.to_string())
        .map_err(|e| client_error("--coordinator", format!("{url:?} is not a valid URL: {e}")))?;
    if let Err(e) = endpoint.tls_config(config.clone()) {
        let message = match ca_cert {
            Some(path) => format!("cannot use {} as the CA: {}", path.display(), error_chain(&e)),
            None => format!(
                "cannot use the system's CA store ({}); give --ca-cert with the CA that signed the \
                 coordinator's certificate",
                error_chain(&e)
            ),
        };
        return Err(client_error(flag, message));
    }
    Ok(Some(config))
}

/// The client certificate and key for a coordinator that requires them
/// (`--client-cert` and `--client-key`: both or neither, only with `https://`),
/// read and checked now. `tls` gets it with [`ClientTlsConfig::identity`].
pub fn client_identity(url: &str, cert: Option<&Path>, key: Option<&Path>) -> Result<Option<Identity>, ClientError> {
    let (cert, key) = match (cert, key) {
        (None, None) => return Ok(None),
        (Some(cert), Some(key)) => (cert, key),
        (Some(_), None) => {
            return Err(client_error(
                "--client-cert",
                "needs --client-key: give both, or neither",
            ));
        }
        (None, Some(_)) => {
            return Err(client_error(
                "--client-key",
                "needs --client-cert: give both, or neither",
            ));
        }
    };
    if !url.starts_with("https://") {
        return Err(client_error(
            "--client-cert",
            format!("only used with an https:// coordinator, and {url:?} is plain http://"),
        ));
    }
    let cert_pem = read_certificates("--client-cert", cert)?;
    let shown = key.display();
    let key_pem = std::fs::read(key).map_err(|e| client_error("--client-key", format!("cannot read {shown}: {e}")))?;
    PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        client_error(
            "--client-key",
            format!("{shown} holds no usable private key (expected PEM: PKCS#8, PKCS#1 RSA or SEC1 EC): {e}"),
        )
    })?;
    Ok(Some(Identity::from_pem(cert_pem, key_pem)))
}

/// An error and its sources, each said once: `transport error: tcp connect error: …`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        // Layers often repeat their inner error's words; say each once.
        let part = s.to_string();
        if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// The PEM file at `path`, once it is known to hold at least one certificate.
fn read_ca(path: &Path) -> Result<Certificate, ClientError> {
    read_certificates("--ca-cert", path).map(Certificate::from_pem)
}

/// The PEM of `flag`'s file, once it is known to hold at least one certificate.
fn read_certificates(flag: &'static str, path: &Path) -> Result<Vec<u8>, ClientError> {
    let shown = path.display();
    let pem = std::fs::read(path).map_err(|e| client_error(flag, format!("cannot read {shown}: {e}")))?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| client_error(flag, format!("{shown} is not valid PEM: {e}")))?;
    if certificates.is_empty() {
        return Err(client_error(
            flag,
            format!("{shown} holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)"),
        ));
    }
    Ok(pem)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed P-256 CA certificate made with `openssl req -x509` (its key was thrown away).
    const CA_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBnDCCAUGgAwIBAgIUNaHetVQZ+nhvC02/YRaiaTAD69owCgYIKoZIzj0EAwIw
IzEhMB8GA1UEAwwYY2lwaGVyZmxlZXQgdW5pdC10ZXN0IENBMB4XDTI2MTEzMDAx
NDk0NVoXDTM2MTEyNzAxNDk0NVowIzEhMB8GA1UEAwwYY2lwaGVyZmxlZXQgdW5p
dC10ZXN0IENBMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEVulMpF4PpoFzm9IA
GzxQuOUkewAvvP8hKfUdig63hz/NBRKEGy88Cp9LQ7YEmVkaeflg/HEhsIVYaa03
xRcHgKNTMFEwHQYDVR0OBBYEFNGXKEoGUusGORN8JUKxiZedAw5nMB8GA1UdIwQY
MBaAFNGXKEoGUusGORN8JUKxiZedAw5nMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZI
zj0EAwIDSQAwRgIhAIW1DrMoFsGwBIIu4wjHuv31VzlwPio7VHeEgJykFydrAiEA
6bU1plKnjW2yQ7AfU9J9nziggnsx4C9qzKH8Lz+bQcU=
-----END CERTIFICATE-----
";

    fn temp_file(name: &str, content: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("cipherfleet-tls-{}-{name}", std::process::id()));
        std::fs::write(&path, content).unwrap();
        path
    }

    #[test]
    fn plain_http_off_this_machine_needs_the_insecure_flag() {
        for local in [
            "http://127.0.0.1:7443",
            "http://127.8.0.1",
            "http://localhost:7443",
            "http://[::1]:7443",
        ] {
            assert!(check_coordinator_url(local, None, false).is_ok(), "{local}");
        }
        for remote in [
            "http://10.0.0.5:7443",
            "http://coordinator.example",
            "http://[2001:db8::1]:7443",
            "http://0.0.0.0:7443",
        ] {
            let err = check_coordinator_url(remote, None, false).unwrap_err();
            assert_eq!(err.flag, "--coordinator", "{remote}");
            assert!(
                err.message.contains("--insecure-plaintext") && err.message.contains("https://"),
                "{err}"
            );
            assert!(check_coordinator_url(remote, None, true).is_ok(), "{remote}");
        }
        assert!(check_coordinator_url("https://10.0.0.5:7443", None, false).is_ok());
    }

    #[test]
    fn client_cert_and_key_go_together_and_only_with_https() {
        let (cert, key) = (Path::new("client.pem"), Path::new("client.key"));
        let url = "https://c.example:7443";
        assert!(client_identity(url, None, None).unwrap().is_none());
        let no_key = client_identity(url, Some(cert), None).unwrap_err();
        assert_eq!(
            (no_key.flag, no_key.message.contains("--client-key")),
            ("--client-cert", true)
        );
        let no_cert = client_identity(url, None, Some(key)).unwrap_err();
        assert_eq!(
            (no_cert.flag, no_cert.message.contains("--client-cert")),
            ("--client-key", true)
        );
        let plain = client_identity("http://127.0.0.1:7443", Some(cert), Some(key)).unwrap_err();
        assert!(
            plain.flag == "--client-cert" && plain.message.contains("https://"),
            "{plain}"
        );

        let ca = temp_file("client-cert.pem", CA_PEM);
        let missing_key = std::env::temp_dir().join("cipherfleet-no-such-client.key");
        let err = client_identity(url, Some(&ca), Some(&missing_key)).unwrap_err();
        assert!(
            err.flag == "--client-key" && err.message.contains("cannot read"),
            "{err}"
        );
        let err = client_identity(url, Some(&ca), Some(&ca)).unwrap_err();
        assert!(
            err.flag == "--client-key" && err.message.contains("no usable private key"),
            "{err}"
        );
        let err = client_identity(url, Some(&missing_key), Some(&ca)).unwrap_err();
        assert!(
            err.flag == "--client-cert" && err.message.contains("cannot read"),
            "{err}"
        );
        std::fs::remove_file(&ca).unwrap();
    }

    #[test]
    fn plain_http_needs_no_tls() {
        assert!(client_tls("http://c.example:7443", None).unwrap().is_none());
    }

    #[test]
    fn an_unusable_ca_file_is_named() {
        let missing = std::env::temp_dir().join("cipherfleet-no-such-ca.pem");
        let err = client_tls("https://c.example", Some(&missing)).unwrap_err();
        assert_eq!(err.flag, "--ca-cert");
        assert!(
            err.message.contains("cannot read") && err.message.contains("no-such-ca"),
            "{err}"
        );

        let key_only = temp_file(
            "key.pem",
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        );
        let err = client_tls("https://c.example", Some(&key_only)).unwrap_err();
        assert!(err.message.contains("holds no certificate"), "{err}");

        let truncated = temp_file("cut.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n");
        let err = client_tls("https://c.example", Some(&truncated)).unwrap_err();
        assert!(err.message.contains("is not valid PEM"), "{err}");
        for path in [key_only, truncated] {
            std::fs::remove_file(path).unwrap();
        }
    }

    #[test]
    fn a_readable_ca_is_accepted_at_start() {
        let path = temp_file("ca.pem", CA_PEM);
        let result = client_tls("https://127.0.0.1:7443", Some(&path));
        std::fs::remove_file(&path).unwrap();
        assert!(result.unwrap().is_some());
    }

    #[test]
    fn http_and_https_urls_are_accepted_and_ca_cert_only_with_https() {
        assert!(check_coordinator_url("http://127.0.0.1:7070", None, false).is_ok());
        assert!(check_coordinator_url("http://coordinator.example", None, true).is_ok());
        assert!(check_coordinator_url("https://c.example:7443", None, false).is_ok());
        assert!(check_coordinator_url("https://c.example:7443", Some(Path::new("ca.pem")), false).is_ok());
        let ca = check_coordinator_url("http://c.example", Some(Path::new("ca.pem")), true).unwrap_err();
        assert_eq!(ca.flag, "--ca-cert");
        assert!(ca.message.contains("https://"), "{ca}");
        for bad in ["c.example:7070", "ftp://c", "http://", "https://", "http://bad host"] {
            assert_eq!(
                check_coordinator_url(bad, None, true).unwrap_err().flag,
                "--coordinator",
                "{bad}"
            );
        }
    }
}
