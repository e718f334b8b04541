//! Build script: records how the agent is compiled, for its host facts.

#[path = "build/codegen.rs"]
mod codegen;

use std::path::Path;

fn main() {
    record_codegen();
}

/// Passes the Cargo profile name, opt-level, LTO mode, codegen units and
/// compile-time target features to the crate as `CIPHERFLEET_*` variables,
/// which `probe::build_info` reads with `env!` (see `build/codegen.rs` for
/// where each comes from).
fn record_codegen() {
    let var = |name: &str| std::env::var(name).ok();
    let out_dir = var("OUT_DIR").expect("Cargo sets OUT_DIR");
    let profile = codegen::profile_name(Path::new(&out_dir));
    let package_dir = var("CARGO_MANIFEST_DIR").expect("Cargo sets CARGO_MANIFEST_DIR");
    let manifest_path = codegen::workspace_manifest(Path::new(&package_dir));
    let manifest = match &manifest_path {
        Some(path) => {
            println!("cargo::rerun-if-changed={}", path.display());
            std::fs::read_to_string(path).unwrap_or_default()
        }
        None => String::new(),
    };
    let rustflags: Vec<String> = var("CARGO_ENCODED_RUSTFLAGS")
        .map(|f| f.split('\x1f').filter(|s| !s.is_empty()).map(str::to_string).collect())
        .unwrap_or_default();
    let package = var("CARGO_PKG_NAME").expect("Cargo sets CARGO_PKG_NAME");
    let settings = codegen::resolve(
        &manifest,
        &profile,
        &package,
        &mut |name| {
            println!("cargo::rerun-if-env-changed={name}");
            std::env::var(name).ok()
        },
        &rustflags,
    );
    let mut features: Vec<String> = var("CARGO_CFG_TARGET_FEATURE")
        .unwrap_or_default()
        .split(',')
        .filter(|f| !f.is_empty())
        .map(str::to_string)
        .collect();
    features.sort();
    println!("cargo::rustc-env=CIPHERFLEET_PROFILE={profile}");
    println!(
        "cargo::rustc-env=CIPHERFLEET_OPT_LEVEL={}",
        var("OPT_LEVEL").unwrap_or_default()
    );
    println!("cargo::rustc-env=CIPHERFLEET_LTO={}", settings.lto);
    println!("cargo::rustc-env=CIPHERFLEET_CODEGEN_UNITS={}", settings.codegen_units);
    println!("cargo::rustc-env=CIPHERFLEET_TARGET_FEATURES={}", features.join(","));
}
