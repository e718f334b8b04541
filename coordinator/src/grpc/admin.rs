//! `AdminService`: what operators do — start, watch and cancel campaigns, list
//! hosts and open findings. Every call carries `authorization: Bearer <admin token>`.

use std::sync::Arc;
use std::time::Duration;

use cipherfleet_core::spec::{Execution, InvalidSpec, JobSpec, Matrix, Suite};
use cipherfleet_proto::v1::admin_service_server::AdminService;
use cipherfleet_proto::v1::{self, start_campaign_request::Points};
use tonic::{Request, Response, Status};

use super::rate::{self, FailedAuth};
use super::{db_status, paging};
use crate::auth::Token;
use crate::db::campaigns::{CampaignStatus, DEFAULT_QUEUED_TTL, MAX_QUEUED_TTL};
use crate::db::findings::Severity;
use crate::db::{self, jobs::NewJob};
use crate::scheduler::Scheduler;
use crate::selector::{Candidate, Selector};

pub struct AdminSvc {
    pub scheduler: Arc<Scheduler>,
    pub token: Token,
    /// Failed token attempts per peer address, shared with the agent service.
    pub failed_auth: Arc<FailedAuth>,
}

impl AdminSvc {
    fn authorize<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let peer = request.remote_addr().map(|p| p.ip());
        if !self.failed_auth.allowed(peer) {
            return Err(rate::too_many_failures());
        }
        let presented = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| Status::unauthenticated("missing admin token (authorization: Bearer …)"))?;
        if self.token.matches(presented.as_bytes()) {
            Ok(())
        } else {
            self.failed_auth.failed(peer);
            Err(Status::unauthenticated("invalid admin token"))
        }
    }
}

/// Maps the agent's flag names to the request's field names.
fn field_error(prefix: &str, e: InvalidSpec) -> Status {
    let field = match e.flag {
        "--algorithm" => "algorithms",
        "--size" => "sizes",
        "--direction" => "directions",
        "--threads" => "threads",
        "--concurrency" => "concurrency",
        "--key-mode" => "key_modes",
        "--path" => "paths",
        "--seconds" => "seconds",
        "--suite" => "suite",
        other => other,
    };
    Status::invalid_argument(format!("{prefix}{field}: {}", e.message))
}

/// Most jobs one campaign may queue (points × selected hosts), checked
/// before any job is built.
pub const MAX_CAMPAIGN_JOBS: u64 = 1_000_000;

fn selector_from(s: Option<&v1::HostSelector>) -> Selector {
    let Some(s) = s else { return Selector::default() };
    Selector {
        labels: s.labels.iter().map(|l| (l.key.clone(), l.value.clone())).collect(),
        arch: s.arch.clone(),
        cpu_model: s.cpu_model.clone(),
        host_names: s.host_names.clone(),
    }
}

/// The request's time to live for queued jobs: 0 is the default.
fn queued_ttl(seconds: f64) -> Result<Duration, Status> {
    if seconds == 0.0 {
        return Ok(DEFAULT_QUEUED_TTL);
    }
    if !(seconds.is_finite() && seconds >= 1.0 && seconds <= MAX_QUEUED_TTL.as_secs_f64()) {
        return Err(Status::invalid_argument(format!(
            "queued_ttl_seconds: {seconds} is outside 1 ..= {} (30 days); 0 means a day",
            MAX_QUEUED_TTL.as_secs()
        )));
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn parse_campaign_id(s: &str) -> Result<i64, Status> {
    s.trim()
        .parse()
        .map_err(|_| Status::invalid_argument(format!("campaign_id: {s:?} is not a campaign id")))
}

fn counts(c: &db::campaigns::JobCounts) -> v1::JobCounts {
    let n = |x: i64| x.clamp(0, i64::from(u32::MAX)) as u32;
    v1::JobCounts {
        done: n(c.done),
        running: n(c.running),
        queued: n(c.queued),
        failed: n(c.failed),
        cancelled: n(c.cancelled),
    }
}

#[tonic::async_trait]
impl AdminService for AdminSvc {
    async fn start_campaign(
        &self,
        request: Request<v1::StartCampaignRequest>,
    ) -> Result<Response<v1::StartCampaignResponse>, Status> {
        self.authorize(&request)?;
        let req = request.into_inner();
        let pool = self.scheduler.pool();
        let (suite_name, matrix) = match &req.points {
            Some(Points::Suite(name)) => {
                let suite: Suite = name.parse().map_err(|e| field_error("", e))?;
                (suite.to_string(), None)
            }
            Some(Points::Matrix(m)) => (
                "matrix".to_string(),
                Some(Matrix::try_from(m).map_err(|e| Status::invalid_argument(e.to_string()))?),
            ),
            None => return Err(Status::invalid_argument("points: give a suite name or a matrix")),
        };
        if req.name.len() > 200 || req.started_by.len() > 200 {
            return Err(Status::invalid_argument("name, started_by: at most 200 bytes"));
        }
        let queued_ttl = queued_ttl(req.queued_ttl_seconds)?;
        let selector = selector_from(req.hosts.as_ref());
        let hosts = db::hosts::list_with_facts(pool).await.map_err(db_status)?;
        let mut jobs = Vec::new();
        let mut chosen = 0;
        let mut offline = 0;
        for h in &hosts {
            let candidate = Candidate {
                name: &h.host.name,
                labels: &h.host.labels.0,
                arch: h.arch.as_deref(),
                cpu_model_name: h.cpu_model_name.as_deref(),
            };
            if !selector.matches(&candidate) {
                continue;
            }
            // A host that is gone would keep the campaign waiting: only on request.
            if !req.include_offline && !self.scheduler.is_online(h.host.id) {
                offline += 1;
                continue;
            }
            chosen += 1;
            let points = match &matrix {
                // At most MAX_POINTS, checked when the matrix was read.
                Some(m) => m.expand(),
                None => suite_name
                    .parse::<Suite>()
                    .map_err(|e| field_error("", e))?
                    .expand(h.logical_cores.unwrap_or(1).max(1) as u32),
            };
            if (jobs.len() + points.len()) as u64 > MAX_CAMPAIGN_JOBS {
                return Err(Status::invalid_argument(format!(
                    "points: {} points on each selected host make more than {MAX_CAMPAIGN_JOBS} jobs per \
                     campaign; select fewer hosts or ask for fewer points",
                    points.len()
                )));
            }
            // Emulated hosts (by label or by facts) get the emulated budget: their
            // workers run many times slower.
            let execution = if h.emulated() {
                Execution::Emulated
            } else {
                Execution::Native
            };
            jobs.extend(points.iter().map(|p| NewJob {
                host_id: h.host.id,
                spec: p.clone(),
                execution,
            }));
        }
        if chosen == 0 && offline > 0 {
            return Err(Status::failed_precondition(format!(
                "hosts: the selector matches {offline} host(s), none of them online; set include_offline \
                 (--include-offline) to queue jobs for them until they come back"
            )));
        }
        if chosen == 0 {
            return Err(Status::invalid_argument(format!(
                "hosts: the selector matches none of the {} known hosts",
                hosts.len()
            )));
        }
        let matrix_json = matrix
            .as_ref()
            .map(|m| serde_json::to_value(m).expect("serialises"))
            .unwrap_or(serde_json::Value::Null);
        let selector_json = serde_json::to_value(&selector).expect("serialises");
        let name = if req.name.is_empty() {
            format!("{suite_name} on {chosen} host(s)")
        } else {
            req.name.clone()
        };
        let new = db::campaigns::NewCampaign {
            name: &name,
            suite: &suite_name,
            matrix: &matrix_json,
            selector: &selector_json,
            started_by: if req.started_by.is_empty() {
                "admin"
            } else {
                &req.started_by
            },
            queued_ttl,
        };
        let campaign_id = db::campaigns::create_with_jobs(pool, &new, &jobs)
            .await
            .map_err(db_status)?;
        tracing::info!(
            campaign = campaign_id,
            jobs = jobs.len(),
            hosts = chosen,
            "campaign started"
        );
        self.scheduler.dispatch_all().await.map_err(db_status)?;
        Ok(Response::new(v1::StartCampaignResponse {
            campaign_id: campaign_id.to_string(),
            jobs_created: jobs.len() as u32,
        }))
    }

    async fn campaign_status(
        &self,
        request: Request<v1::CampaignStatusRequest>,
    ) -> Result<Response<v1::CampaignStatusResponse>, Status> {
        self.authorize(&request)?;
        let id = parse_campaign_id(&request.get_ref().campaign_id)?;
        let pool = self.scheduler.pool();
        let progress = db::campaigns::status(pool, id)
            .await
            .map_err(db_status)?
            .ok_or_else(|| Status::not_found(format!("campaign {id} does not exist")))?;
        let hosts = db::campaigns::host_progress(pool, id).await.map_err(db_status)?;
        let failures = db::jobs::failures(pool, id, 100).await.map_err(db_status)?;
        let state = match progress.campaign.status {
            CampaignStatus::Running => v1::CampaignState::Running,
            CampaignStatus::Finished => v1::CampaignState::Completed,
            CampaignStatus::Cancelled => v1::CampaignState::Cancelled,
        };
        Ok(Response::new(v1::CampaignStatusResponse {
            campaign_id: id.to_string(),
            name: progress.campaign.name.clone(),
            state: state as i32,
            overall: Some(counts(&progress.jobs)),
            hosts: hosts
                .iter()
                .map(|(host_id, name, c)| v1::HostProgress {
                    host_id: host_id.to_string(),
                    host_name: name.clone(),
                    counts: Some(counts(c)),
                })
                .collect(),
            failures: failures
                .into_iter()
                .map(|(job, host_name)| v1::JobFailure {
                    job_id: job.id.to_string(),
                    host_id: job.host_id.to_string(),
                    host_name,
                    spec: serde_json::from_value::<JobSpec>(job.spec)
                        .ok()
                        .map(|s| v1::JobSpec::from(&s)),
                    error: job.error.unwrap_or_default(),
                })
                .collect(),
        }))
    }

    async fn cancel_campaign(
        &self,
        request: Request<v1::CancelCampaignRequest>,
    ) -> Result<Response<v1::CancelCampaignResponse>, Status> {
        self.authorize(&request)?;
        let req = request.into_inner();
        let id = parse_campaign_id(&req.campaign_id)?;
        let pool = self.scheduler.pool();
        let Some(running) = db::campaigns::cancel(pool, id).await.map_err(db_status)? else {
            return Err(match db::campaigns::get(pool, id).await.map_err(db_status)? {
                None => Status::not_found(format!("campaign {id} does not exist")),
                Some(c) => Status::failed_precondition(format!("campaign {id} is already {}", c.status.as_str())),
            });
        };
        let jobs_cancelled = db::campaigns::status(pool, id)
            .await
            .map_err(db_status)?
            .map_or(0, |p| p.jobs.cancelled);
        let reason = if req.reason.is_empty() {
            "campaign cancelled".to_string()
        } else {
            format!("campaign cancelled: {}", req.reason)
        };
        self.scheduler.cancel_running(&running, &reason);
        Ok(Response::new(v1::CancelCampaignResponse {
            jobs_cancelled: jobs_cancelled as u32,
        }))
    }

    async fn list_hosts(
        &self,
        request: Request<v1::ListHostsRequest>,
    ) -> Result<Response<v1::ListHostsResponse>, Status> {
        self.authorize(&request)?;
        let req = request.get_ref();
        let selector = selector_from(req.selector.as_ref());
        let size = paging::page_size(req.page_size)?;
        let hosts = db::hosts::list_with_facts(self.scheduler.pool())
            .await
            .map_err(db_status)?;
        let matching = hosts.into_iter().filter(|h| {
            selector.matches(&Candidate {
                name: &h.host.name,
                labels: &h.host.labels.0,
                arch: h.arch.as_deref(),
                cpu_model_name: h.cpu_model_name.as_deref(),
            })
        });
        let (page, next_page_token) = paging::by_key(matching, |h| h.host.name.as_str(), &req.page_token, size);
        let hosts = page
            .into_iter()
            .map(|h| v1::Host {
                id: h.host.id.to_string(),
                online: self.scheduler.is_online(h.host.id),
                acceleration: h.acceleration().to_string(),
                name: h.host.name,
                arch: h.arch.unwrap_or_default(),
                cpu_model_name: h.cpu_model_name.unwrap_or_default(),
                kernel_release: h.kernel_release.unwrap_or_default(),
                last_seen_unix_ms: h.host.last_seen.timestamp_millis(),
                labels: h
                    .host
                    .labels
                    .0
                    .into_iter()
                    .map(|(key, value)| v1::Label { key, value })
                    .collect(),
            })
            .collect();
        Ok(Response::new(v1::ListHostsResponse { hosts, next_page_token }))
    }

    async fn list_findings(
        &self,
        request: Request<v1::ListFindingsRequest>,
    ) -> Result<Response<v1::ListFindingsResponse>, Status> {
        self.authorize(&request)?;
        let req = request.get_ref();
        let min = match req.min_severity.as_str() {
            "" => Severity::Info,
            s => s
                .parse::<Severity>()
                .map_err(|e| Status::invalid_argument(format!("min_severity: {e}")))?,
        };
        let size = paging::page_size(req.page_size)?;
        let open = db::findings::list_open(self.scheduler.pool())
            .await
            .map_err(db_status)?
            .into_iter()
            .filter(|f| f.severity >= min);
        let (page, next_page_token) = paging::by_position(open, &req.page_token, size)?;
        let findings = page
            .into_iter()
            .map(|f| v1::Finding {
                id: f.id.to_string(),
                host_id: f.host_id.to_string(),
                host_name: f.host_name,
                reason: f.reason,
                kind: f.kind.unwrap_or_default(),
                subject: f.subject,
                severity: f.severity.to_string(),
                first_seen_unix_ms: f.first_seen.timestamp_millis(),
                last_seen_unix_ms: f.last_seen.timestamp_millis(),
                summary: f.summary,
                evidence_json: f.evidence.to_string(),
                fact_changes_json: f.fact_changes.to_string(),
            })
            .collect();
        Ok(Response::new(v1::ListFindingsResponse {
            findings,
            next_page_token,
        }))
    }
}
