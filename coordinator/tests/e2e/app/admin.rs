//! Admin clients (bearer token, TLS, client certificates), hosts online,
//! and polling.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cipherfleet_proto::v1::{self, admin_service_client::AdminServiceClient};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

use super::{ADMIN_TOKEN, App};

impl App {
    pub async fn admin(&self) -> Admin {
        admin_presenting(&self.url(), self.ca().as_deref(), self.client_identity.as_ref()).await
    }

    /// Waits until `n` hosts are online.
    pub async fn wait_online(&self, n: usize) {
        self.wait_hosts("hosts online", |hosts| hosts.iter().filter(|h| h.online).count() >= n)
            .await
    }

    /// Waits until the host named `name` is known and `online` (or not).
    pub async fn wait_host(&self, name: &str, online: bool) {
        let what = format!("host {name} online: {online}");
        self.wait_hosts(&what, |hosts| {
            hosts.iter().any(|h| h.name == name && h.online == online)
        })
        .await
    }

    /// Waits up to 30 s until `check` holds for the hosts the coordinator lists.
    async fn wait_hosts(&self, what: &str, check: impl Fn(&[v1::Host]) -> bool) {
        wait_hosts_of(self.admin().await, what, check).await
    }
}

/// An admin client sending a bearer token.
pub type Admin = AdminServiceClient<tonic::service::interceptor::InterceptedService<Channel, Bearer>>;

#[derive(Clone)]
pub struct Bearer(tonic::metadata::MetadataValue<tonic::metadata::Ascii>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut r: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        r.metadata_mut().insert("authorization", self.0.clone());
        Ok(r)
    }
}

/// Waits until the coordinator at `url` (over TLS trusting `ca` when given) has `n` hosts online.
pub async fn wait_online_at(url: &str, ca: Option<&Path>, n: usize) {
    let admin = admin_over(url, ca, ADMIN_TOKEN).await;
    wait_hosts_of(admin, "hosts online", |hosts| {
        hosts.iter().filter(|h| h.online).count() >= n
    })
    .await
}

/// Waits up to 30 s until `check` holds for the hosts `admin` lists.
async fn wait_hosts_of(admin: Admin, what: &str, check: impl Fn(&[v1::Host]) -> bool) {
    let check = &check;
    wait_for(what, Duration::from_secs(30), || {
        let mut admin = admin.clone();
        async move {
            let hosts = admin
                .list_hosts(v1::ListHostsRequest::default())
                .await
                .ok()?
                .into_inner();
            check(&hosts.hosts).then_some(())
        }
    })
    .await;
}

pub async fn admin_with_token(url: &str, token: &str) -> Admin {
    admin_over(url, None, token).await
}

/// An admin client; over TLS trusting `ca` when given.
pub async fn admin_over(url: &str, ca: Option<&Path>, token: &str) -> Admin {
    let channel = connect_with(url, ca).await;
    AdminServiceClient::with_interceptor(channel, Bearer(format!("Bearer {token}").parse().unwrap()))
}

/// [`admin_over`] with the admin token, presenting `identity` (certificate, key) when given.
pub async fn admin_presenting(url: &str, ca: Option<&Path>, identity: Option<&(PathBuf, PathBuf)>) -> Admin {
    let Some((cert, key)) = identity else {
        return admin_over(url, ca, ADMIN_TOKEN).await;
    };
    let ca = std::fs::read(ca.expect("client certificates need TLS")).expect("reading the test CA");
    let identity = Identity::from_pem(std::fs::read(cert).unwrap(), std::fs::read(key).unwrap());
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .identity(identity);
    let channel = tonic::transport::Endpoint::from_shared(url.to_string())
        .unwrap()
        .tls_config(tls)
        .expect("TLS settings")
        .connect()
        .await
        .expect("connecting to the coordinator with a client certificate");
    AdminServiceClient::with_interceptor(channel, Bearer(format!("Bearer {ADMIN_TOKEN}").parse().unwrap()))
}

pub async fn connect(url: &str) -> Channel {
    connect_with(url, None).await
}

/// A channel to `url`; over TLS trusting `ca` alone when given.
pub async fn connect_with(url: &str, ca: Option<&Path>) -> Channel {
    let mut endpoint = tonic::transport::Endpoint::from_shared(url.to_string()).unwrap();
    if let Some(ca) = ca {
        let pem = std::fs::read(ca).expect("reading the test CA");
        endpoint = endpoint
            .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)))
            .expect("TLS settings");
    }
    endpoint.connect().await.expect("connecting to the coordinator")
}

/// Polls `check` every 100 ms until it yields a value, or panics after `limit`.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out after {limit:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
