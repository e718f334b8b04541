//! What the agent found about each provider on its host: whether it can
//! measure on it and why not, the kernel's chosen crypto drivers, and the
//! host's OpenSSL build. `probe` reports them under `providers`.

use serde::{Deserialize, Serialize};

use super::{CpuFlags, Provider};
use crate::algorithm::Algorithm;
use crate::path::PathUsed;

/// Every provider's capability on this host, and the details behind them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProviderFacts {
    /// One per provider, in [`Provider::ALL`] order.
    pub capabilities: Vec<Capability>,
    /// The CPU features ring's and OpenSSL's dispatchers read, as this host has them.
    pub cpu: CpuFlags,
    /// The host's OpenSSL, when an `openssl` binary was found and answered.
    pub openssl: Option<OpensslBuild>,
    /// The kernel crypto API, when `/proc/crypto` could be read.
    pub kernel: Option<KernelCrypto>,
}

impl ProviderFacts {
    /// The capability of `provider`.
    pub fn capability(&self, provider: Provider) -> Option<&Capability> {
        self.capabilities.iter().find(|c| c.provider == provider)
    }
}

/// Whether the agent can measure on a provider here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Capability {
    pub provider: Provider,
    /// The agent can measure on it.
    pub available: bool,
    /// Why it cannot, or what limits it (AF_ALG offering `skcipher` but not `aead`).
    pub reason: Option<String>,
    /// What it can run here (a subset of [`Provider::algorithms`]).
    pub algorithms: Vec<Algorithm>,
    /// How its software path is measured here, or why it is not.
    pub software_path: String,
}

/// The host's `openssl` binary and the library it runs, from `openssl version -a`.
/// A field an agent leaves out reads as its default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct OpensslBuild {
    /// The binary run (an absolute path, or as given with `--openssl`).
    pub binary: String,
    /// `OpenSSL 3.0.19 27 Jan 2026`, as its first line says (LibreSSL says so too).
    pub version: String,
    /// The library's own version where it differs from the binary's: 3.x prints
    /// `(Library: …)`.
    pub library_version: Option<String>,
    /// `built on:`.
    pub built_on: Option<String>,
    /// `platform:`, e.g. `debian-amd64`, `linux-x86_64`, `linux-aarch64`.
    pub platform: Option<String>,
    /// `options:`.
    pub options: Option<String>,
    /// `compiler:`, the flags it was built with.
    pub compiler: Option<String>,
    /// Built `no-asm` (`-DOPENSSL_NO_ASM` among its flags, or `no-asm` among
    /// its options): only C code, whatever the CPU.
    pub no_asm: bool,
    /// 3.x's `CPUINFO:` line: the capability vector it detected (and any override).
    pub cpuinfo: Option<String>,
    /// The libcrypto the binary maps when it runs; `None` when it maps none
    /// (a static build) or it could not be seen.
    pub libcrypto: Option<String>,
    /// Whether its `speed` takes `-bytes` and `-seconds` (1.1.1 and later);
    /// without, it measures its fixed sizes for 3 s each.
    pub speed_bytes_seconds: bool,
    /// Whether its `speed` takes `-aead` (3.0 and later).
    pub speed_aead: bool,
    /// An `OPENSSL_ia32cap`/`OPENSSL_armcap` in the agent's own environment, as `NAME=value`.
    pub capability_env: Option<String>,
    /// What that variable masks (`aes`, `pclmulqdq`, `avx2`, `neon`…): the `openssl-masked` finding.
    pub masked: Vec<String>,
    /// The services the operator asked the agent to watch (`--watch-env`), in
    /// the order given; empty from agents before it, or without the flag.
    pub watched: Vec<WatchedService>,
}

/// Another process's OpenSSL capability variable, read for `--watch-env`: of
/// its environment only that variable is kept (the rest can hold secrets).
/// A field an agent leaves out reads as its default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WatchedService {
    /// What the operator named: `pid 1234` or `unit nginx.service`.
    pub target: String,
    /// The process's name (`/proc/PID/comm`); `None` when no process was read
    /// (a unit not running).
    pub name: Option<String>,
    /// Where the variable was looked for: `/proc/1234/environ`, or the unit's
    /// `Environment=` (which leaves out its `EnvironmentFile=`) when it has no
    /// process to read.
    pub source: String,
    /// The variable found there, as `NAME=value`; `None` without one.
    pub capability_env: Option<String>,
    /// What that variable masks, by the same rule as the agent's own.
    pub masked: Vec<String>,
    /// Why the environment could not be read (no such process, permission
    /// denied, no `systemctl`); the other fields are then empty.
    pub error: Option<String>,
}

/// The kernel crypto API on this host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelCrypto {
    /// The driver the kernel picks for each name of
    /// [`super::kernel::NAMES`] that it registers.
    pub drivers: Vec<KernelDriver>,
    /// The names of [`super::kernel::NAMES`] it registers no driver for
    /// (a template such as `gcm(aes)` appears once first instantiated).
    pub missing: Vec<String>,
    /// AF_ALG `skcipher` sockets: usable, or why not.
    pub af_alg_skcipher: AfAlg,
    /// AF_ALG `aead` sockets: usable, or why not.
    pub af_alg_aead: AfAlg,
}

/// Whether one AF_ALG socket type can be used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AfAlg {
    pub available: bool,
    /// Why not: the errno and what it means (`CONFIG_CRYPTO_USER_API_AEAD` missing…).
    pub reason: Option<String>,
}

/// The implementation the kernel picks for one algorithm name: the highest
/// priority among those whose self-test passed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelDriver {
    /// The algorithm name, e.g. `gcm(aes)`.
    pub name: String,
    /// The driver, e.g. `generic-gcm-aesni` or `gcm_base(ctr(aes-generic),ghash-generic)`.
    pub driver: String,
    /// The module it comes from (`aesni_intel`), or `kernel` when built in.
    pub module: String,
    pub priority: i64,
    /// `cipher`, `skcipher`, `lskcipher`, `aead`…
    pub kind: String,
    /// The kernel's portable C rather than an architecture's own code.
    pub generic: bool,
    /// What the driver runs ([`super::kernel::path`]): `accelerated` when every
    /// primitive is on hardware instructions.
    pub path: PathUsed,
    /// Implementations registered for the name in all, the chosen one included.
    pub candidates: u32,
}
