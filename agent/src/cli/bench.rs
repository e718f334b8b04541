//! `bench`: its flags, the matrices and points they ask for on which
//! providers, and the run that measures each point in a worker process and
//! prints the table, JSON lines or CSV.

use std::io::{self, IsTerminal, Write};
use std::time::Instant;

use clap::{Args, ValueEnum};

use cipherfleet_core::algorithm::{self, Algorithm};
use cipherfleet_core::measurement::{Harness, Measurement, Status};
use cipherfleet_core::path::{Flavour, Path};
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::{self, Direction, InvalidSpec, JobSpec, KeyMode, Matrix, Nonce, Suite};

use crate::report::{self, Format};
use crate::worker::{self, WorkerJob};
use crate::{backend, kernel, probe};

use super::usage_error;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Choice3 {
    Encrypt,
    Decrypt,
    Both,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum PathChoice {
    Accelerated,
    Software,
    Both,
}

#[derive(Args, Debug)]
pub(super) struct BenchArgs {
    /// Algorithms, comma separated (OpenSSL names, e.g. aes-256-gcm,chacha20-poly1305). `--list` shows them all.
    #[arg(short = 'a', long = "algorithm", value_name = "LIST", value_delimiter = ',', value_parser = parse_algorithm)]
    algorithms: Vec<Algorithm>,
    /// Payload sizes in bytes per operation, comma separated; binary suffixes: 11,18,16,1k,16KiB,10MiB (1 B to 1 GiB).
    #[arg(short = 's', long = "size", value_name = "LIST", value_delimiter = ',', value_parser = parse_size)]
    sizes: Vec<u64>,
    /// Worker threads, comma separated for a scaling curve, e.g. 1,2,4 (1 to 1024).
    #[arg(short = 't', long, value_name = "LIST", value_delimiter = ',', value_parser = parse_threads)]
    threads: Vec<u32>,
    /// Object-storage scenario: N objects in flight on the thread pool, P99 per object (e.g. --concurrency 32 --size 10MiB).
    /// The first N completions are discarded; at least 10 × N are counted.
    #[arg(long, value_name = "N")]
    concurrency: Option<u32>,
    /// Open loop for the object-storage scenario: R objects arrive per second (local bench only).
    ///
    /// Objects arrive on a fixed schedule whatever the completions, and latency counts from
    /// each object's intended arrival, so a stall shows in P99 (needs --concurrency).
    /// Default: the closed loop. Local `bench` only: a coordinator's campaigns cannot ask for
    /// it (jobs carry no arrival rate), so fleet results are always the closed loop.
    #[arg(long, value_name = "R", value_parser = parse_arrival_rate, allow_negative_numbers = true)]
    arrival_rate: Option<f64>,
    /// Encryption nonces, comma separated: counter (thread and operation number, free) or random
    /// (the AEAD's 12 or 24 bytes from the OS for every message, drawn inside the measured loop
    /// since that is their cost). Random applies to the nonce-based AEADs and --direction encrypt
    /// only. Default: the suite's (counters; field-level adds random ones), else counter. The
    /// JSON/CSV rows record it (`nonce`), as campaigns' results do.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_nonce)]
    nonce: Vec<Nonce>,
    #[arg(long, value_enum)]
    /// Encrypt, decrypt (AEAD tags verified), or both. Default: encrypt.
    direction: Option<Choice3>,
    /// Key handling: static (one key), per-op (key setup every operation), hkdf-per-user (HKDF-SHA256 derivation then key setup). Comma separated.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_key_mode)]
    key_mode: Vec<KeyMode>,
    /// Implementation path: accelerated (run-time detection), software (the -soft build), or both.
    /// Default: the suite's paths; a single-path run uses this binary's own flavour.
    #[arg(long, value_enum)]
    path: Option<PathChoice>,
    /// Measured seconds per point, after a warm-up (more than 0, at most 600).
    #[arg(long, value_name = "F", value_parser = parse_seconds, allow_negative_numbers = true)]
    seconds: Option<f64>,
    /// Named matrix: quick (under a minute), standard (10 minutes or more), full (hours), or a scenario
    /// suite: object-storage (about 20 s: AES-256-GCM, AES-128-CBC-HMAC-SHA256, ChaCha20-Poly1305
    /// on 10 MiB objects, 32 in flight, threads = cores up to 32), legacy-migration (about 20 s:
    /// DES, 3DES, AES-128/256-CBC at 16 B and 16 KiB, per-op and static keys), modes (about 30 s:
    /// AES-256 ECB/CBC/CTR/GCM/CCM/OCB at 16 KiB, both directions, 1 thread and all cores),
    /// fallback (about 15 s: AES-256-GCM, AES-256-CTR, ChaCha20-Poly1305 at 16 B and 16 KiB on
    /// both paths), field-level (about 30 s: 11 B and 18 B under static, per-op and hkdf-per-user
    /// keys with counter nonces, and encrypted under a static key with random nonces), tour
    /// (about 90 s: quick on both paths, and the points each scenario view reads, at 0.5 s;
    /// what the quickstart runs), or providers (a few minutes: AES-128/256-GCM,
    /// ChaCha20-Poly1305, AES-128-CBC, AES-256-CTR at 16 B to 10 MiB on both paths, on every
    /// provider that runs them). Flags given with it replace its lists.
    /// Default: quick, unless --algorithm is given (then 16 B to 16 KiB, encrypt, 1 thread, 1 s a point).
    #[arg(long, value_parser = parse_suite)]
    suite: Option<Suite>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Measure the way `openssl speed -evp`/`-aead` does, to compare with it like for like.
    ///
    /// As OpenSSL 3.0's speed: in place under one fixed key; GCM, CCM and OCB set key and
    /// nonce up for every message and authenticate 13 bytes of AAD; every other mode,
    /// ChaCha20-Poly1305 included, is one stream with no per-message nonce, IV, padding or
    /// tag. Table or JSON output; the results never go to a coordinator.
    #[arg(long)]
    openssl_compat: bool,
    /// Implementations to measure, comma separated: rustcrypto (the crates built in, the
    /// default; `--suite providers` names all four itself), ring (built in), openssl (the host's, through `openssl speed`), kernel (the
    /// kernel crypto API through AF_ALG), or all.
    ///
    /// Results are printed side by side. A provider that cannot run here, or lacks an
    /// algorithm, is skipped saying why (`probe` lists what each can run). ring's path is
    /// inferred from the CPU (it has no software build); openssl's software path masks its
    /// capability vector (OPENSSL_ia32cap/OPENSSL_armcap); the kernel's binds its generic drivers.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_provider)]
    provider: Vec<ProviderChoice>,
    /// The `openssl` binary of the openssl provider (default: the first `openssl` on PATH).
    #[arg(long, value_name = "PATH")]
    openssl: Option<std::path::PathBuf>,
    /// List the algorithms and suites, then exit.
    #[arg(long)]
    list: bool,
}

/// A `--provider` value: one provider, or all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ProviderChoice {
    One(Provider),
    All,
}

fn parse_provider(s: &str) -> Result<ProviderChoice, String> {
    match s.trim() {
        "all" => Ok(ProviderChoice::All),
        other => other
            .parse()
            .map(ProviderChoice::One)
            .map_err(|e: cipherfleet_core::text::UnknownValue| format!("{e}, all")),
    }
}

/// The providers `--provider` names, in table order; `None` when it names
/// none, and each point keeps its own (RustCrypto, but for `--suite providers`).
fn providers(args: &BenchArgs) -> Option<Vec<Provider>> {
    if args.provider.is_empty() {
        return None;
    }
    Some(if args.provider.contains(&ProviderChoice::All) {
        Provider::ALL.to_vec()
    } else {
        Provider::ALL
            .iter()
            .copied()
            .filter(|p| args.provider.contains(&ProviderChoice::One(*p)))
            .collect()
    })
}

fn parse_algorithm(s: &str) -> Result<Algorithm, String> {
    s.parse().map_err(|e: algorithm::UnknownAlgorithm| e.to_string())
}
fn parse_size(s: &str) -> Result<u64, String> {
    spec::parse_size(s).map_err(|e| e.message)
}
fn parse_threads(s: &str) -> Result<u32, String> {
    let n: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number; accepted: 1 to {}", spec::MAX_THREADS))?;
    spec::validate_threads(n).map_err(|e| e.message)?;
    Ok(n)
}
fn parse_seconds(s: &str) -> Result<f64, String> {
    let f: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    spec::validate_seconds(f).map_err(|e| e.message)?;
    Ok(f)
}
fn parse_arrival_rate(s: &str) -> Result<f64, String> {
    let r: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of objects per second"))?;
    // Whether --concurrency is there too is checked with the matrix.
    spec::validate_arrival_rate(Some(r), Some(1)).map_err(|e| e.message)?;
    Ok(r)
}
fn parse_key_mode(s: &str) -> Result<KeyMode, String> {
    match s.trim() {
        "static" => Ok(KeyMode::Static),
        "per-op" => Ok(KeyMode::PerOp),
        "hkdf-per-user" => Ok(KeyMode::HkdfPerUser),
        other => Err(format!(
            "unknown key mode '{other}'; accepted: static, per-op, hkdf-per-user"
        )),
    }
}
fn parse_nonce(s: &str) -> Result<Nonce, String> {
    s.trim()
        .parse()
        .map_err(|e: cipherfleet_core::text::UnknownValue| e.to_string())
}
fn parse_suite(s: &str) -> Result<Suite, String> {
    s.parse().map_err(|e: InvalidSpec| e.message)
}

/// Turns the flags into the matrices to run.
fn matrices(args: &BenchArgs, cores: u32) -> Result<Vec<Matrix>, InvalidSpec> {
    let explicit = !args.algorithms.is_empty();
    let mut base = match (args.suite, explicit) {
        (Some(suite), _) => suite.matrices_on(cores, worker::execution()),
        (None, false) => Suite::Quick.matrices(cores),
        (None, true) => vec![Matrix {
            algorithms: vec![],
            // `openssl speed`'s default sizes.
            sizes: vec![16, 64, 256, 1024, 8192, 16384],
            directions: vec![Direction::Encrypt],
            threads: vec![1],
            concurrency: None,
            key_modes: vec![KeyMode::Static],
            paths: vec![Path::Accelerated],
            nonces: vec![Nonce::Counter],
            seconds: 1.0,
            providers: vec![cipherfleet_core::provider::Provider::RustCrypto],
        }],
    };
    for m in &mut base {
        if explicit {
            m.algorithms = args.algorithms.clone();
        }
        if !args.sizes.is_empty() {
            m.sizes = args.sizes.clone();
        }
        if !args.threads.is_empty() {
            m.threads = args.threads.clone();
        }
        if args.concurrency.is_some() {
            m.concurrency = args.concurrency;
        }
        match args.direction {
            Some(Choice3::Encrypt) => m.directions = vec![Direction::Encrypt],
            Some(Choice3::Decrypt) => m.directions = vec![Direction::Decrypt],
            Some(Choice3::Both) => m.directions = vec![Direction::Encrypt, Direction::Decrypt],
            None => {}
        }
        if !args.key_mode.is_empty() {
            m.key_modes = args.key_mode.clone();
        }
        if !args.nonce.is_empty() {
            m.nonces = args.nonce.clone();
        }
        match args.path {
            Some(PathChoice::Accelerated) => m.paths = vec![Path::Accelerated],
            Some(PathChoice::Software) => m.paths = vec![Path::Software],
            Some(PathChoice::Both) => m.paths = vec![Path::Accelerated, Path::Software],
            // A single-path matrix runs on this binary's own flavour: `cipherfleet-agent-soft bench`
            // measures software unless told otherwise.
            None if m.paths == [Path::Accelerated] && backend::FLAVOUR == Flavour::Software => {
                m.paths = vec![Path::Software]
            }
            None => {}
        }
        if let Some(s) = args.seconds {
            m.seconds = s;
        }
        m.validate()?;
        spec::validate_arrival_rate(args.arrival_rate, m.concurrency)?;
    }
    Ok(base)
}

/// The harness the flags ask for; with `--openssl-compat`, every point must
/// have an `openssl speed` shape, and CSV (the fleet's columns) is refused.
fn openssl_compat(args: &BenchArgs, points: &[JobSpec]) -> Result<Harness, String> {
    if !args.openssl_compat {
        return Ok(Harness::Engine);
    }
    if args.format == Format::Csv {
        return Err("--openssl-compat prints a table or JSON lines (which say `\"harness\":\"openssl-compat\"`); CSV rows could not tell its figures from the engine's".into());
    }
    if points.iter().any(|p| !p.point.nonce.is_counter()) {
        return Err(
            "--openssl-compat measures openssl speed's per-message shape, nonces included; leave out --nonce random"
                .into(),
        );
    }
    for p in points {
        if let Some(why) = kernel::compat::unsupported(
            p.point.algorithm,
            p.point.size_bytes,
            p.point.key_mode,
            p.point.concurrency,
        ) {
            return Err(why);
        }
    }
    Ok(Harness::OpensslCompat)
}

/// Points with their providers, and what was skipped and why (one line each).
type Planned = (Vec<(Provider, JobSpec)>, Vec<String>);

/// The points to run, each with its provider, and what was skipped and why.
/// A provider named alone that cannot run here, or cannot run a point, is an
/// error; with several (`all`), what one cannot run is skipped, saying why.
fn provider_points(args: &BenchArgs, points: &[JobSpec], harness: Harness) -> Result<Planned, String> {
    let asked: Vec<JobSpec> = match providers(args) {
        Some(providers) => providers
            .iter()
            .flat_map(|&provider| {
                points.iter().map(move |p| JobSpec {
                    point: cipherfleet_core::point::Point { provider, ..p.point },
                    ..p.clone()
                })
            })
            .collect(),
        None => points.to_vec(),
    };
    let providers: Vec<Provider> = Provider::ALL
        .iter()
        .copied()
        .filter(|&provider| asked.iter().any(|p| p.point.provider == provider))
        .collect();
    let alone = providers.len() == 1;
    let mut planned = Vec::new();
    let mut skipped = Vec::new();
    for provider in providers {
        if let Some(why) = unavailable_here(provider, args.openssl.as_deref()) {
            if alone {
                return Err(format!("--provider {provider}: {why}"));
            }
            skipped.push(format!("{provider}: {why}"));
            continue;
        }
        for p in asked.iter().filter(|p| p.point.provider == provider) {
            let refusal = crate::provider::refuses(p, harness).or_else(|| match provider {
                // AF_ALG may offer one socket type and not the other, or lack a generic driver.
                Provider::Kernel => crate::provider::linux::bind_for(p.point.algorithm, p.point.path).err(),
                _ => None,
            });
            match refusal {
                Some(why) if alone => return Err(format!("--provider {provider}: {why}")),
                Some(why) => {
                    let line = format!("{provider} {}: {why}", p.point.algorithm);
                    if !skipped.contains(&line) {
                        skipped.push(line);
                    }
                }
                None => planned.push((provider, p.clone())),
            }
        }
    }
    Ok((planned, skipped))
}

/// Why `provider` cannot run on this host at all, if it cannot.
fn unavailable_here(provider: Provider, openssl: Option<&std::path::Path>) -> Option<String> {
    match provider {
        Provider::RustCrypto | Provider::Ring => None,
        Provider::Openssl => crate::provider::openssl::find(openssl)
            .and_then(|b| crate::provider::openssl::inspect(&b))
            .err(),
        Provider::Kernel => {
            let skcipher = crate::provider::linux::bind_for("aes-128-cbc".parse().expect("known"), Path::Accelerated);
            let aead = crate::provider::linux::bind_for("aes-128-gcm".parse().expect("known"), Path::Accelerated);
            match (skcipher, aead) {
                (Err(a), Err(_)) => Some(a),
                _ => None,
            }
        }
    }
}

pub(super) fn bench(args: BenchArgs) -> i32 {
    if args.list {
        println!("algorithms: {}", algorithm::valid_names());
        println!("suites: {}", spec::suite_names());
        for p in Provider::ALL {
            let names: Vec<&str> = p.algorithms().iter().map(|a| a.name()).collect();
            println!("provider {p}: {}", names.join(", "));
        }
        return 0;
    }
    let cores = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    let points: Vec<JobSpec> = match matrices(&args, cores) {
        Ok(ms) => spec::expand_all(&ms),
        Err(e) => return usage_error(e),
    };
    let harness = match openssl_compat(&args, &points) {
        Ok(h) => h,
        Err(e) => return usage_error(e),
    };
    let (points, skipped) = match provider_points(&args, &points, harness) {
        Ok(planned) => planned,
        Err(e) => return usage_error(e),
    };
    // Refuse up front rather than fail every software point one by one.
    for path in [Path::Accelerated, Path::Software] {
        if points
            .iter()
            .any(|(provider, p)| p.point.path == path && *provider == Provider::RustCrypto)
            && let Err(e) = worker::binary_for(path)
        {
            return usage_error(e);
        }
    }
    let host = probe::probe();
    let progress = io::stderr().is_terminal();
    if progress {
        let secs: f64 = points.iter().map(|(_, p)| p.seconds + p.warmup_seconds()).sum();
        eprintln!("{} points, about {:.0} s of measuring", points.len(), secs);
    }
    let mut stdout = io::stdout().lock();
    if args.format == Format::Csv {
        let _ = writeln!(stdout, "{}", report::CSV_HEADER);
    }
    let started = Instant::now();
    let mut results = Vec::with_capacity(points.len());
    for (i, (provider, point)) in points.iter().enumerate() {
        if progress {
            eprint!(
                "\r\x1b[K[{}/{}] {} {} ({:.0} s)",
                i + 1,
                points.len(),
                provider,
                point.label(),
                started.elapsed().as_secs_f64()
            );
        }
        let job = WorkerJob {
            spec: point.clone(),
            arrival_rate_per_s: args.arrival_rate,
            harness,
            openssl: args.openssl.clone(),
        };
        let m = match worker::run_point(&job) {
            Ok(output) => output.measurement(point, Some(host.clone())),
            Err(e) => Measurement::failed(point, e.to_string(), Some(host.clone())).on_provider(*provider, None),
        };
        let written = match args.format {
            Format::Json => report::write_json_line(&m, &mut stdout),
            Format::Csv => report::write_csv_row(&m, &mut stdout),
            Format::Table => Ok(()),
        };
        if written.is_err() {
            // stdout closed (e.g. piped into `head`): nothing more to report to.
            return 1;
        }
        results.push(m);
    }
    if progress {
        eprintln!(
            "\r\x1b[K{} points in {:.1} s",
            points.len(),
            started.elapsed().as_secs_f64()
        );
    }
    if args.format == Format::Table {
        if report::write_table(&results, &host, &mut stdout).is_err() {
            return 1;
        }
        if results.iter().any(|m| !m.nonce.is_counter()) {
            let _ = writeln!(
                stdout,
                "nonce=random: a nonce drawn from the OS for every message inside the measured loop"
            );
        }
    }
    if !skipped.is_empty() {
        let mut err = io::stderr().lock();
        let _ = writeln!(err, "skipped:");
        for line in &skipped {
            let _ = writeln!(err, "  {line}");
        }
    }
    let failed = results.iter().filter(|m| m.status == Status::Failed).count();
    if failed > 0 {
        eprintln!("{failed} of {} points failed", results.len());
        1
    } else {
        0
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    #[test]
    fn random_nonces_are_refused_outside_aead_encryption_and_counters_are_the_default() {
        let args = parse(&[
            "-a",
            "aes-256-gcm,chacha20-poly1305",
            "--size",
            "11",
            "--nonce",
            "random",
        ])
        .unwrap();
        assert_eq!(args.nonce, [Nonce::Random]);
        let points: Vec<JobSpec> = matrices(&args, 2).unwrap().iter().flat_map(Matrix::expand).collect();
        assert!(points.iter().all(|p| p.point.nonce == Nonce::Random), "{points:?}");
        for refused in [
            &["-a", "aes-256-cbc", "--nonce", "random"][..],
            &["-a", "aes-256-gcm", "--direction", "both", "--nonce", "random"][..],
            &["--suite", "field-level", "--nonce", "random"][..],
        ] {
            let args = parse(refused).unwrap();
            assert_eq!(matrices(&args, 2).unwrap_err().flag, "--nonce", "{refused:?}");
        }
        let field_encrypt = parse(&["--suite", "field-level", "--direction", "encrypt", "--nonce", "random"]).unwrap();
        assert!(matrices(&field_encrypt, 2).is_ok());
        let counters = parse(&["-a", "aes-256-gcm"]).unwrap();
        assert!(counters.nonce.is_empty());
        let points: Vec<JobSpec> = matrices(&counters, 2)
            .unwrap()
            .iter()
            .flat_map(Matrix::expand)
            .collect();
        assert!(points.iter().all(|p| p.point.nonce == Nonce::Counter));
        // The field-level suite sets counters against random nonces by itself.
        let field = parse(&["--suite", "field-level"]).unwrap();
        let points: Vec<JobSpec> = matrices(&field, 2).unwrap().iter().flat_map(Matrix::expand).collect();
        assert!(
            points.iter().any(|p| p.point.nonce == Nonce::Random)
                && points.iter().any(|p| p.point.nonce == Nonce::Counter)
        );
        let both = parse(&["-a", "aes-256-gcm", "--size", "11", "--nonce", "counter,random"]).unwrap();
        assert_eq!(matrices(&both, 2).unwrap()[0].expand().len(), 2);
        let err = parse(&["--nonce", "urandom"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("counter, random"), "{err}");
    }

    fn parse(args: &[&str]) -> Result<BenchArgs, clap::Error> {
        let mut full = vec!["cipherfleet-agent", "bench"];
        full.extend_from_slice(args);
        Cli::try_parse_from(full).map(|c| match c.command {
            Command::Bench(b) => b,
            other => panic!("{other:?}"),
        })
    }

    #[test]
    fn flags_override_the_suite_lists() {
        let args = parse(&[
            "--suite",
            "quick",
            "--size",
            "11,18",
            "--direction",
            "both",
            "--seconds",
            "0.1",
        ])
        .unwrap();
        let ms = matrices(&args, 2).unwrap();
        let points: Vec<JobSpec> = ms.iter().flat_map(Matrix::expand).collect();
        assert_eq!(points.len(), 6 * 2 * 2);
        assert!(
            points
                .iter()
                .all(|p| p.seconds == 0.1 && [11, 18].contains(&p.point.size_bytes))
        );
    }

    #[test]
    fn algorithms_without_suite_use_openssl_sizes() {
        let args = parse(&["-a", "aes-128-gcm,chacha20-poly1305"]).unwrap();
        let points: Vec<JobSpec> = matrices(&args, 2).unwrap().iter().flat_map(Matrix::expand).collect();
        assert_eq!(points.len(), 2 * 6);
    }

    #[test]
    fn bad_values_name_the_flag_and_exit_2() {
        for (args, flag) in [
            (&["-a", "aes-512-gcm"][..], "--algorithm"),
            (&["--size", "0"], "--size"),
            (&["--size", "2GiB"], "--size"),
            (&["--size", "ten"], "--size"),
            (&["--threads", "0"], "--threads"),
            (&["--threads", "1025"], "--threads"),
            (&["--seconds", "0"], "--seconds"),
            (&["--seconds", "601"], "--seconds"),
            (&["--key-mode", "rotating"], "--key-mode"),
            (&["--suite", "huge"], "--suite"),
        ] {
            let err = parse(args).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{args:?}");
            assert!(err.to_string().contains(flag), "{args:?}: {err}");
        }
        let unknown = parse(&["-a", "aes-512-gcm"]).unwrap_err().to_string();
        assert!(unknown.contains("chacha20-poly1305"), "lists valid names: {unknown}");
    }

    #[test]
    fn an_arrival_rate_needs_the_object_scenario() {
        let args = parse(&["-a", "aes-256-gcm", "--arrival-rate", "100"]).unwrap();
        assert_eq!(matrices(&args, 2).unwrap_err().flag, "--arrival-rate");
        let args = parse(&["-a", "aes-256-gcm", "--concurrency", "4", "--arrival-rate", "100"]).unwrap();
        assert!(matrices(&args, 2).is_ok());
        let err = parse(&["--concurrency", "4", "--arrival-rate", "-5"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("--arrival-rate"), "{err}");
    }

    #[test]
    fn inapplicable_key_mode_is_a_matrix_error() {
        let args = parse(&["-a", "aes-256-gcm", "--concurrency", "4", "--key-mode", "per-op"]).unwrap();
        assert_eq!(matrices(&args, 2).unwrap_err().flag, "--key-mode");
    }
}
