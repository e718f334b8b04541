//! `hosts`: the list of known hosts ([`list`]), and `hosts reset-credential NAME`
//! and `hosts retire NAME`: the operator's say over who a host is.

use clap::{Args, Subcommand};

use super::out::{outln, printable};
use super::{AdminArgs, Format, admin_client, status_error};
use cipherfleet_proto::v1;

/// `hosts`: the list, or one of the identity commands.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct HostsArgs {
    #[command(subcommand)]
    pub action: Option<HostsCommand>,
    #[command(flatten)]
    pub admin: AdminArgs,
}

#[derive(Subcommand, Debug)]
pub enum HostsCommand {
    /// Forget a host's credential: its live session ends, its old credential stops working,
    /// and the next agent that presents the enrollment token may enroll under NAME again
    /// (a reinstalled machine, or one whose state directory was lost).
    ResetCredential {
        /// The host's name, as `hosts` lists it.
        name: String,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Retire a host: its session ends and its agent is refused from then on, no campaign
    /// selects it, its queued and running jobs fail. Its results and history stay in the report.
    Retire {
        /// The host's name, as `hosts` lists it.
        name: String,
        #[command(flatten)]
        admin: AdminArgs,
    },
}

/// Runs an identity command.
pub async fn run(command: HostsCommand) -> anyhow::Result<()> {
    match command {
        HostsCommand::ResetCredential { name, admin } => {
            let mut client = admin_client(&admin).await?;
            let done = client
                .reset_host_credential(v1::ResetHostCredentialRequest { name: name.clone() })
                .await
                .map_err(|s| status_error("resetting the host credential", s))?
                .into_inner();
            if admin.format == Format::Json {
                let row =
                    serde_json::json!({"host_id": done.host_id, "name": name, "session_ended": done.session_ended});
                outln!("{}", serde_json::to_string_pretty(&row)?)?;
            } else {
                outln!(
                    "host {} (id {}): credential reset{}; the next agent with the enrollment token may enroll under this name",
                    printable(&name),
                    done.host_id,
                    if done.session_ended {
                        ", its live session ended"
                    } else {
                        ""
                    }
                )?;
            }
        }
        HostsCommand::Retire { name, admin } => {
            let mut client = admin_client(&admin).await?;
            let done = client
                .retire_host(v1::RetireHostRequest { name: name.clone() })
                .await
                .map_err(|s| status_error("retiring the host", s))?
                .into_inner();
            if admin.format == Format::Json {
                let row = serde_json::json!({
                    "host_id": done.host_id, "name": name, "jobs_failed": done.jobs_failed,
                    "session_ended": done.session_ended,
                });
                outln!("{}", serde_json::to_string_pretty(&row)?)?;
            } else {
                outln!(
                    "host {} (id {}): retired; {} unfinished job(s) failed{}",
                    printable(&name),
                    done.host_id,
                    done.jobs_failed,
                    if done.session_ended {
                        ", its live session ended"
                    } else {
                        ""
                    }
                )?;
            }
        }
    }
    Ok(())
}

/// `hosts`: every host, page by page, as a table or JSON.
pub async fn list(args: AdminArgs) -> anyhow::Result<()> {
    let mut client = admin_client(&args).await?;
    // Every page, in order.
    let mut hosts = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = client
            .list_hosts(v1::ListHostsRequest {
                page_token,
                ..Default::default()
            })
            .await
            .map_err(|s| status_error("listing hosts", s))?
            .into_inner();
        hosts.extend(page.hosts);
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    if args.format == Format::Json {
        let rows: Vec<_> = hosts
            .iter()
            .map(|h| {
                serde_json::json!({
                    "id": h.id, "name": h.name, "arch": h.arch, "cpu_model_name": h.cpu_model_name,
                    "kernel_release": h.kernel_release, "online": h.online, "retired": h.retired,
                    "last_seen_unix_ms": h.last_seen_unix_ms,
                    "acceleration": h.acceleration,
                    "labels": h.labels.iter().map(|l| (l.key.clone(), l.value.clone())).collect::<std::collections::BTreeMap<_, _>>(),
                })
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(());
    }
    outln!(
        "{:<6} {:<24} {:<8} {:<8} {:<12} {:<24} cpu",
        "id",
        "name",
        "online",
        "arch",
        "crypto",
        "kernel"
    )?;
    for h in hosts {
        outln!(
            "{:<6} {:<24} {:<8} {:<8} {:<12} {:<24} {}",
            h.id,
            printable(&h.name),
            if h.retired {
                "retired"
            } else if h.online {
                "online"
            } else {
                "offline"
            },
            printable(&h.arch),
            h.acceleration,
            printable(&h.kernel_release),
            printable(&h.cpu_model_name)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::super::{Cli, Command};
    use super::*;

    fn hosts(args: &[&str]) -> HostsArgs {
        let cli = Cli::try_parse_from([&["cipherfleet-coordinator", "hosts"], args].concat()).expect("parses");
        match cli.command {
            Command::Hosts(h) => h,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn plain_hosts_lists_and_the_identity_commands_take_a_name_and_the_admin_flags() {
        let list = hosts(&["--format", "json", "--coordinator", "https://c:7443"]);
        assert!(list.action.is_none());
        assert_eq!(
            (list.admin.format, list.admin.coordinator.as_str()),
            (Format::Json, "https://c:7443")
        );
        match hosts(&["reset-credential", "db-1", "--coordinator", "https://c:7443"]).action {
            Some(HostsCommand::ResetCredential { name, admin }) => {
                assert_eq!((name.as_str(), admin.coordinator.as_str()), ("db-1", "https://c:7443"))
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            hosts(&["retire", "db-1"]).action,
            Some(HostsCommand::Retire { name, .. }) if name == "db-1"
        ));
        let missing = Cli::try_parse_from(["cipherfleet-coordinator", "hosts", "retire"]).unwrap_err();
        assert!(missing.to_string().contains("<NAME>"), "{missing}");
    }
}
