//! matrix, capacity, fallback: what the report reads.

use cipherfleet_coordinator::report::capacity::{ClassHost, PointFilter};
use cipherfleet_coordinator::report::fallback::{FallbackHost, PathPair, PathPoint};
use cipherfleet_coordinator::report::fallback_hosts::{self, ViewHosts};
use cipherfleet_coordinator::report::fallback_views::{self, SlowCases};
use cipherfleet_coordinator::report::matrix::{ClassGroup, Slice, View};
use cipherfleet_coordinator::report::{capacity, classes, fallback, matrix, providers, scenarios};
use cipherfleet_coordinator::store::findings;
use cipherfleet_core::path::{Path, PathUsed};
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::{Direction, KeyMode};
use sqlx::types::Json;

use super::fixture::*;

#[tokio::test]
async fn the_report_reads_the_latest_point_of_every_host() {
    let f = populate().await;
    let pool = &f.pool;
    let bench_labels = labels(&[("class", "storage-gen3")]);
    let vm_labels = labels(&[("emulated", "yes")]);
    let bench_usable = strings(&["aes", "avx", "pclmulqdq"]);
    let xeon = Some("Intel(R) Xeon(R) Gold 6230".to_string());

    // matrix
    let groups = matrix::class_groups(pool).await.unwrap();
    let bench = ClassGroup {
        host_ids: vec![f.bench],
        emulated_label: None,
        simulated_label: None,
        arch: Some("x86_64".into()),
        cpu_vendor: Some("GenuineIntel".into()),
        cpu_model_name: xeon.clone(),
        features_usable: Some(bench_usable.clone()),
        build_flavour: Some("accelerated".into()),
        hypervisor: Some("kvm".into()),
        cpuinfo_foreign: None,
    };
    let vm = ClassGroup {
        host_ids: vec![f.vm],
        emulated_label: Some("yes".into()),
        simulated_label: None,
        arch: Some("aarch64".into()),
        cpu_vendor: Some("ARM".into()),
        cpu_model_name: Some("Neoverse-N1".into()),
        features_usable: Some(vec![]),
        build_flavour: Some("accelerated".into()),
        hypervisor: Some("kvm".into()),
        cpuinfo_foreign: None,
    };
    assert_eq!(groups, [bench.clone(), vm.clone()]);
    // classes: a row per class (the emulated host in one of its own), and the
    // assignment the stored class cells are computed under.
    let (rows, assignment) = classes::current(pool).await.unwrap();
    let mut in_rows: Vec<(Vec<i64>, bool)> = rows.iter().map(|r| (r.host_ids.clone(), r.emulated)).collect();
    in_rows.sort();
    let mut expected = vec![(vec![f.bench], false), (vec![f.vm], true)];
    expected.sort();
    assert_eq!(in_rows, expected);
    assert_eq!(assignment, classes::assignment(&rows));
    assert_ne!(bench.class(), vm.class());
    assert_eq!((bench.emulated(), vm.emulated(), vm.simulated()), (false, true, false));
    assert_eq!(
        matrix::host_names(pool).await.unwrap(),
        [(f.bench, "bench-01".to_string()), (f.vm, "vm-01".to_string())]
    );

    let view = View {
        size_bytes: 16384,
        threads: 1,
        direction: Direction::Encrypt,
        path: Path::Accelerated,
        provider: Provider::RustCrypto,
    };
    let accelerated = [f.bench_accelerated.latest(), f.vm_fell_back.latest()];
    let both = [f.bench, f.vm];
    assert_eq!(matrix::view_points(pool, &view, &[], &both).await.unwrap(), accelerated);
    assert_eq!(
        matrix::view_points(pool, &view, &[gcm()], &both).await.unwrap(),
        accelerated
    );
    assert_eq!(
        matrix::view_points(pool, &view, &[gcm()], &[f.vm]).await.unwrap(),
        [f.vm_fell_back.latest()],
        "only the hosts asked for"
    );
    let no_chacha = matrix::view_points(pool, &view, &[chacha()], &both).await.unwrap();
    assert!(no_chacha.is_empty(), "{no_chacha:?}");
    let software = View {
        path: Path::Software,
        ..view
    };
    assert_eq!(
        matrix::view_points(pool, &software, &[], &both).await.unwrap(),
        [f.bench_software.latest()]
    );
    let bench_software = matrix::host_points(
        pool,
        &[f.bench],
        Direction::Encrypt,
        Path::Software,
        Provider::RustCrypto,
    )
    .await
    .unwrap();
    assert_eq!(bench_software, [f.bench_software.latest()]);
    // The object-storage scenario is not the plain benchmark these pages compare.
    let decrypt = matrix::host_points(
        pool,
        &[f.bench, f.vm],
        Direction::Decrypt,
        Path::Software,
        Provider::RustCrypto,
    )
    .await
    .unwrap();
    assert!(decrypt.is_empty(), "{decrypt:?}");
    let slices = matrix::slices(pool, Provider::RustCrypto).await.unwrap();
    let expected = [
        Slice {
            size_bytes: 1024,
            threads: 4,
        },
        Slice {
            size_bytes: 16384,
            threads: 1,
        },
    ];
    assert_eq!(slices, expected);

    // capacity
    let class_hosts = capacity::hosts(pool).await.unwrap();
    let expected = [
        ClassHost {
            host_id: f.bench,
            name: "bench-01".into(),
            emulated: false,
            simulated: false,
            arch: Some("x86_64".into()),
            cpu_vendor: Some("GenuineIntel".into()),
            cpu_model_name: xeon.clone(),
            features_usable: bench_usable.clone(),
            build_flavour: Some("accelerated".into()),
            logical_cores: Some(8),
        },
        ClassHost {
            host_id: f.vm,
            name: "vm-01".into(),
            emulated: true,
            simulated: false,
            arch: Some("aarch64".into()),
            cpu_vendor: Some("ARM".into()),
            cpu_model_name: Some("Neoverse-N1".into()),
            features_usable: vec![],
            build_flavour: Some("accelerated".into()),
            logical_cores: Some(8),
        },
    ];
    assert_eq!(class_hosts, expected);
    let filter = PointFilter {
        size_bytes: 16384,
        direction: Direction::Encrypt,
        path: Path::Accelerated,
        algorithms: &[gcm(), chacha()],
        hosts: &both,
        provider: Provider::RustCrypto,
    };
    assert_eq!(capacity::points(pool, filter).await.unwrap(), accelerated);
    let other_size = PointFilter {
        size_bytes: 1024,
        ..filter
    };
    let unmeasured = capacity::points(pool, other_size).await.unwrap();
    let vm_only = PointFilter {
        hosts: &[f.vm],
        ..filter
    };
    assert_eq!(
        capacity::points(pool, vm_only).await.unwrap(),
        [f.vm_fell_back.latest()]
    );
    assert!(unmeasured.is_empty(), "{unmeasured:?}");

    // scenarios: every point of the algorithms, the object-storage scenario included
    let all_hosts = [f.bench, f.vm];
    assert_eq!(
        scenarios::points(pool, &[chacha()], &all_hosts).await.unwrap(),
        [f.bench_chacha.latest()]
    );
    let both = scenarios::points(pool, &[gcm(), chacha()], &all_hosts).await.unwrap();
    assert!(both.contains(&f.bench_chacha.latest()) && both.contains(&f.bench_software.latest()));
    assert!(scenarios::points(pool, &[], &all_hosts).await.unwrap().is_empty());
    // Only the hosts asked for.
    let vm_only = scenarios::points(pool, &[gcm(), chacha()], &[f.vm]).await.unwrap();
    assert!(
        !vm_only.is_empty() && vm_only.iter().all(|p| p.host_id == f.vm),
        "{vm_only:?}"
    );
    assert!(scenarios::points(pool, &[chacha()], &[]).await.unwrap().is_empty());
    let mut cores = scenarios::logical_cores(pool, &all_hosts).await.unwrap();
    cores.sort();
    let mut ids = all_hosts.to_vec();
    ids.sort();
    assert_eq!(cores.iter().map(|c| c.0).collect::<Vec<_>>(), ids);
    assert!(cores.iter().all(|c| c.1.is_some_and(|n| n > 0)), "{cores:?}");
    assert!(scenarios::logical_cores(pool, &[]).await.unwrap().is_empty());

    // providers: the fixture measured the built-in provider only, which the
    // page compares with no other (tests/db/providers.rs stores the others).
    assert!(providers::table(pool).await.unwrap().is_empty());

    // fallback
    let at = PathPoint {
        size_bytes: 16384,
        threads: 1,
        direction: Direction::Encrypt,
        key_mode: KeyMode::Static,
        provider: Provider::RustCrypto,
    };
    // Worst ratio first, unmeasured ratios (vm has no software side) last.
    let pairs = fallback::pairs(pool, &at, None, None, 0).await.unwrap();
    let (acc, soft, vm_acc) = (&f.bench_accelerated, &f.bench_software, &f.vm_fell_back);
    let expected = [
        PathPair {
            host_id: f.bench,
            algorithm: gcm(),
            accelerated_result_id: Some(acc.result),
            accelerated_path_used: Some(PathUsed::Accelerated),
            accelerated_mb_s: Some(2000.0),
            accelerated_cv: acc.figures().cv,
            software_result_id: Some(soft.result),
            software_mb_s: Some(500.0),
            software_cv: soft.figures().cv,
        },
        PathPair {
            host_id: f.vm,
            algorithm: gcm(),
            accelerated_result_id: Some(vm_acc.result),
            accelerated_path_used: Some(PathUsed::Software),
            accelerated_mb_s: Some(450.0),
            accelerated_cv: vm_acc.figures().cv,
            software_result_id: None,
            software_mb_s: None,
            software_cv: None,
        },
    ];
    assert_eq!(pairs, expected);
    assert_eq!(fallback::count_pairs(pool, &at, None).await.unwrap(), 2);
    // A page, and one host's rows.
    assert_eq!(
        fallback::pairs(pool, &at, None, Some(1), 1).await.unwrap(),
        expected[1..]
    );
    assert_eq!(
        fallback::pairs(pool, &at, Some(&[f.vm]), None, 0).await.unwrap(),
        expected[1..]
    );
    assert_eq!(fallback::count_pairs(pool, &at, Some(&[f.vm])).await.unwrap(), 1);
    assert_eq!(fallback::count_pairs(pool, &at, Some(&[])).await.unwrap(), 0);
    // What may be at software speed: vm's accelerated request ran software;
    // bench's ratio of 4 only counts under a threshold above it.
    let gcm_only = [gcm().name()];
    assert_eq!(
        fallback::slow_candidates(pool, &at, None, &gcm_only, 1.5)
            .await
            .unwrap(),
        expected[1..]
    );
    assert_eq!(
        fallback::slow_candidates(pool, &at, None, &gcm_only, 5.0)
            .await
            .unwrap(),
        expected
    );
    assert!(
        fallback::slow_candidates(pool, &at, None, &[], 5.0)
            .await
            .unwrap()
            .is_empty()
    );
    // The chart's rows of one algorithm: by host name (bench-01, vm-01), not by ratio.
    assert_eq!(
        fallback::algorithm_pairs(pool, &at, None, gcm(), &[], 10)
            .await
            .unwrap(),
        expected
    );
    assert_eq!(
        fallback::algorithm_pairs(pool, &at, None, gcm(), &[f.bench], 10)
            .await
            .unwrap(),
        expected[1..],
        "the hosts already shown are left out"
    );
    assert_eq!(
        fallback::algorithm_pairs(pool, &at, Some(&[f.bench]), gcm(), &[], 1)
            .await
            .unwrap(),
        expected[..1]
    );
    assert!(
        fallback::algorithm_pairs(pool, &at, None, "des-cbc".parse().unwrap(), &[], 10)
            .await
            .unwrap()
            .is_empty()
    );
    // The hosts at software speed, grouped in SQL from the cases their CPU
    // has (here a fallback to software, or the accelerated path whatever its
    // ratio), stored per point with the point's rows.
    type Case = (i32, &'static str, &'static str, bool);
    let gcm_name = gcm().name();
    let fell_back = [(0, gcm_name, "software", false)];
    let or_accelerated = [(0, gcm_name, "software", false), (0, gcm_name, "accelerated", false)];
    let or_near = [(0, gcm_name, "software", false), (0, gcm_name, "accelerated", true)];
    let both = [(f.bench, 0), (f.vm, 0)];
    let slow = async |hosts: &[(i64, i32)], cases: &[Case]| {
        let cases = SlowCases::new(hosts.iter().copied(), cases.iter().copied());
        let stored = fallback_views::slow_view(pool, &at, &cases).await.unwrap();
        assert_eq!((stored.pairs, stored.changed), (2, false));
        stored.slow_hosts
    };
    assert_eq!(slow(&both, &fell_back).await, [f.vm]);
    // bench's ratio of 4 is not under 1.5; vm's unmeasured ratio sorts last.
    assert_eq!(slow(&both, &or_accelerated).await, [f.bench, f.vm]);
    assert_eq!(slow(&both, &or_near).await, [f.vm]);
    // Only the hosts given, each with its own CPU's cases.
    assert_eq!(slow(&[(f.bench, 0)], &or_accelerated).await, [f.bench]);
    assert_eq!(slow(&[(f.vm, 0)], &or_accelerated).await, [f.vm]);
    assert!(slow(&[(f.bench, 1), (f.vm, 1)], &or_accelerated).await.is_empty());
    assert!(slow(&[], &or_accelerated).await.is_empty());
    // Stored, then read back while nothing changed; computed again only when asked.
    let cases = SlowCases::new(both, fell_back);
    fallback_views::compute(pool, &at, &cases).await.unwrap();
    let stored = fallback_views::read(pool, &at, &cases).await.unwrap().expect("stored");
    assert_eq!((stored.slow_hosts, stored.changed), (vec![f.vm], false));
    let other = SlowCases::new(both, or_accelerated);
    assert_eq!(
        fallback_views::read(pool, &at, &other).await.unwrap(),
        None,
        "other cases"
    );
    // The fallback page's hosts: the fleet with its marks, and those a filter keeps.
    let fleet = ViewHosts::load(pool, None).await.unwrap();
    let marked: Vec<(i64, bool)> = fleet.iter().map(|h| (h.host.id, h.emulated)).collect();
    assert_eq!(marked, [(f.bench, false), (f.vm, true)]);
    assert!(!fleet.filtered());
    let only_vm = |h: &FallbackHost| h.id == f.vm;
    let kept = ViewHosts::load(pool, Some(&only_vm)).await.unwrap();
    assert_eq!(kept.kept(), Some(&[f.vm][..]));
    assert_eq!(
        fallback_hosts::cases_now(pool, &at).await.unwrap(),
        fleet.fleet_cases(&at),
        "the refresh recomputes with the fleet's cases, whatever a view filters"
    );
    let (hour, none) = (std::time::Duration::from_secs(3600), std::time::Duration::ZERO);
    assert!(fallback_views::due(pool, none, hour).await.unwrap().is_empty());
    // A marker of a point no list was computed for goes; the seen ones went with the computation.
    sqlx::query(
        "INSERT INTO fallback_pair_changes (size_bytes, threads, direction, key_mode) \
         VALUES (16384, 2, 'encrypt', 'static')",
    )
    .execute(pool)
    .await
    .unwrap();
    assert_eq!(fallback_views::forget_changes(pool).await.unwrap(), 1);
    assert_eq!(fallback_views::forget_changes(pool).await.unwrap(), 0);
    let two_threads = PathPoint { threads: 2, ..at };
    let unmeasured = fallback::pairs(pool, &two_threads, None, None, 0).await.unwrap();
    assert!(unmeasured.is_empty(), "{unmeasured:?}");
    assert_eq!(fallback::count_pairs(pool, &two_threads, None).await.unwrap(), 0);

    let mut fallback_hosts = fallback::hosts(pool).await.unwrap();
    fallback_hosts.sort_by_key(|h| h.id);
    let expected = [
        FallbackHost {
            id: f.bench,
            name: "bench-01".into(),
            labels: Json(bench_labels),
            arch: Some("x86_64".into()),
            cpu_model_name: xeon,
            hypervisor: Some("kvm".into()),
            cpuinfo_foreign: None,
            features_advertised: Some(strings(&["aes", "avx", "pclmulqdq"])),
        },
        FallbackHost {
            id: f.vm,
            name: "vm-01".into(),
            labels: Json(vm_labels),
            arch: Some("aarch64".into()),
            cpu_model_name: Some("Neoverse-N1".into()),
            hypervisor: Some("kvm".into()),
            cpuinfo_foreign: None,
            features_advertised: Some(strings(&["aes", "pmull"])),
        },
    ];
    assert_eq!(fallback_hosts, expected);
    // The built-in crates' are the sizes above; the fixture measured no other provider.
    assert_eq!(
        fallback::sizes(pool, Provider::RustCrypto).await.unwrap(),
        [1024, 16384]
    );
    assert!(fallback::sizes(pool, Provider::Openssl).await.unwrap().is_empty());
    assert_eq!(fallback::archs(pool).await.unwrap(), ["aarch64", "x86_64"]);

    let ids = |list: Vec<findings::Finding>| {
        list.into_iter()
            .map(|finding| (finding.id, finding.status))
            .collect::<Vec<_>>()
    };
    let [slow, masks] = f.open_findings;
    // A page of the open findings, in list_open's order.
    assert_eq!(
        ids(fallback::open_findings(pool, 10, 0).await.unwrap()),
        ids(findings::list_open(pool).await.unwrap())
    );
    assert_eq!(
        ids(fallback::open_findings(pool, 1, 1).await.unwrap()),
        [(masks, String::from("open"))]
    );
    let (open, resolved) = (String::from("open"), String::from("resolved"));
    assert_eq!(
        ids(fallback::findings(pool, None, None, 0).await.unwrap()),
        [
            (slow, open.clone()),
            (masks, open.clone()),
            (f.resolved_finding, resolved.clone())
        ],
        "open first, most severe first"
    );
    assert_eq!(
        ids(fallback::findings(pool, Some("open"), None, 0).await.unwrap()),
        [(slow, open.clone()), (masks, open)]
    );
    assert_eq!(
        ids(fallback::findings(pool, Some("resolved"), None, 0).await.unwrap()),
        [(f.resolved_finding, resolved.clone())]
    );
    // A page of them, and the counts.
    assert_eq!(
        ids(fallback::findings(pool, None, Some(1), 2).await.unwrap()),
        [(f.resolved_finding, resolved)]
    );
    assert_eq!(fallback::count_findings(pool, None).await.unwrap(), 3);
    assert_eq!(fallback::count_findings(pool, Some("open")).await.unwrap(), 2);
}

/// `fallback_pairs` (kept by triggers on `result_points`) holds what pairing
/// `result_points` itself gives, after results, a deleted result and a rebuild.
#[tokio::test]
async fn fallback_pairs_follow_result_points() {
    let f = populate().await;
    let pool = &f.pool;
    type Row = (
        i64,
        String,
        i64,
        Option<i64>,
        Option<String>,
        Option<f64>,
        Option<i64>,
        Option<f64>,
        Option<f64>,
    );
    let paired = "SELECT host_id, algorithm, size_bytes, \
            max(result_id) FILTER (WHERE path = 'accelerated'), max(path_used) FILTER (WHERE path = 'accelerated'), \
            max(throughput_mb_s) FILTER (WHERE path = 'accelerated'), \
            max(result_id) FILTER (WHERE path = 'software'), max(throughput_mb_s) FILTER (WHERE path = 'software'), \
            max(throughput_mb_s) FILTER (WHERE path = 'accelerated') \
                / nullif(max(throughput_mb_s) FILTER (WHERE path = 'software'), 0) \
        FROM result_points WHERE concurrency = 0 AND nonce = 'counter' \
        GROUP BY host_id, algorithm, direction, size_bytes, threads, key_mode \
        ORDER BY 1, 2, 3, threads, direction, key_mode";
    let kept = "SELECT host_id, algorithm, size_bytes, accelerated_result_id, accelerated_path_used, \
            accelerated_mb_s, software_result_id, software_mb_s, ratio \
        FROM fallback_pairs ORDER BY 1, 2, 3, threads, direction, key_mode";
    let check = async |when: &str| {
        let want: Vec<Row> = sqlx::query_as(paired).fetch_all(pool).await.unwrap();
        let have: Vec<Row> = sqlx::query_as(kept).fetch_all(pool).await.unwrap();
        assert_eq!(have, want, "{when}");
        want.len()
    };
    assert!(check("after the fixture's results").await >= 2);
    // A deleted result takes its point, and so its side of the pair.
    sqlx::query("DELETE FROM results WHERE id = $1")
        .bind(f.bench_software.result)
        .execute(pool)
        .await
        .unwrap();
    check("after deleting bench's software result").await;
    sqlx::query("SELECT refresh_result_points()")
        .execute(pool)
        .await
        .unwrap();
    assert!(check("after a rebuild").await >= 2);
}
