//! The host's OpenSSL across the fleet: a campaign of the `openssl` provider
//! on the native host and on the Nehalem one, whose `openssl` runs under the
//! same emulator as its workers.

use std::time::Duration;

use cipherfleet_proto::v1;

use crate::app::{App, both_paths, matrix};

/// AES-128-GCM at 16 KiB on both paths of the host's OpenSSL: on x86-aesni
/// its accelerated request ran AES-NI and its masked one software; on
/// x86-no-aesni (a CPU without AES-NI) both ran software and say so.
pub(super) async fn openssl_with_and_without_aes_ni(app: &App) {
    let points = v1::Matrix {
        paths: both_paths(),
        providers: vec![v1::Provider::Openssl as i32],
        ..matrix(&["aes-128-gcm"], &[16 * 1024], 0.2)
    };
    let started = app
        .start_campaign_on(
            "openssl with and without AES-NI",
            points,
            &["x86-aesni", "x86-no-aesni"],
        )
        .await;
    assert_eq!((started.jobs_created, started.points_skipped), (4, 0), "{started:?}");
    let status = app.wait_finished(&started.campaign_id, Duration::from_secs(300)).await;
    assert_eq!(status.overall.unwrap().failed, 0, "{:?}", status.failures);
    let ran: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT h.name, r.path, r.path_used FROM results r JOIN jobs j ON j.id = r.job_id \
         JOIN hosts h ON h.id = r.host_id WHERE j.campaign_id = $1 AND r.provider = 'openssl' \
         ORDER BY h.name, r.path",
    )
    .bind(started.campaign_id.parse::<i64>().unwrap())
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let row = |host: &str, path: &str, used: &str| (host.to_string(), path.to_string(), used.to_string());
    assert_eq!(
        ran,
        [
            row("x86-aesni", "accelerated", "accelerated"),
            row("x86-aesni", "software", "software"),
            row("x86-no-aesni", "accelerated", "software"),
            row("x86-no-aesni", "software", "software"),
        ]
    );
}
