//! The integrations' example binaries, for the tests that run them as
//! separate processes.

use std::path::PathBuf;

/// Example `name`'s binary, built beside the test (by `cargo test`, which
/// builds the examples; by `cargo build --example` when a test runs alone).
pub(crate) fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/<profile>/deps/<test>-<hash> -> target/<profile>/examples/
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>")
        .join("examples");
    let bin = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "-p", "idem-integrations", "--example", name])
            .status()
            .expect("cargo build -p idem-integrations --example");
        assert!(
            status.success(),
            "cargo build -p idem-integrations --example {name} failed"
        );
    }
    bin
}
