//! Refusal of oversized matrices: a `StartCampaign` whose matrix would expand
//! to 10^7 points (or to ~10^6 with every list within its cap) must be refused
//! in milliseconds, before anything is expanded, and leave the coordinator's
//! memory where it was. The coordinator runs in this process, so this
//! process's resident set is the coordinator's.

use std::time::{Duration, Instant};

use cipherfleet_core::algorithm;
use cipherfleet_proto::v1::{self, start_campaign_request::Points};

use crate::{admin, ms};

/// Requests of each kind; the figures are the slowest and the RSS change over all.
const ROUNDS: usize = 20;

/// This process's resident set, from /proc/self/status.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn request(matrix: v1::Matrix) -> v1::StartCampaignRequest {
    v1::StartCampaignRequest {
        points: Some(Points::Matrix(matrix)),
        started_by: "bench".into(),
        name: "refusal benchmark".into(),
        ..Default::default()
    }
}

pub async fn refusal(url: &str) {
    println!("oversized matrices, {ROUNDS} requests each:");
    let algorithms: Vec<String> = algorithm::ALL.iter().map(|a| a.name().to_string()).collect();
    let ten_million = v1::Matrix {
        // 10 × 1000 × 1000 = 10^7 points; the lists themselves are over their cap.
        algorithms: algorithms.iter().take(10).cloned().collect(),
        sizes: (1..=1000).collect(),
        directions: vec![v1::Direction::Encrypt as i32],
        threads: (1..=1000).collect(),
        concurrency: None,
        key_modes: vec![v1::KeyMode::Static as i32],
        paths: vec![v1::Path::Accelerated as i32],
        nonces: vec![],
        seconds: 1.0,
        providers: vec![],
    };
    let capped_lists = v1::Matrix {
        // Every list within its cap of 64; the product is still far over the points cap.
        algorithms,
        sizes: (1..=64).collect(),
        directions: vec![v1::Direction::Encrypt as i32, v1::Direction::Decrypt as i32],
        threads: (1..=64).collect(),
        concurrency: None,
        key_modes: vec![
            v1::KeyMode::Static as i32,
            v1::KeyMode::PerOp as i32,
            v1::KeyMode::HkdfPerUser as i32,
        ],
        paths: vec![v1::Path::Accelerated as i32, v1::Path::Software as i32],
        nonces: vec![],
        seconds: 1.0,
        providers: vec![],
    };
    let mut admin = admin(url).await;
    for (what, matrix) in [("10^7 points", ten_million), ("lists within caps", capped_lists)] {
        // One request first, so the connection and first-use allocations are not counted.
        let _ = admin.start_campaign(request(matrix.clone())).await;
        let before = rss_kib();
        let mut slowest = Duration::ZERO;
        let mut answer = String::new();
        for _ in 0..ROUNDS {
            let start = Instant::now();
            let refused = admin
                .start_campaign(request(matrix.clone()))
                .await
                .expect_err("an oversized matrix is refused");
            slowest = slowest.max(start.elapsed());
            answer = format!("{:?}: {}", refused.code(), refused.message());
        }
        let after = rss_kib();
        println!(
            "  {what}: refused in at most {} (round trip); RSS {before} KiB before, {after} KiB after ({:+} KiB)\n    {answer}",
            ms(slowest),
            after as i64 - before as i64
        );
    }
}
