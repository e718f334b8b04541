//! Every public query of `db`, run against a populated database, so a column
//! or type that no longer matches its row struct fails here, not on a page.
//!
//! `fixture::populate` stores a small fleet (two hosts, three campaigns, results on
//! both paths and a fallback, sessions, findings); each test then reads it
//! back through one group of modules and checks the rows against what was
//! stored. Every test gets its own copy, so the ones that change state (the
//! queue, cancelling, resolving) do not disturb the others.
//! `checklist::every_public_query_is_called_here` fails when `src/db` gains a
//! `pub async fn` this file does not call.

mod campaigns;
mod capabilities;
mod checklist;
mod connect;
mod findings;
mod fixture;
mod hosts;
mod identity;
mod jobs;
mod leases;
mod report;
mod results;
mod rollups;
mod view_summaries;
mod watch;
