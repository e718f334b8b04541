use crate::helpers::*;

#[test]
fn probe_json_has_facts_and_paths() {
    let o = run(&["probe", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["arch"], std::env::consts::ARCH);
    assert_eq!(v["build"]["flavour"], "accelerated");
    assert!(v["crypto"]["backends"]["aes"].is_string());
    assert!(v["features"]["checked"].as_array().unwrap().iter().any(|f| f == "aes"));
    // How this binary was compiled: the profile the tests run under.
    let profile = if cfg!(debug_assertions) { "dev" } else { "release" };
    assert_eq!(v["build"]["codegen"]["profile"], profile, "{}", v["build"]);
    assert!(v["build"]["codegen"]["codegen_units"].as_u64().unwrap() >= 1);
}

#[test]
fn probe_table_is_readable() {
    let o = run(&["probe"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("kernel"), "{out}");
}

#[test]
fn selftest_passes_in_both_builds() {
    let o = run(&["selftest"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("known-answer tests (accelerated build)"),
        "{}",
        stdout(&o)
    );
    if require_soft_sibling() {
        let o = run_with(soft_sibling(), &["selftest"], &[]);
        assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
        assert!(
            stdout(&o).contains("known-answer tests (software build)"),
            "{}",
            stdout(&o)
        );
    }
}
