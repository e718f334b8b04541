//! The report's read-models: what the pages show, read from the tables (and
//! the figures kept per point, with their background refresh). Pages in
//! [`crate::web`] only read these; nothing here knows about HTTP.
//!
//! - [`host_summaries`]: each host's acceleration status and marks, judged once per change (the hosts list and overview).
//! - [`matrix`]: the compare and modes pages' reads of the latest results.
//! - [`classes`]: the fleet's machine classes (which host is in which class row).
//! - [`view_summaries`]: per view of the compare matrix, which hosts have points and the machine-class cells.
//! - [`capacity`]: per-class measurements at one size, for the capacity planner.
//! - [`campaign_compare`]: two campaigns' results per host and point, side by side.
//! - [`campaign_summaries`]: campaigns with their job counts, as the report lists them.
//! - [`host_results`]: a host's results page by page, and its key algorithms over time.
//! - [`fallback`]: both paths of each host side by side, and findings of any status (the fallback page).
//! - [`fallback_hosts`]: the fallback page's hosts with their marks, kept while the hosts do not change.
//! - [`fallback_views`]: per point, the fallback page's hosts at software speed and its row count, kept between changes.
//! - [`providers`]: per class, each provider × algorithm × size on both paths, ranked, with its fallback cost (the providers page).
//! - [`scenarios`]: the latest results of a scenario's algorithms, for the scenario views.
//! - [`refresh`]: the background recomputation of the figures stored per
//!   point (compare's class cells, fallback's list at software speed).

pub mod campaign_compare;
pub mod campaign_summaries;
pub mod capacity;
pub mod classes;
pub mod fallback;
pub mod fallback_hosts;
pub mod fallback_views;
pub mod host_results;
pub mod host_summaries;
pub mod matrix;
pub mod providers;
pub mod refresh;
pub mod scenarios;
pub mod view_summaries;
