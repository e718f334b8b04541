//! `serve --self-signed DIR`: a private CA and a server certificate it signed,
//! made on the first start and reused afterwards, so TLS works on a first try
//! without openssl or a public CA. Agents trust `DIR/ca.pem` (`--ca-cert`).
//!
//! The CA is made once and kept: agents pin it, so replacing it would lock
//! them out. The server certificate is reissued (by the same CA) only when the
//! names it must carry change, e.g. a new `--tls-name`.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The CA's subject; fixed, so the CA key alone rebuilds the issuer on later runs.
const CA_NAME: &str = "cipherfleet private CA";
const CA_CERT: &str = "ca.pem";
const CA_KEY: &str = "ca.key";
const SERVER_CERT: &str = "server.pem";
const SERVER_KEY: &str = "server.key";
/// The names the server certificate was issued for, one per line.
const SERVER_NAMES: &str = "server.names";

/// The files of a `--self-signed` directory.
#[derive(Debug, Clone)]
pub struct SelfSigned {
    /// What agents and operators pass as `--ca-cert`.
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The names the server certificate carries: `localhost`, `127.0.0.1`, `::1`,
/// the listen address when it is a specific one, and each `--tls-name`, once each.
pub fn server_names(listen: SocketAddr, extra: &[String]) -> Vec<String> {
    let mut names = vec![
        "localhost".to_string(),
        IpAddr::V4(Ipv4Addr::LOCALHOST).to_string(),
        IpAddr::V6(Ipv6Addr::LOCALHOST).to_string(),
    ];
    if !listen.ip().is_unspecified() {
        names.push(listen.ip().to_string());
    }
    for name in extra {
        let name = name.trim().to_ascii_lowercase();
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Makes (or reuses) the CA and the server certificate for `names` in `dir`.
pub fn ensure(dir: &Path, names: &[String]) -> anyhow::Result<SelfSigned> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating --self-signed {}", dir.display()))?;
    let files = SelfSigned {
        ca: dir.join(CA_CERT),
        cert: dir.join(SERVER_CERT),
        key: dir.join(SERVER_KEY),
    };
    let ca_key_path = dir.join(CA_KEY);
    let ca_key = match (files.ca.exists(), ca_key_path.exists()) {
        (true, true) => {
            let pem = read_private(&ca_key_path)?;
            KeyPair::from_pem(&pem).with_context(|| format!("{} is not a usable private key", ca_key_path.display()))?
        }
        (false, false) => {
            let key = KeyPair::generate().context("generating the CA key")?;
            let cert = ca_params().self_signed(&key).context("making the CA certificate")?;
            write_file(&ca_key_path, key.serialize_pem().as_bytes(), 0o600)?;
            write_file(&files.ca, cert.pem().as_bytes(), 0o644)?;
            tracing::info!(ca = %files.ca.display(), "made a private CA for --self-signed");
            key
        }
        _ => bail!(
            "--self-signed {}: one of {CA_CERT} and {CA_KEY} is missing; restore it, or empty the directory to \
             make a new CA (every agent must then get the new {CA_CERT})",
            dir.display()
        ),
    };
    let names_path = dir.join(SERVER_NAMES);
    let wanted = names.join("\n") + "\n";
    let current = std::fs::read_to_string(&names_path).ok();
    if current.as_deref() == Some(wanted.as_str()) && files.cert.exists() && files.key.exists() {
        return Ok(files);
    }
    let issuer = Issuer::new(ca_params(), ca_key);
    let mut params = CertificateParams::new(names.to_vec()).context("the --tls-name names")?;
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, names[0].as_str());
    params.is_ca = IsCa::ExplicitNoCa;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate().context("generating the server key")?;
    let cert = params
        .signed_by(&key, &issuer)
        .context("signing the server certificate")?;
    write_file(&files.key, key.serialize_pem().as_bytes(), 0o600)?;
    write_file(&files.cert, cert.pem().as_bytes(), 0o644)?;
    write_file(&names_path, wanted.as_bytes(), 0o644)?;
    tracing::info!(names = ?names, cert = %files.cert.display(), "issued the server certificate for --self-signed");
    Ok(files)
}

/// The CA's parameters, the same on every run (only its key differs per directory).
fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, CA_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params
}

/// A key file, refusing one that other users could read (or a link).
fn read_private(path: &Path) -> anyhow::Result<String> {
    let meta = std::fs::symlink_metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file", path.display());
    }
    if meta.permissions().mode() & 0o077 != 0 {
        bail!("{} is readable by other users; chmod 600 it", path.display());
    }
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// Writes `path` whole with `mode`: a new file beside it, renamed over it, so a
/// crash leaves the old file or the new one and a link at `path` is replaced, not followed.
fn write_file(path: &Path, content: &[u8], mode: u32) -> anyhow::Result<()> {
    let temp = path.with_extension(format!("new-{}", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)
        .with_context(|| format!("creating {}", temp.display()))?;
    file.write_all(content)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", temp.display()))?;
    std::fs::rename(&temp, path).with_context(|| format!("renaming {} to {}", temp.display(), path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_always_include_loopback_and_add_the_listen_address_and_tls_names() {
        let any: SocketAddr = "0.0.0.0:7443".parse().unwrap();
        assert_eq!(server_names(any, &[]), ["localhost", "127.0.0.1", "::1"]);
        let one: SocketAddr = "10.0.0.5:7443".parse().unwrap();
        let extra = [
            "Coord.Example".to_string(),
            "10.0.0.5".to_string(),
            "localhost".to_string(),
        ];
        assert_eq!(
            server_names(one, &extra),
            ["localhost", "127.0.0.1", "::1", "10.0.0.5", "coord.example"]
        );
    }

    #[test]
    fn the_ca_is_made_once_and_the_server_certificate_follows_the_names() {
        let dir = std::env::temp_dir().join(format!("cipherfleet-self-signed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let names = server_names("127.0.0.1:7443".parse().unwrap(), &[]);
        let first = ensure(&dir, &names).unwrap();
        let ca = std::fs::read(&first.ca).unwrap();
        let cert = std::fs::read(&first.cert).unwrap();
        for key in [&first.key, &dir.join(CA_KEY)] {
            assert_eq!(
                std::fs::metadata(key).unwrap().permissions().mode() & 0o777,
                0o600,
                "{key:?}"
            );
        }
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);

        let again = ensure(&dir, &names).unwrap();
        assert_eq!(std::fs::read(&again.ca).unwrap(), ca, "the CA was replaced");
        assert_eq!(
            std::fs::read(&again.cert).unwrap(),
            cert,
            "the certificate was reissued for the same names"
        );

        let more = server_names("127.0.0.1:7443".parse().unwrap(), &["coord.example".to_string()]);
        let reissued = ensure(&dir, &more).unwrap();
        assert_eq!(std::fs::read(&reissued.ca).unwrap(), ca, "the CA was replaced");
        assert_ne!(
            std::fs::read(&reissued.cert).unwrap(),
            cert,
            "a new name needs a new certificate"
        );
        // What `serve` does with the files: a usable TLS identity.
        assert!(
            super::super::server_tls(Some(&reissued.cert), Some(&reissued.key))
                .unwrap()
                .is_some()
        );

        std::fs::remove_file(dir.join(CA_KEY)).unwrap();
        let err = ensure(&dir, &more).unwrap_err().to_string();
        assert!(err.contains("ca.key") && err.contains("missing"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
