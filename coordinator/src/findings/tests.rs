//! The deriver's timing: when passes run while results come and go, with a
//! stand-in pass (paused time).

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::*;

/// How long the stand-in pass takes: results keep arriving during a real one.
const PASS: Duration = Duration::from_millis(500);

/// The task's loop around a stand-in pass that reports when it started and
/// the hosts it was given (passes with results only; ticks find none).
fn spawn_passes(deriver: Arc<Deriver>, shutdown: CancellationToken) -> mpsc::UnboundedReceiver<(Instant, Vec<i64>)> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut tick = poll_interval();
        while deriver.next_pass(&mut tick, &shutdown).await {
            let hosts: Vec<i64> = deriver.take().hosts.into_keys().collect();
            if !hosts.is_empty() {
                tx.send((Instant::now(), hosts)).unwrap();
            }
            tokio::time::sleep(PASS).await;
        }
    });
    rx
}

/// Marks a result of each host, `gap` apart.
async fn results(deriver: &Deriver, hosts: std::ops::Range<i64>, gap: Duration) {
    for host in hosts {
        deriver.result_stored(host, "aes-256-gcm");
        tokio::time::sleep(gap).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_results_is_derived_in_one_pass_and_a_later_result_in_another() {
    let deriver = Deriver::new();
    let shutdown = CancellationToken::new();
    let mut passes = spawn_passes(deriver.clone(), shutdown.clone());
    // Past the first tick, which is at once.
    tokio::time::sleep(PASS * 2).await;

    // A hundred results within a second: one pass, once they stopped for the window.
    let burst = Instant::now();
    results(&deriver, 0..100, Duration::from_millis(10)).await;
    let (first, hosts) = passes.recv().await.unwrap();
    assert_eq!(first - burst, Duration::from_millis(990) + COALESCE);
    assert_eq!(hosts, (0..100).collect::<Vec<_>>());

    // Quiet for a while: no pass has anything to derive.
    tokio::time::sleep(COALESCE * 5).await;
    assert!(passes.try_recv().is_err(), "a pass without new results");

    // A result after the window: a pass of its own, within the window.
    let later = Instant::now();
    results(&deriver, 100..101, Duration::ZERO).await;
    let (second, hosts) = passes.recv().await.unwrap();
    assert_eq!(hosts, [100]);
    assert!(second - later <= COALESCE + PASS, "{:?}", second - later);

    shutdown.cancel();
    assert!(passes.recv().await.is_none(), "the task ends on shutdown");
}

#[tokio::test(start_paused = true)]
async fn while_results_stream_in_passes_wait_for_a_pause_or_their_patience_and_miss_no_host() {
    let deriver = Deriver::new();
    let mut passes = spawn_passes(deriver.clone(), CancellationToken::new());
    tokio::time::sleep(PASS * 2).await;

    // A campaign's results for two and a half minutes, ten a second: no
    // pass for a pause that never comes, but one at most every PATIENCE.
    let start = Instant::now();
    results(&deriver, 0..1500, Duration::from_millis(100)).await;
    let mut seen = Vec::new();
    let mut previous = start;
    let mut count = 0;
    while let Ok((at, hosts)) = passes.try_recv() {
        count += 1;
        assert!(at - previous >= PATIENCE - COALESCE, "passes {:?} apart", at - previous);
        assert!(
            at - start <= count * (PATIENCE + PASS),
            "pass {count} {:?} late",
            at - start
        );
        previous = at;
        seen.extend(hosts);
    }
    assert!(
        (1100..=1300).contains(&seen.len()),
        "two passes in 150 s, each of a minute's results: {}",
        seen.len()
    );

    // Once they stop, the rest within the window, and every host was derived once.
    let stopped = Instant::now();
    let (at, hosts) = passes.recv().await.unwrap();
    assert!(
        at - stopped <= COALESCE + PASS,
        "{:?} after the last result",
        at - stopped
    );
    seen.extend(hosts);
    assert_eq!(seen, (0..1500).collect::<Vec<_>>());
}

#[tokio::test(start_paused = true)]
async fn passes_start_at_least_the_window_apart_while_results_keep_coming() {
    let deriver = Deriver::new();
    let mut passes = spawn_passes(deriver.clone(), CancellationToken::new());
    results(&deriver, 0..1, Duration::ZERO).await;
    let (mut previous, _) = passes.recv().await.unwrap();
    // Each round's results arrive while the previous pass runs. A poll tick
    // missed during the window must not start a pass right behind it (the
    // loop picks between ready branches at random, hence the rounds).
    for round in 1..20 {
        let burst = Instant::now();
        results(&deriver, round * 10..round * 10 + 10, Duration::from_millis(20)).await;
        let (at, hosts) = passes.recv().await.unwrap();
        assert_eq!(
            hosts,
            (round * 10..round * 10 + 10).collect::<Vec<_>>(),
            "round {round}"
        );
        assert!(
            at - previous >= COALESCE,
            "round {round}: passes {:?} apart",
            at - previous
        );
        assert!(at - burst <= COALESCE + PASS, "round {round}: {:?} late", at - burst);
        previous = at;
    }
}

#[tokio::test(start_paused = true)]
async fn new_facts_are_derived_at_once_while_results_keep_coming_which_still_wait() {
    let deriver = Deriver::new();
    let shutdown = CancellationToken::new();
    let (tx, mut passes) = mpsc::unbounded_channel();
    let task = deriver.clone();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let mut tick = poll_interval();
        while task.next_pass(&mut tick, &stop).await {
            let work = task.take();
            if work.facts || !work.hosts.is_empty() {
                tx.send((Instant::now(), work.facts, work.hosts.len())).unwrap();
            }
            tokio::time::sleep(PASS).await;
        }
    });
    tokio::time::sleep(PASS * 2).await;

    // A host says hello with a lost flag while a campaign streams results in
    // (the browser test's software build, whose finding the overview shows
    // the moment the campaign is done).
    let streaming = deriver.clone();
    let results = tokio::spawn(async move { results(&streaming, 0..300, Duration::from_millis(100)).await });
    tokio::time::sleep(Duration::from_secs(3)).await;
    let hello = Instant::now();
    deriver.facts_changed();
    let (at, facts, hosts) = passes.recv().await.unwrap();
    assert!(facts, "the first pass is the facts pass");
    assert_eq!(hosts, 0, "results still coming keep waiting for their pause");
    assert!(at - hello <= COALESCE, "{:?} after the hello", at - hello);

    // The results are derived once they pause, all of them, none lost to
    // the facts pass that ran in between.
    results.await.unwrap();
    let (_, facts, hosts) = passes.recv().await.unwrap();
    assert!(!facts);
    assert_eq!(hosts, 300);
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn in_a_connect_storm_facts_passes_take_a_fifth_of_the_time_and_the_last_hello_is_derived() {
    let deriver = Deriver::new();
    let shutdown = CancellationToken::new();
    let (tx, mut passes) = mpsc::unbounded_channel();
    let (task, stop) = (deriver.clone(), shutdown.clone());
    // A facts pass of a large fleet: seconds.
    let pass = Duration::from_secs(2);
    tokio::spawn(async move {
        let mut tick = poll_interval();
        let mut pace = FactsPace::new();
        while task.next_pass(&mut tick, &stop).await {
            if task.take().facts && pace.admit(&task) {
                let started = Instant::now();
                tx.send(started).unwrap();
                tokio::time::sleep(pass).await;
                pace.ran(started);
            }
        }
    });
    // New hosts say hello every 50 ms for a minute.
    for _ in 0..1200 {
        deriver.facts_changed();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stopped = Instant::now();
    let mut starts = Vec::new();
    while let Ok(at) = passes.try_recv() {
        starts.push(at);
    }
    for w in starts.windows(2) {
        assert!(
            w[1] - w[0] >= pass * (1 + FACTS_SPACING),
            "passes {:?} apart",
            w[1] - w[0]
        );
    }
    assert!((5..=7).contains(&starts.len()), "{} passes in a minute", starts.len());
    // The hellos since the last pass are derived too, one spacing later.
    let last = passes.recv().await.unwrap();
    assert!(
        last - stopped <= pass * (1 + FACTS_SPACING) + CAMPAIGN_POLL + COALESCE,
        "{:?} after the last hello",
        last - stopped
    );
    shutdown.cancel();
}
