//! `AdminService`: what operators do — start, watch and cancel campaigns, list
//! hosts and open findings, add, list and remove schedules. Every call carries `authorization: Bearer <admin token>`.

use std::sync::Arc;
use std::time::Duration;

use cipherfleet_core::path::Path;
use cipherfleet_core::spec::{InvalidSpec, JobSpec, Matrix, Suite};
use cipherfleet_core::wire;
use cipherfleet_proto::v1::admin_service_server::AdminService;
use cipherfleet_proto::v1::{self, start_campaign_request::Points as Requested};
use sqlx::PgPool;
use tonic::{Request, Response, Status};

use super::{db_status, paging};
use crate::domain::auth::Token;
use crate::domain::selector::{Candidate, Selector};
use crate::guard::auth::{FailedAuth, SecretKind};
use crate::launch::{self, Launch, LaunchError, Points};
use crate::report;
use crate::scheduler::Scheduler;
use crate::store;
use crate::store::campaigns::{CampaignStatus, DEFAULT_QUEUED_TTL, MAX_QUEUED_TTL};
use crate::store::findings::Severity;
use crate::store::schedules::Schedule;
use crate::watch::schedule::{self, IfRunning, NewSchedule};
use crate::watch::timing::Timing;

pub struct AdminSvc {
    pub pool: PgPool,
    pub scheduler: Arc<Scheduler>,
    pub token: Token,
    /// Failed secrets, counted per kind ([`crate::guard::auth`]): wrong admin
    /// tokens from an address hold back only the admin token from there.
    pub failed_auth: Arc<FailedAuth>,
}

impl AdminSvc {
    fn authorize<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let peer = request.remote_addr().map(|p| p.ip());
        let presented = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| Status::unauthenticated("missing admin token (authorization: Bearer …)"))?;
        let attempt = self.failed_auth.attempt(SecretKind::AdminToken, peer, "").inspect_err(
            |limited| tracing::warn!(peer = ?peer, %limited, "admin call refused before its token was checked"),
        )?;
        if attempt.judge(self.token.matches(presented.as_bytes())) {
            Ok(())
        } else {
            tracing::warn!(peer = ?peer, "admin call with a wrong token");
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
        "--nonce" => "nonces",
        "--seconds" => "seconds",
        "--suite" => "suite",
        other => other,
    };
    Status::invalid_argument(format!("{prefix}{field}: {}", e.message))
}

/// Most jobs one campaign may queue; the rule is in [`crate::launch`].
pub use crate::launch::MAX_CAMPAIGN_JOBS;

/// The one conversion point from launch errors to gRPC status.
fn launch_status(e: LaunchError) -> Status {
    match e {
        e @ LaunchError::NoHost { .. } => Status::invalid_argument(format!("hosts: {e}")),
        e @ LaunchError::AllOffline { .. } => Status::failed_precondition(format!("hosts: {e}")),
        e @ LaunchError::TooManyJobs { .. } => Status::invalid_argument(format!("points: {e}")),
        LaunchError::Db(e) => db_status(e),
    }
}

/// Refuses text the database cannot store (a NUL), naming its field: stored
/// as it is, it would be refused by the database instead, field unknown.
fn storable(field: &str, value: &str) -> Result<(), Status> {
    wire::check_storable(field, value).map_err(|e| Status::invalid_argument(e.to_string()))
}

/// The selector of request field `field`, its text checked [`storable`].
fn selector_from(field: &str, s: Option<&v1::HostSelector>) -> Result<Selector, Status> {
    let Some(s) = s else { return Ok(Selector::default()) };
    for (i, label) in s.labels.iter().enumerate() {
        storable(&format!("{field}.labels[{i}].key"), &label.key)?;
        storable(&format!("{field}.labels[{i}].value"), &label.value)?;
    }
    for (list, values) in [
        ("arch", &s.arch),
        ("cpu_model", &s.cpu_model),
        ("host_names", &s.host_names),
    ] {
        for (i, value) in values.iter().enumerate() {
            storable(&format!("{field}.{list}[{i}]"), value)?;
        }
    }
    Ok(Selector {
        labels: s.labels.iter().map(|l| (l.key.clone(), l.value.clone())).collect(),
        arch: s.arch.clone(),
        cpu_model: s.cpu_model.clone(),
        host_names: s.host_names.clone(),
    })
}

fn unknown_host(name: &str) -> Status {
    let shown: String = name.chars().take(128).collect();
    Status::not_found(format!(
        "no host is named {shown:?} (see `cipherfleet-coordinator hosts`)"
    ))
}

/// The proto form of a selector (the CLI sends `--select` terms in it).
pub fn selector_to(s: &Selector) -> v1::HostSelector {
    v1::HostSelector {
        labels: s
            .labels
            .iter()
            .map(|(key, value)| v1::Label {
                key: key.clone(),
                value: value.clone(),
            })
            .collect(),
        arch: s.arch.clone(),
        cpu_model: s.cpu_model.clone(),
        host_names: s.host_names.clone(),
    }
}

fn schedule_info(s: Schedule) -> v1::ScheduleInfo {
    let selector: Selector = serde_json::from_value(s.selector).unwrap_or_default();
    v1::ScheduleInfo {
        id: s.id.to_string(),
        suite: s.suite,
        hosts: Some(selector_to(&selector)),
        every_seconds: s.every_seconds,
        at_minute: s.at_minute,
        jitter_seconds: s.jitter_seconds,
        if_running: s.if_running,
        created_by: s.created_by,
        next_due_unix_ms: s.due_at.timestamp_millis(),
        next_fire_unix_ms: s.fire_at.timestamp_millis(),
        last_campaign_id: s.last_campaign_id.map(|id| id.to_string()).unwrap_or_default(),
        last_outcome: s.last_outcome.unwrap_or_default(),
        runs: s.runs,
        skips: s.skips,
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

/// Rows of skipped points `CampaignStatus` lists (per host and path).
const SKIPPED_LISTED: i64 = 1000;

fn parse_campaign_id(s: &str) -> Result<i64, Status> {
    s.trim()
        .parse()
        .map_err(|_| Status::invalid_argument(format!("campaign_id: {s:?} is not a campaign id")))
}

fn counts(c: &store::campaigns::JobCounts) -> v1::JobCounts {
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
        let pool = &self.pool;
        let points = match &req.points {
            Some(Requested::Suite(name)) => Points::Suite(name.parse::<Suite>().map_err(|e| field_error("", e))?),
            Some(Requested::Matrix(m)) => Points::Matrix(Box::new(
                Matrix::try_from(m).map_err(|e| Status::invalid_argument(e.to_string()))?,
            )),
            None => return Err(Status::invalid_argument("points: give a suite name or a matrix")),
        };
        if req.name.len() > 200 || req.started_by.len() > 200 {
            return Err(Status::invalid_argument("name, started_by: at most 200 bytes"));
        }
        storable("name", &req.name)?;
        storable("started_by", &req.started_by)?;
        let queued_ttl = queued_ttl(req.queued_ttl_seconds)?;
        let selector = selector_from("hosts", req.hosts.as_ref())?;
        // Online anywhere in the cluster: a host on another coordinator runs its jobs too.
        let online = match req.include_offline {
            true => None,
            false => Some(self.scheduler.online_in_cluster().await.map_err(db_status)?),
        };
        let launch = Launch {
            points: &points,
            selector: &selector,
            name: &req.name,
            started_by: if req.started_by.is_empty() {
                "admin"
            } else {
                &req.started_by
            },
            online: online.as_ref(),
            queued_ttl,
        };
        let mut tx = pool.begin().await.map_err(|e| db_status(e.into()))?;
        let launched = launch::insert(&mut tx, &launch).await.map_err(launch_status)?;
        tx.commit().await.map_err(|e| db_status(e.into()))?;
        let (campaign_id, jobs, points_skipped) = (launched.campaign_id, launched.jobs, launched.points_skipped);
        // The campaign is committed: answer now and hand out its first jobs in
        // the background (dispatching to a large fleet in turn kept the caller
        // waiting: docs/performance.md, "Coordinator queries and sessions").
        let scheduler = self.scheduler.clone();
        tokio::spawn(async move {
            if let Err(e) = scheduler.dispatch_all().await {
                tracing::warn!(campaign = campaign_id, error = %e, "dispatching a new campaign's first jobs");
            }
        });
        Ok(Response::new(v1::StartCampaignResponse {
            campaign_id: campaign_id.to_string(),
            jobs_created: jobs as u32,
            points_skipped: u32::try_from(points_skipped).unwrap_or(u32::MAX),
        }))
    }

    async fn campaign_status(
        &self,
        request: Request<v1::CampaignStatusRequest>,
    ) -> Result<Response<v1::CampaignStatusResponse>, Status> {
        self.authorize(&request)?;
        let id = parse_campaign_id(&request.get_ref().campaign_id)?;
        let pool = &self.pool;
        let campaign = store::campaigns::get(pool, id)
            .await
            .map_err(db_status)?
            .ok_or_else(|| Status::not_found(format!("campaign {id} does not exist")))?;
        // The counts kept per host, which outlive the jobs retention deletes.
        let (jobs, _) = report::campaign_summaries::totals(pool, id).await.map_err(db_status)?;
        let hosts = report::campaign_summaries::host_progress(pool, id, None, 0)
            .await
            .map_err(db_status)?;
        let failures = store::jobs::failures(pool, id, 100).await.map_err(db_status)?;
        let skipped = store::capabilities::for_campaign(pool, id, SKIPPED_LISTED)
            .await
            .map_err(db_status)?;
        let provider_skipped = store::capabilities::providers_for_campaign(pool, id, SKIPPED_LISTED)
            .await
            .map_err(db_status)?;
        let points_skipped: i64 = store::capabilities::totals(pool, id)
            .await
            .map_err(db_status)?
            .iter()
            .map(|t| t.points)
            .sum::<i64>()
            + store::capabilities::provider_totals(pool, id)
                .await
                .map_err(db_status)?
                .iter()
                .map(|t| t.points)
                .sum::<i64>();
        let state = match campaign.status {
            CampaignStatus::Running => v1::CampaignState::Running,
            CampaignStatus::Finished => v1::CampaignState::Completed,
            CampaignStatus::Cancelled => v1::CampaignState::Cancelled,
        };
        Ok(Response::new(v1::CampaignStatusResponse {
            campaign_id: id.to_string(),
            name: campaign.name.clone(),
            state: state as i32,
            overall: Some(counts(&jobs)),
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
            skipped: skipped
                .into_iter()
                .map(|s| v1::SkippedPoints {
                    host_id: s.host_id.to_string(),
                    host_name: s.host_name,
                    path: match s.path {
                        Path::Accelerated => v1::Path::Accelerated,
                        Path::Software => v1::Path::Software,
                    } as i32,
                    points: u32::try_from(s.points).unwrap_or(u32::MAX),
                    reason: store::capabilities::reason(s.path).to_string(),
                    provider: v1::Provider::Rustcrypto as i32,
                })
                .chain(provider_skipped.into_iter().map(|s| v1::SkippedPoints {
                    host_id: s.host_id.to_string(),
                    host_name: s.host_name,
                    path: v1::Path::Unspecified as i32,
                    points: u32::try_from(s.points).unwrap_or(u32::MAX),
                    reason: s.reason,
                    provider: cipherfleet_core::wire::provider_to_wire(s.provider) as i32,
                }))
                .collect(),
            points_skipped: u32::try_from(points_skipped).unwrap_or(u32::MAX),
        }))
    }

    async fn cancel_campaign(
        &self,
        request: Request<v1::CancelCampaignRequest>,
    ) -> Result<Response<v1::CancelCampaignResponse>, Status> {
        self.authorize(&request)?;
        let req = request.into_inner();
        let id = parse_campaign_id(&req.campaign_id)?;
        storable("reason", &req.reason)?;
        let pool = &self.pool;
        let reason = if req.reason.is_empty() {
            "campaign cancelled".to_string()
        } else {
            format!("campaign cancelled: {}", req.reason)
        };
        // Every coordinator, this one too, hears of it at commit and tells its
        // own agents to stop their running jobs of the campaign (`cluster::cancel`).
        if store::campaigns::cancel_because(pool, id, Some(&reason))
            .await
            .map_err(db_status)?
            .is_none()
        {
            return Err(match store::campaigns::get(pool, id).await.map_err(db_status)? {
                None => Status::not_found(format!("campaign {id} does not exist")),
                Some(c) => Status::failed_precondition(format!("campaign {id} is already {}", c.status.as_str())),
            });
        }
        let jobs_cancelled = store::campaigns::status(pool, id)
            .await
            .map_err(db_status)?
            .map_or(0, |p| p.jobs.cancelled);
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
        let selector = selector_from("selector", req.selector.as_ref())?;
        let size = paging::page_size(req.page_size)?;
        let online = self.scheduler.online_in_cluster().await.map_err(db_status)?;
        // Each host's acceleration status as the report shows it: judged
        // once per change of its inputs (`host_summaries`), not here per call.
        let hosts = report::host_summaries::list(&self.pool, &online, &Default::default(), None)
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
                online: h.online,
                acceleration: h.acceleration.to_string(),
                name: h.host.name,
                arch: h.arch.unwrap_or_default(),
                cpu_model_name: h.cpu_model_name.unwrap_or_default(),
                kernel_release: h.kernel_release.unwrap_or_default(),
                last_seen_unix_ms: h.host.last_seen.timestamp_millis(),
                retired: h.host.retired_at.is_some(),
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

    async fn reset_host_credential(
        &self,
        request: Request<v1::ResetHostCredentialRequest>,
    ) -> Result<Response<v1::ResetHostCredentialResponse>, Status> {
        self.authorize(&request)?;
        let name = &request.get_ref().name;
        storable("name", name)?;
        let host_id = store::identity::reset_credential(&self.pool, name)
            .await
            .map_err(db_status)?
            .ok_or_else(|| unknown_host(name))?;
        // Aborted, not refused: the agent reconnects, and with the enrollment
        // token it may enroll again — as may any agent that has the token.
        let session_ended = self
            .scheduler
            .end_session(
                host_id,
                Status::aborted(
                    "the host's credential was reset by an operator; enroll again with the enrollment token",
                ),
            )
            .await
            .map_err(db_status)?;
        tracing::warn!(host = host_id, name = ?name, session_ended, "host credential reset by an operator");
        Ok(Response::new(v1::ResetHostCredentialResponse {
            host_id: host_id.to_string(),
            session_ended,
        }))
    }

    async fn retire_host(
        &self,
        request: Request<v1::RetireHostRequest>,
    ) -> Result<Response<v1::RetireHostResponse>, Status> {
        self.authorize(&request)?;
        let name = &request.get_ref().name;
        storable("name", name)?;
        let retired = store::identity::retire(&self.pool, name)
            .await
            .map_err(db_status)?
            .ok_or_else(|| unknown_host(name))?;
        let session_ended = self
            .scheduler
            .end_session(
                retired.host_id,
                Status::permission_denied(format!(
                    "host {name:?} was retired by an operator and is not admitted again; \
                     to enroll this machine as a new host, give its agent another --name"
                )),
            )
            .await
            .map_err(db_status)?;
        tracing::warn!(host = retired.host_id, name = ?name, jobs_failed = retired.failed_jobs.len(), session_ended, "host retired by an operator");
        Ok(Response::new(v1::RetireHostResponse {
            host_id: retired.host_id.to_string(),
            jobs_failed: retired.failed_jobs.len() as u32,
            session_ended,
        }))
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
        let open = store::findings::list_open(&self.pool)
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

    async fn add_schedule(
        &self,
        request: Request<v1::AddScheduleRequest>,
    ) -> Result<Response<v1::ScheduleInfo>, Status> {
        self.authorize(&request)?;
        let req = request.into_inner();
        let suite: Suite = req.suite.parse().map_err(|e| field_error("", e))?;
        let timing = Timing {
            every_seconds: req.every_seconds,
            at_minute: req.at_minute,
            jitter_seconds: req.jitter_seconds,
        };
        timing.validate().map_err(|e| {
            let field = match e.flag {
                "--every" => "every_seconds",
                "--at" => "at_minute",
                _ => "jitter_seconds",
            };
            Status::invalid_argument(format!("{field}: {}", e.message))
        })?;
        let if_running = match req.if_running.as_str() {
            "" => IfRunning::Skip,
            other => other
                .parse()
                .map_err(|e: String| Status::invalid_argument(format!("if_running: {e}")))?,
        };
        if req.created_by.len() > 200 {
            return Err(Status::invalid_argument("created_by: at most 200 bytes"));
        }
        storable("created_by", &req.created_by)?;
        let new = NewSchedule {
            suite,
            selector: selector_from("hosts", req.hosts.as_ref())?,
            timing,
            if_running,
            created_by: if req.created_by.is_empty() {
                "admin".into()
            } else {
                req.created_by
            },
        };
        let stored = schedule::add(&self.pool, &new, chrono::Utc::now())
            .await
            .map_err(db_status)?;
        tracing::info!(schedule = stored.id, suite = %stored.suite, every = stored.every_seconds, "schedule added");
        Ok(Response::new(schedule_info(stored)))
    }

    async fn list_schedules(
        &self,
        request: Request<v1::ListSchedulesRequest>,
    ) -> Result<Response<v1::ListSchedulesResponse>, Status> {
        self.authorize(&request)?;
        let schedules = store::schedules::list(&self.pool)
            .await
            .map_err(db_status)?
            .into_iter()
            .map(schedule_info)
            .collect();
        Ok(Response::new(v1::ListSchedulesResponse { schedules }))
    }

    async fn remove_schedule(
        &self,
        request: Request<v1::RemoveScheduleRequest>,
    ) -> Result<Response<v1::RemoveScheduleResponse>, Status> {
        self.authorize(&request)?;
        let raw = &request.get_ref().id;
        let id: i64 = raw
            .trim()
            .parse()
            .map_err(|_| Status::invalid_argument(format!("id: {raw:?} is not a schedule id")))?;
        if !store::schedules::remove(&self.pool, id).await.map_err(db_status)? {
            return Err(Status::not_found(format!("schedule {id} does not exist")));
        }
        tracing::info!(schedule = id, "schedule removed");
        Ok(Response::new(v1::RemoveScheduleResponse {}))
    }
}
