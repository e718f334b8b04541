//! What every operator command shares: the flags that reach a coordinator's
//! admin API ([`AdminArgs`]), the client with its bearer token, and the output format.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use cipherfleet_proto::client::{check_coordinator_url, client_identity, client_tls};
use cipherfleet_proto::v1::{self, admin_service_client::AdminServiceClient};
use clap::{Args, ValueEnum};
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};

use crate::domain::auth::Token;
use crate::domain::selector::Selector;

/// Where the coordinator is, how to trust it, the admin token, and the output format.
#[derive(Args, Debug, Clone)]
pub struct AdminArgs {
    /// The coordinator's gRPC address: https://… when it serves TLS (http:// only to this
    /// machine's loopback, or with --insecure-plaintext).
    #[arg(long, env = "CIPHERFLEET_COORDINATOR", default_value = "http://127.0.0.1:7443")]
    pub(super) coordinator: String,
    /// CA certificate (PEM) that signed an https:// coordinator's certificate. Without it the
    /// system's CA store is used.
    #[arg(long, env = "CIPHERFLEET_CA_CERT", value_name = "PEM")]
    pub(super) ca_cert: Option<PathBuf>,
    /// Client certificate (PEM) for a coordinator that requires one (`serve --client-ca`): any
    /// certificate that CA signed. Needs --client-key.
    #[arg(long, env = "CIPHERFLEET_CLIENT_CERT", value_name = "PEM")]
    pub(super) client_cert: Option<PathBuf>,
    /// Private key of --client-cert (PEM).
    #[arg(long, env = "CIPHERFLEET_CLIENT_KEY", value_name = "PEM")]
    pub(super) client_key: Option<PathBuf>,
    /// Allow an http:// coordinator on another machine: the admin token then crosses the network
    /// in clear. Only for a network you trust; prefer https://.
    #[arg(long)]
    pub(super) insecure_plaintext: bool,
    /// File holding the admin token (else CIPHERFLEET_ADMIN_TOKEN).
    #[arg(long)]
    pub(super) admin_token_file: Option<PathBuf>,
    /// Output: table (also spelled text) for people, json for scripts.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub(super) format: Format,
}

/// `--format`: for people or for scripts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    #[value(alias = "text")]
    Table,
    Json,
}

/// The admin API's client; every call carries the admin token.
pub type Admin = AdminServiceClient<tonic::service::interceptor::InterceptedService<Channel, BearerToken>>;

/// Adds `authorization: Bearer TOKEN` to every call.
#[derive(Clone)]
pub struct BearerToken(MetadataValue<tonic::metadata::Ascii>);

impl tonic::service::Interceptor for BearerToken {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        request.metadata_mut().insert("authorization", self.0.clone());
        Ok(request)
    }
}

/// Connects to `--coordinator` as `args` say (TLS, client certificate, token).
pub async fn admin_client(args: &AdminArgs) -> anyhow::Result<Admin> {
    let token = Token::load(
        "admin token",
        args.admin_token_file.as_deref(),
        "--admin-token-file",
        "CIPHERFLEET_ADMIN_TOKEN",
    )?;
    let header = format!("Bearer {}", token.expose());
    let value: MetadataValue<_> = header.parse().context("the admin token must be printable ASCII")?;
    // The agent's rules: https:// or http://, --ca-cert only with https://, files checked now.
    check_coordinator_url(&args.coordinator, args.ca_cert.as_deref(), args.insecure_plaintext)?;
    let mut endpoint = Endpoint::from_shared(args.coordinator.clone())
        .with_context(|| format!("--coordinator {:?} is not a URL", args.coordinator))?
        .connect_timeout(Duration::from_secs(5));
    let identity = client_identity(
        &args.coordinator,
        args.client_cert.as_deref(),
        args.client_key.as_deref(),
    )?;
    if let Some(mut tls) = client_tls(&args.coordinator, args.ca_cert.as_deref())? {
        if let Some(identity) = identity {
            tls = tls.identity(identity);
        }
        endpoint = endpoint.tls_config(tls).context("setting up TLS")?;
    }
    let channel = endpoint
        .connect()
        .await
        .with_context(|| format!("connecting to the coordinator at {}", args.coordinator))?;
    Ok(AdminServiceClient::with_interceptor(channel, BearerToken(value)))
}

/// A refused call as an error that says what was being done.
pub fn status_error(what: &str, s: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{what}: {} ({:?})", s.message(), s.code())
}

/// The admin API's form of `--select` terms.
pub fn proto_selector(selector: Selector) -> v1::HostSelector {
    crate::grpc::admin::selector_to(&selector)
}
