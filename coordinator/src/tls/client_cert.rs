//! `serve --client-ca`: an agent's host is the name in its client certificate.
//!
//! rustls has already checked that the certificate chains to the `--client-ca`
//! CA; what is left is the binding: the `Hello` name, taken as a DNS name, must
//! be one the certificate is valid for (its subjectAltName DNS entries, checked
//! by rustls-webpki). A host name that is not a valid DNS name cannot be bound,
//! so it is refused under mutual TLS.

use rustls_pki_types::{CertificateDer, DnsName, ServerName};
use webpki::EndEntityCert;

/// Why a `Hello` name does not match the session's client certificate.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    /// No certificate reached the service (cannot happen with `client_ca_root`, which
    /// makes the handshake require one; checked all the same).
    #[error("this coordinator requires a client certificate (--client-ca) and the agent presented none")]
    NoCertificate,
    #[error("the client certificate cannot be read: {0}")]
    Unreadable(String),
    #[error(
        "host name {name:?} is not a valid DNS name, and under mutual TLS (--client-ca) the host is bound to a DNS \
         name of its client certificate; run the agent with a --name its certificate carries"
    )]
    NotDnsName { name: String },
    #[error(
        "the client certificate names {expected}, not host {name:?}; run the agent with --name set to the \
         certificate's name, or give it a certificate issued for {name:?}"
    )]
    OtherName { expected: String, name: String },
}

impl Mismatch {
    /// A short word for the log, which never shows the whole (agent-supplied) name.
    pub fn reason(&self) -> &'static str {
        match self {
            Mismatch::NoCertificate => "no client certificate",
            Mismatch::Unreadable(_) => "unreadable client certificate",
            Mismatch::NotDnsName { .. } => "host name is no DNS name",
            Mismatch::OtherName { .. } => "certificate names another host",
        }
    }

    /// The names the certificate carries, when that is what went wrong.
    pub fn expected(&self) -> &str {
        match self {
            Mismatch::OtherName { expected, .. } => expected,
            _ => "",
        }
    }
}

/// Checks that `name` (a `Hello` name, already cut to the wire's length limit) is
/// a DNS name the first of `peer_certs` (the end entity) is valid for.
pub fn check_host_name(peer_certs: Option<&[CertificateDer<'static>]>, name: &str) -> Result<(), Mismatch> {
    let Some(end_entity) = peer_certs.and_then(|certs| certs.first()) else {
        return Err(Mismatch::NoCertificate);
    };
    let cert = EndEntityCert::try_from(end_entity).map_err(|e| Mismatch::Unreadable(e.to_string()))?;
    let dns = DnsName::try_from(name).map_err(|_| Mismatch::NotDnsName { name: name.to_string() })?;
    if cert.verify_is_valid_for_subject_name(&ServerName::DnsName(dns)).is_ok() {
        return Ok(());
    }
    let names: Vec<String> = cert.valid_dns_names().map(|n| format!("{n:?}")).collect();
    let expected = match names.len() {
        0 => "no DNS name".to_string(),
        _ => names.join(", "),
    };
    Err(Mismatch::OtherName {
        expected,
        name: name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, KeyPair};

    use super::*;

    fn cert_for(names: &[&str]) -> Vec<CertificateDer<'static>> {
        let names = names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names).unwrap().self_signed(&key).unwrap();
        vec![cert.der().clone()]
    }

    #[test]
    fn a_host_is_admitted_under_a_name_its_certificate_carries() {
        let certs = cert_for(&["web-1.fleet.example", "web-1"]);
        assert_eq!(check_host_name(Some(&certs), "web-1"), Ok(()));
        assert_eq!(check_host_name(Some(&certs), "WEB-1.fleet.example"), Ok(()));
    }

    #[test]
    fn another_name_is_refused_naming_what_the_certificate_holds() {
        let certs = cert_for(&["web-1"]);
        let err = check_host_name(Some(&certs), "db-7").unwrap_err();
        assert_eq!(
            err,
            Mismatch::OtherName {
                expected: "\"web-1\"".into(),
                name: "db-7".into()
            }
        );
        assert!(err.to_string().contains("names \"web-1\", not host \"db-7\""), "{err}");
        // A certificate for an address only carries no DNS name at all.
        let ip_only = cert_for(&["10.0.0.5"]);
        let err = check_host_name(Some(&ip_only), "web-1").unwrap_err().to_string();
        assert!(err.contains("names no DNS name"), "{err}");
    }

    #[test]
    fn a_name_that_is_no_dns_name_or_a_missing_certificate_is_refused() {
        let certs = cert_for(&["web-1"]);
        for bad in ["web 1", "web_1!", "-"] {
            let err = check_host_name(Some(&certs), bad).unwrap_err();
            assert!(matches!(err, Mismatch::NotDnsName { .. }), "{bad}: {err}");
            assert!(err.to_string().contains("not a valid DNS name"), "{err}");
        }
        assert_eq!(check_host_name(None, "web-1"), Err(Mismatch::NoCertificate));
        assert_eq!(check_host_name(Some(&[]), "web-1"), Err(Mismatch::NoCertificate));
    }
}
