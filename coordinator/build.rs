//! `sqlx::migrate!` embeds `../migrations` at compile time, but the compiler only
//! re-runs it when a Rust file changes; this makes a new or edited migration
//! rebuild the crate too.

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
