//! The failed-authentication limit: one rule for every secret a client
//! presents — the enrollment token, a host's credential, the admin token and
//! the report's token.
//!
//! **What is counted, and by what.** Every secret that is presented and
//! wrong takes a token from one bucket ([`FAILED_BURST`], then
//! [`FAILED_PER_MINUTE`]); a secret that is right, or none presented (a
//! browser's first visit, a hello without a token), takes nothing. Buckets are
//! per kind of secret, and within a kind per *identity* where the secret has
//! one, per *address* where it has none:
//!
//! | secret | one bucket per |
//! |---|---|
//! | host credential | host name: each host has its own secret |
//! | enrollment token, admin token, report token | peer address (IPv6: its /64), for that token alone |
//!
//! **What is refused.** Before a secret is looked at, its own bucket must hold
//! a token ([`FailedAuth::attempt`]); when it is empty the caller is refused
//! (`RESOURCE_EXHAUSTED` / 429, with when to come back) *without* the secret
//! being checked. Checking it anyway would tell a guesser past the limit
//! which guess was right, so the limit would limit nothing. No other bucket is
//! consulted, so:
//!
//! - wrong admin or report tokens, wrong enrollment tokens and wrong
//!   credentials of other hosts never refuse an agent's credential, whatever
//!   address they come from: a host's credential is checked against its own
//!   name's bucket only, never its address's. That is safe because the check
//!   itself is what the name's bucket limits — a guesser gets
//!   [`FAILED_BURST`] and then [`FAILED_PER_MINUTE`] tries at a host's
//!   credential however many addresses it uses, against 256 random bits;
//! - a token is limited per address, so a guesser spends its own address's
//!   allowance of that one token: an operator or a report reader elsewhere
//!   is not affected, nor is any other kind of secret at the same address.
//!   Callers sharing an address (NAT, a TCP load balancer) share that
//!   token's allowance with a guesser among them: a token has no identity to
//!   count by instead. Put the load balancer in a mode that keeps client
//!   addresses (or use TLS client certificates for operators) where that matters.
//!
//! The one exposure left is deliberate: whoever keeps presenting wrong
//! credentials *for one host's name* delays that host's next hello (never
//! its open session) while they keep at it; each such failure is logged with
//! the host's name and the address it came from.
//!
//! Tables are bounded ([`MAX_KEYS`] per kind); past it, buckets that have
//! recovered are forgotten first. Time is `tokio::time::Instant`.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::bucket::Bucket;

/// Wrong attempts one identity or address may make in a burst …
pub const FAILED_BURST: u32 = 10;
/// … and then per minute.
pub const FAILED_PER_MINUTE: u32 = 10;
/// Identities or addresses tracked per kind of secret.
pub const MAX_KEYS: usize = 65_536;

/// The kinds of secret, each counted on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecretKind {
    /// The shared token that enrolls a new host (`Hello.enrollment_token`).
    EnrollmentToken,
    /// A host's own credential (`Hello.credential`), counted per host name.
    HostCredential,
    /// The operators' token (`authorization: Bearer` on the admin API).
    AdminToken,
    /// The report's token (`--http-auth-token-file`).
    ReportToken,
}

impl SecretKind {
    #[cfg(test)]
    const ALL: [SecretKind; 4] = [
        SecretKind::EnrollmentToken,
        SecretKind::HostCredential,
        SecretKind::AdminToken,
        SecretKind::ReportToken,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// For people: what was presented wrong.
    pub fn describe(self) -> &'static str {
        match self {
            SecretKind::EnrollmentToken => "enrollment token",
            SecretKind::HostCredential => "host credential",
            SecretKind::AdminToken => "admin token",
            SecretKind::ReportToken => "report token",
        }
    }
}

/// Who a bucket counts: a host name, or an address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Name(String),
    Address(IpAddr),
}

impl Key {
    /// IPv6 by its /64: one machine usually holds a whole /64.
    fn address(ip: IpAddr) -> Key {
        match ip {
            IpAddr::V4(_) => Key::Address(ip),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Key::Address(IpAddr::V4(v4)),
                None => {
                    let bits = u128::from(v6) & !((1u128 << 64) - 1);
                    Key::Address(IpAddr::V6(bits.into()))
                }
            },
        }
    }
}

/// A caller past its limit: refused without its secret being checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limited {
    pub secret: SecretKind,
    /// Counted by host name (a credential) rather than by address.
    pub per_host: bool,
    /// When the next attempt will be looked at.
    pub retry_after: Duration,
}

impl fmt::Display for Limited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whose = if self.per_host {
            "for this host"
        } else {
            "from this address"
        };
        let wait = self.retry_after.as_secs_f64().ceil().max(1.0);
        // "failed token attempts" for every token: operators and scripts look for those words.
        let what = match self.secret {
            SecretKind::HostCredential => "credential",
            _ => "token",
        };
        write!(
            f,
            "too many failed {what} attempts {whose} ({} wrong, more than {FAILED_BURST} and then \
             {FAILED_PER_MINUTE} a minute); try again in {wait} s",
            self.secret.describe()
        )
    }
}

/// Failed attempts of every kind of secret ([`SecretKind`]), each kind counted
/// by its own key. One per coordinator, shared by the gRPC and HTTP sides.
#[derive(Debug, Default)]
pub struct FailedAuth {
    tables: [Mutex<HashMap<Key, Bucket>>; 4],
}

/// Leave to check one presented secret, from [`FailedAuth::attempt`]: say
/// how the check went ([`Attempt::judge`]), or drop it to count nothing (the
/// check could not be made).
#[must_use = "judge the attempt, or a wrong secret is not counted"]
pub struct Attempt<'a> {
    auth: &'a FailedAuth,
    secret: SecretKind,
    key: Option<Key>,
}

impl FailedAuth {
    /// Before `secret` presented by `peer` (for host `name`, a credential) is
    /// checked: leave to check it, or [`Limited`] when its bucket is empty.
    /// A caller without an address or name is not counted.
    pub fn attempt(&self, secret: SecretKind, peer: Option<IpAddr>, name: &str) -> Result<Attempt<'_>, Limited> {
        let key = match secret {
            SecretKind::HostCredential => Some(Key::Name(name.to_string())),
            _ => peer.map(Key::address),
        };
        if let Some(key) = &key
            && let Some(bucket) = self.table(secret).get_mut(key)
        {
            let wait = bucket.wait();
            if !wait.is_zero() {
                return Err(Limited {
                    secret,
                    per_host: matches!(key, Key::Name(_)),
                    retry_after: wait,
                });
            }
        }
        Ok(Attempt {
            auth: self,
            secret,
            key,
        })
    }

    fn failed(&self, secret: SecretKind, key: Key) {
        let mut table = self.table(secret);
        if table.len() >= MAX_KEYS && !table.contains_key(&key) {
            table.retain(|_, b| !b.is_full());
            if table.len() >= MAX_KEYS {
                // Every tracked key is failing: forget one rather than grow.
                if let Some(any) = table.keys().next().cloned() {
                    table.remove(&any);
                }
            }
        }
        table
            .entry(key)
            .or_insert_with(|| Bucket::new(FAILED_BURST, Duration::from_secs(60), FAILED_PER_MINUTE))
            .take();
    }

    fn table(&self, secret: SecretKind) -> MutexGuard<'_, HashMap<Key, Bucket>> {
        self.tables[secret.index()]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Keys tracked per kind, for tests.
    #[cfg(test)]
    fn tracked(&self) -> [usize; 4] {
        SecretKind::ALL.map(|s| self.table(s).len())
    }
}

impl Attempt<'_> {
    /// The check's outcome, `right`, returned; a wrong secret is counted.
    pub fn judge(self, right: bool) -> bool {
        if !right && let Some(key) = self.key {
            self.auth.failed(self.secret, key);
        }
        right
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    /// `n` wrong attempts of `secret` by `peer` for `name`, each allowed.
    fn fail(auth: &FailedAuth, secret: SecretKind, peer: Option<IpAddr>, name: &str, n: u32) {
        for i in 0..n {
            let attempt = auth
                .attempt(secret, peer, name)
                .unwrap_or_else(|l| panic!("attempt {i}: {l}"));
            assert!(!attempt.judge(false));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_kind_past_its_limit_refuses_only_that_kind_for_that_key() {
        let auth = FailedAuth::default();
        let fleet = ip("192.0.2.7");
        fail(&auth, SecretKind::AdminToken, fleet, "", FAILED_BURST);
        let limited = auth.attempt(SecretKind::AdminToken, fleet, "").err().expect("limited");
        assert_eq!(limited.retry_after, Duration::from_secs(60) / FAILED_PER_MINUTE);
        assert!(
            limited.to_string().contains("too many failed token attempts"),
            "{limited}"
        );
        // The right admin token from there is not looked at either: no oracle past the limit.
        assert!(auth.attempt(SecretKind::AdminToken, fleet, "").is_err());
        // Every other kind at that address, and the admin token elsewhere, go on.
        for (secret, peer) in [
            (SecretKind::EnrollmentToken, fleet),
            (SecretKind::ReportToken, fleet),
            (SecretKind::HostCredential, fleet),
            (SecretKind::AdminToken, ip("192.0.2.8")),
            (SecretKind::AdminToken, None),
        ] {
            assert!(
                auth.attempt(secret, peer, "db-07").unwrap().judge(true),
                "{secret:?} {peer:?}"
            );
        }
        tokio::time::advance(Duration::from_secs(60) / FAILED_PER_MINUTE).await;
        assert!(
            auth.attempt(SecretKind::AdminToken, fleet, "").is_ok(),
            "back after its share of a minute"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn credentials_count_by_host_name_whatever_the_address() {
        let auth = FailedAuth::default();
        // Spread over many addresses, guesses at one host still share its allowance.
        for i in 0..FAILED_BURST {
            let peer = Some(IpAddr::from([198, 51, 100, i as u8]));
            fail(&auth, SecretKind::HostCredential, peer, "db-07", 1);
        }
        let limited = auth
            .attempt(SecretKind::HostCredential, ip("203.0.113.1"), "db-07")
            .err()
            .expect("limited");
        assert!(
            limited.per_host && limited.to_string().contains("for this host"),
            "{limited}"
        );
        // Another host at the guesser's address is checked as usual.
        assert!(
            auth.attempt(SecretKind::HostCredential, ip("198.51.100.0"), "db-08")
                .unwrap()
                .judge(true)
        );
        // Right secrets count nothing.
        for _ in 0..3 * FAILED_BURST {
            assert!(
                auth.attempt(SecretKind::EnrollmentToken, ip("198.51.100.0"), "")
                    .unwrap()
                    .judge(true)
            );
        }
        assert_eq!(auth.tracked(), [0, 1, 0, 0]);
    }

    #[tokio::test(start_paused = true)]
    async fn ipv6_counts_by_its_64_and_mapped_ipv4_as_ipv4() {
        let auth = FailedAuth::default();
        for i in 0..FAILED_BURST {
            let peer = Some(IpAddr::from([0x2001, 0xdb8, 0, 1, 0, 0, 0, i as u16]));
            fail(&auth, SecretKind::ReportToken, peer, "", 1);
        }
        assert!(
            auth.attempt(SecretKind::ReportToken, ip("2001:db8:0:1::ffff"), "")
                .is_err()
        );
        assert!(auth.attempt(SecretKind::ReportToken, ip("2001:db8:0:2::1"), "").is_ok());
        fail(&auth, SecretKind::ReportToken, ip("192.0.2.1"), "", FAILED_BURST);
        assert!(
            auth.attempt(SecretKind::ReportToken, ip("::ffff:192.0.2.1"), "")
                .is_err()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_tables_stay_bounded() {
        let auth = FailedAuth::default();
        for i in 0..(MAX_KEYS as u32 + 100) {
            fail(
                &auth,
                SecretKind::EnrollmentToken,
                Some(IpAddr::from(i.to_be_bytes())),
                "",
                1,
            );
        }
        assert!(auth.tracked()[SecretKind::EnrollmentToken.index()] <= MAX_KEYS);
    }
}
