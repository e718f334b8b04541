//! Compiles `cipherfleet/v1/*.proto` with protox (pure Rust, so no system
//! `protoc`) and generates prost messages plus tonic clients and servers.

const PROTOS: &[&str] = &["cipherfleet/v1/agent.proto", "cipherfleet/v1/admin.proto"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Cargo runs build scripts in the package directory, so paths are relative to it.
    println!("cargo:rerun-if-changed=cipherfleet");
    let fds = protox::compile(PROTOS, ["."])?;
    tonic_prost_build::configure()
        // No `connect` constructors: they would force tonic's `channel` feature
        // on every user. Clients are built with `XClient::new(channel)`.
        .build_transport(false)
        // `Hello` carries the enrollment token and the host credential,
        // `Welcome` a new credential; their `Debug` is written by hand in
        // `redact.rs` so no secret reaches logs.
        .skip_debug([".cipherfleet.v1.Hello", ".cipherfleet.v1.Welcome"])
        // `Hello`, sent once per session, is the largest of an agent's messages
        // by far now that a result is its JSON alone. Boxing it would shrink the
        // other messages in flight but change every place a hello is built or
        // matched, in the agent, the coordinator and their tests.
        .enum_attribute(
            ".cipherfleet.v1.AgentMessage.body",
            "#[allow(clippy::large_enum_variant)]",
        )
        // Small per-call buffers: one call per agent session, thousands of them (`codec.rs`).
        .codec_path("crate::codec::LeanCodec")
        .compile_fds(fds)?;
    Ok(())
}
