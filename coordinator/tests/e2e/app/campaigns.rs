//! Campaigns through the admin API, and waiting for them.

use std::time::Duration;

use cipherfleet_proto::v1;

use super::{App, admin_presenting, wait_for};

/// `algorithms` × `sizes`, encrypt, one thread, static key, the accelerated
/// path, `seconds` a point: change the rest with `v1::Matrix { …, ..matrix(…) }`.
pub fn matrix(algorithms: &[&str], sizes: &[u64], seconds: f64) -> v1::Matrix {
    v1::Matrix {
        algorithms: algorithms.iter().map(|s| s.to_string()).collect(),
        sizes: sizes.to_vec(),
        directions: vec![v1::Direction::Encrypt as i32],
        threads: vec![1],
        concurrency: None,
        key_modes: vec![v1::KeyMode::Static as i32],
        paths: vec![v1::Path::Accelerated as i32],
        nonces: vec![],
        seconds,
        providers: vec![],
    }
}

/// Both paths, for [`v1::Matrix::paths`].
pub fn both_paths() -> Vec<i32> {
    vec![v1::Path::Accelerated as i32, v1::Path::Software as i32]
}

impl App {
    /// Starts a campaign over [`matrix`] on every host.
    pub async fn start_matrix(&self, algorithms: &[&str], sizes: &[u64], seconds: f64) -> String {
        self.start_campaign("e2e", matrix(algorithms, sizes, seconds)).await
    }

    /// Starts a campaign named `name` over `matrix` on every host; returns its id.
    pub async fn start_campaign(&self, name: &str, matrix: v1::Matrix) -> String {
        self.start_campaign_on(name, matrix, &[]).await.campaign_id
    }

    /// [`App::start_campaign`] on the hosts named (every host when none), with
    /// the whole answer: the jobs made and the points skipped.
    pub async fn start_campaign_on(&self, name: &str, matrix: v1::Matrix, hosts: &[&str]) -> v1::StartCampaignResponse {
        let request = v1::StartCampaignRequest {
            points: Some(v1::start_campaign_request::Points::Matrix(matrix)),
            hosts: (!hosts.is_empty()).then(|| v1::HostSelector {
                host_names: hosts.iter().map(|h| h.to_string()).collect(),
                ..Default::default()
            }),
            started_by: "e2e".into(),
            name: name.into(),
            ..Default::default()
        };
        self.admin()
            .await
            .start_campaign(request)
            .await
            .expect("campaign starts")
            .into_inner()
    }

    /// [`App::start_campaign`], then waits up to 240 s for it to complete; returns its id.
    pub async fn run_campaign(&self, name: &str, matrix: v1::Matrix) -> String {
        let id = self.start_campaign(name, matrix).await;
        self.wait_completed(&id, Duration::from_secs(240)).await;
        id
    }

    pub async fn status(&self, id: &str) -> v1::CampaignStatusResponse {
        self.admin()
            .await
            .campaign_status(v1::CampaignStatusRequest {
                campaign_id: id.to_string(),
            })
            .await
            .expect("status")
            .into_inner()
    }

    /// Cancels campaign `id` with `reason` through the admin API.
    pub async fn cancel(&self, id: &str, reason: &str) -> v1::CancelCampaignResponse {
        self.admin()
            .await
            .cancel_campaign(v1::CancelCampaignRequest {
                campaign_id: id.to_string(),
                reason: reason.into(),
            })
            .await
            .expect("cancelled")
            .into_inner()
    }

    /// Waits until some job of campaign `id` has been accepted by its agent; returns it.
    pub async fn wait_job_started(&self, id: &str) -> uuid::Uuid {
        let id: i64 = id.parse().unwrap();
        wait_for("a job to start", Duration::from_secs(60), || async {
            sqlx::query_scalar(
                "SELECT id FROM jobs WHERE campaign_id = $1 AND status = 'running' AND started_at IS NOT NULL",
            )
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .ok()
            .flatten()
        })
        .await
    }

    /// [`App::wait_finished`], asserting that the campaign completed (its
    /// failures in the message otherwise).
    pub async fn wait_completed(&self, id: &str, limit: Duration) -> v1::CampaignStatusResponse {
        let status = self.wait_finished(id, limit).await;
        assert_eq!(
            status.state,
            v1::CampaignState::Completed as i32,
            "{:?}",
            status.failures
        );
        status
    }

    /// Waits for a campaign to leave the running state.
    pub async fn wait_finished(&self, id: &str, limit: Duration) -> v1::CampaignStatusResponse {
        let url = self.url();
        let ca = self.ca();
        let identity = self.client_identity.clone();
        let id = id.to_string();
        let finished = wait_for("campaign to finish", limit * 2, || {
            let (url, ca, identity, id) = (url.clone(), ca.clone(), identity.clone(), id.clone());
            async move {
                let mut admin = admin_presenting(&url, ca.as_deref(), identity.as_ref()).await;
                let s = admin
                    .campaign_status(v1::CampaignStatusRequest { campaign_id: id })
                    .await
                    .ok()?
                    .into_inner();
                (s.state != v1::CampaignState::Running as i32).then_some(s)
            }
        });
        match tokio::time::timeout(limit, finished).await {
            Ok(status) => status,
            Err(_) => panic!(
                "timed out after {limit:?} waiting for campaign {id} to finish\n{}",
                self.diagnosis(&id).await
            ),
        }
    }

    /// Where a campaign's jobs stand and which hosts are online, for a failure
    /// message: a stuck campaign should show which host sat idle with work queued.
    pub async fn diagnosis(&self, campaign: &str) -> String {
        let lines: Result<Vec<String>, _> = sqlx::query_scalar(
            "SELECT format('campaign %s: %s (database time %s)', id, status, now()) FROM campaigns WHERE id = $1 \
             UNION ALL (SELECT format('  job %s on %s: %s, attempts %s, assigned %s, started %s, finished %s, error %s', \
                     j.position, h.name, j.status, j.attempts, j.assigned_at, j.started_at, j.finished_at, j.error) \
                 FROM jobs j JOIN hosts h ON h.id = j.host_id WHERE j.campaign_id = $1 ORDER BY h.name, j.position) \
             UNION ALL (SELECT format('  host %s: %s sessions, %s open, last connected %s', h.name, count(s.id), \
                     count(s.id) FILTER (WHERE s.disconnected_at IS NULL), max(s.connected_at)) \
                 FROM hosts h LEFT JOIN agent_sessions s ON s.host_id = h.id GROUP BY h.name ORDER BY h.name)",
        )
        .bind(campaign.parse::<i64>().unwrap_or(-1))
        .fetch_all(&self.pool)
        .await;
        let online = tokio::time::timeout(Duration::from_secs(5), async {
            let mut admin = self.admin().await;
            let hosts = admin.list_hosts(v1::ListHostsRequest::default()).await?.into_inner();
            let online: Vec<(String, bool)> = hosts.hosts.into_iter().map(|h| (h.name, h.online)).collect();
            Ok::<_, tonic::Status>(online)
        })
        .await;
        let lines = lines.unwrap_or_else(|e| vec![format!("cannot read the jobs: {e}")]);
        format!("{}\n  online (coordinator's view): {online:?}", lines.join("\n"))
    }

    /// Results stored per job of a campaign (job id, count).
    pub async fn result_counts(&self, campaign: &str) -> Vec<(uuid::Uuid, i64)> {
        sqlx::query_as(
            "SELECT j.id, (SELECT count(*) FROM results r WHERE r.job_id = j.id) FROM jobs j WHERE j.campaign_id = $1 ORDER BY j.position",
        )
        .bind(campaign.parse::<i64>().unwrap())
        .fetch_all(&self.pool)
        .await
        .unwrap()
    }
}
