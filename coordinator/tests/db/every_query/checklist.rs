//! The checklist: every `pub async fn` of `src/store` and `src/report` is called in this folder.

use std::collections::BTreeSet;

/// Every `pub async fn` under `src/store` and `src/report`, as `module::function`
/// (`store` for `store/mod.rs`).
/// Each is called above, and its answer checked.
const COVERED: &[&str] = &[
    "store::connect",
    "advisory::lock_hosts_transaction",
    "advisory::lock_transaction",
    "advisory::try_lock_session",
    "campaign_compare::folded",
    "campaign_compare::pairs",
    "campaign_summaries::all_jobs",
    "campaign_summaries::count",
    "campaign_summaries::finished_or_not",
    "campaign_summaries::host_progress",
    "campaign_summaries::job_totals",
    "campaign_summaries::list",
    "campaign_summaries::totals",
    "campaigns::cancel",
    "campaigns::cancel_because",
    "campaigns::close_any_complete",
    "campaigns::close_if_complete",
    "campaigns::create_with_jobs",
    "campaigns::ended_within",
    "campaigns::get",
    "campaigns::insert_jobs",
    "campaigns::insert_with_jobs",
    "campaigns::keep_queue_statistics",
    "campaigns::list",
    "campaigns::previous",
    "campaigns::running_jobs",
    "campaigns::running_of_cancelled",
    "campaigns::status",
    "capabilities::advertise",
    "capabilities::for_campaign",
    "capabilities::paths_of",
    "capabilities::paths_of_hosts",
    "capabilities::provider_totals",
    "capabilities::providers_for_campaign",
    "capabilities::skip_unrunnable_providers",
    "capabilities::providers_of_hosts",
    "capabilities::record",
    "capabilities::record_providers",
    "capabilities::totals",
    "capacity::hosts",
    "classes::current",
    "capacity::points",
    "coordinators::forget",
    "coordinators::forget_unseen",
    "coordinators::lease_holder",
    "coordinators::on_machine",
    "coordinators::register",
    "coordinators::same_listener",
    "coordinators::set_listener",
    "fallback::algorithm_pairs",
    "fallback::archs",
    "fallback::count_findings",
    "fallback::count_pairs",
    "fallback::findings",
    "fallback::hosts",
    "fallback::open_findings",
    "fallback::pairs",
    "fallback::sizes",
    "fallback::slow_candidates",
    "fallback_hosts::cases_now",
    "fallback_views::compute",
    "fallback_views::due",
    "fallback_views::forget_changes",
    "fallback_views::read",
    "fallback_views::slow_view",
    "providers::table",
    "findings::count_open",
    "findings::count_open_by",
    "findings::hosts_by_reason",
    "findings::list_for_host",
    "findings::list_open",
    "findings::list_open_first",
    "findings::list_open_for_hosts",
    "findings::resolve",
    "findings::upsert_open",
    "findings::upsert_open_all",
    "host_results::count",
    "host_results::key_series",
    "host_results::list",
    "host_summaries::by_acceleration",
    "host_summaries::configurations",
    "host_summaries::count",
    "host_summaries::fleet",
    "host_summaries::generation",
    "host_summaries::list",
    "host_summaries::refresh",
    "hosts::find_by_name",
    "hosts::get",
    "hosts::list",
    "hosts::list_with_facts",
    "hosts::touch_all",
    "hosts::upsert_host_with_facts",
    "hosts::with_facts_of",
    "identity::admit",
    "identity::lookup",
    "identity::reset_credential",
    "identity::retire",
    "jobs::adopt",
    "jobs::claim_next_for_host",
    "jobs::claim_next_for_hosts",
    "jobs::expire_overdue",
    "jobs::expire_queued",
    "jobs::fail",
    "jobs::fail_attempt",
    "jobs::failures",
    "jobs::for_campaign",
    "jobs::get",
    "jobs::idle_with_work",
    "jobs::mark_started_many",
    "jobs::release",
    "jobs::requeue_lost",
    "jobs::running_for_host",
    "jobs::unclaim",
    "leases::acquire",
    "leases::clear",
    "leases::count_by_holder",
    "leases::end_all_of",
    "leases::is_live",
    "leases::live_hosts",
    "leases::release",
    "leases::release_all",
    "leases::renew",
    "leases::revoke",
    "leases::welcome",
    "matrix::class_groups",
    "matrix::host_names",
    "matrix::host_points",
    "matrix::slices",
    "matrix::view_points",
    "outbox::claim",
    "outbox::delivered",
    "outbox::failed",
    "outbox::list",
    "outbox::prune",
    "partitions::ensure_weeks",
    "partitions::raw",
    "points::record_many",
    "points::refresh",
    "results::count",
    "results::count_for_job",
    "results::record",
    "results::record_and_claim",
    "results::record_batch",
    "results::stored",
    "campaign_folds::fold_campaign_counts",
    "campaign_folds::fold_campaign_counts_alone",
    "campaign_folds::fold_campaign_jobs",
    "campaign_folds::fold_campaign_jobs_alone",
    "rollups::fold_day",
    "rollups::fold_day_alone",
    "rollups::fold_week",
    "rollups::fold_week_alone",
    "rollups::fold_month",
    "rollups::fold_month_alone",
    "rollups::history",
    "campaign_folds::oldest_campaign_to_fold",
    "rollups::oldest_day",
    "rollups::oldest_month",
    "schema::apply",
    "schema::database_migration",
    "scenarios::logical_cores",
    "scenarios::points",
    "schedules::campaign_running",
    "schedules::campaigns_of",
    "schedules::insert",
    "schedules::list",
    "schedules::lock_due",
    "schedules::record_firing",
    "schedules::remove",
    "series::current_facts",
    "series::latest_accelerated",
    "series::latest_points",
    "series::snapshot_histories",
    "sessions::close",
    "sessions::close_orphaned",
    "sessions::for_host",
    "sessions::open",
    "sessions::set_snapshot",
    "sessions::start",
    "snapshots::current",
    "snapshots::hash_of",
    "snapshots::history",
    "snapshots::insert",
    "snapshots::stored",
    "verifications::claim",
    "verifications::get",
    "verifications::previous_points",
    "verifications::set_campaign",
    "view_summaries::class_cells",
    "view_summaries::due",
    "view_summaries::host_page",
    "view_summaries::refresh",
    "view_summaries::row_hosts",
];

/// The layers whose functions are queries: the tables and the report's read-models.
const QUERY_LAYERS: &[&str] = &["src/store", "src/report"];

/// Files of those layers that are no queries: the report's background refresh
/// (a loop over the read-models' own functions, run by the e2e tests).
const NOT_QUERIES: &[&str] = &["src/report/refresh.rs"];

/// The module-level `pub async fn`s of [`QUERY_LAYERS`], as `module::function`.
/// A module split into a folder (`jobs.rs` with `jobs/claims.rs`, …)
/// re-exports its parts' functions under its own name, and they are listed so.
fn public_queries() -> BTreeSet<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = BTreeSet::new();
    let mut files = Vec::new();
    for layer in QUERY_LAYERS {
        let dir = root.join(layer);
        let layer_name = layer.rsplit('/').next().expect("a layer folder");
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                let module = path
                    .file_name()
                    .and_then(|s| s.to_str())
                    .expect("a UTF-8 folder name")
                    .to_string();
                for part in std::fs::read_dir(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display())) {
                    files.push((
                        layer_name,
                        Some(module.clone()),
                        part.expect("a directory entry").path(),
                    ));
                }
            } else {
                files.push((layer_name, None, path));
            }
        }
    }
    for (layer_name, folder, path) in files {
        if path.extension().is_none_or(|e| e != "rs") || NOT_QUERIES.iter().any(|f| path.ends_with(f)) {
            continue;
        }
        let stem = path.file_stem().and_then(|s| s.to_str()).expect("a UTF-8 file name");
        let module = folder.unwrap_or_else(|| if stem == "mod" { layer_name.into() } else { stem.into() });
        let source = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        for line in source.lines() {
            if let Some(rest) = line.strip_prefix("pub async fn ") {
                let name = rest.split(['(', '<']).next().unwrap_or(rest).trim();
                found.insert(format!("{module}::{name}"));
            }
        }
    }
    found
}

/// Whether `source` calls `path` (`module::function(`), not just a function
/// whose name ends the same (`host_results::count(` is no `results::count(`).
fn calls(source: &str, path: &str) -> bool {
    let call = format!("{path}(");
    source.match_indices(&call).any(|(at, _)| {
        source[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    })
}

#[test]
fn every_public_query_is_called_here() {
    let found = public_queries();
    let listed: BTreeSet<String> = COVERED.iter().map(|s| s.to_string()).collect();
    let new: Vec<&String> = found.difference(&listed).collect();
    assert!(
        new.is_empty(),
        "src/store and src/report have public queries this test never runs: {new:?}. Add a call to each in \
         tests/db/every_query/ against the populated database, assert on what it returns, \
         and list it in COVERED"
    );
    let gone: Vec<&String> = listed.difference(&found).collect();
    assert!(
        gone.is_empty(),
        "COVERED lists functions src/store and src/report no longer have: {gone:?}"
    );
    let this_folder = [
        include_str!("fixture.rs"),
        include_str!("connect.rs"),
        include_str!("hosts.rs"),
        include_str!("identity.rs"),
        include_str!("campaigns.rs"),
        include_str!("capabilities.rs"),
        include_str!("jobs.rs"),
        include_str!("leases.rs"),
        include_str!("results.rs"),
        include_str!("rollups.rs"),
        include_str!("report.rs"),
        include_str!("findings.rs"),
        include_str!("watch.rs"),
        include_str!("view_summaries.rs"),
    ]
    .concat();
    let this_file = this_folder.as_str();
    let uncalled: Vec<&&str> = COVERED.iter().filter(|f| !calls(this_file, f)).collect();
    assert!(
        uncalled.is_empty(),
        "listed in COVERED but never called in tests/db/every_query/: {uncalled:?}; add a call"
    );
}
