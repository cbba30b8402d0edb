//! The README's quick start and test-kit snippet, built and run as a
//! newcomer's crate of its own: only the dependencies the README's
//! `Cargo.toml` blocks list, with idem taken from this workspace. The
//! crate's doctests compile the same blocks, but inside idem-tools, where
//! its dev-dependencies hide a dependency the README forgets.
//!
//! A block is part of the crate when its first line names where it goes:
//! `# Cargo.toml` for a block of manifest lines, `// src/main.rs` or
//! `// tests/NAME.rs` for a Rust file. `src/main.rs` is run (its asserts
//! are the quick start's promises) and every test file is run as a test.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace's root: this test lives in `checks/`.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the workspace root")
}

/// A fenced block of the README: its info string and its lines.
struct Block {
    info: String,
    lines: Vec<String>,
}

/// Every fenced block of `markdown`, in order.
fn blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for line in markdown.lines() {
        match (open.take(), line.strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_owned(),
                    lines: Vec::new(),
                })
            }
            (Some(block), Some(_)) => blocks.push(block),
            (Some(mut block), None) => {
                block.lines.push(line.to_owned());
                open = Some(block);
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "README.md ends inside a fenced block");
    blocks
}

/// The README's crate: manifest lines, and files by their paths.
struct Crate {
    manifest: String,
    files: Vec<(String, String)>,
}

fn readme_crate(readme: &str) -> Crate {
    let mut manifest = String::new();
    let mut files = Vec::new();
    for block in blocks(readme) {
        let Some((first, rest)) = block.lines.split_first() else {
            continue;
        };
        let body = rest.join("\n") + "\n";
        let lang = block.info.split(',').next().unwrap_or_default();
        match (lang, first.trim()) {
            ("toml", "# Cargo.toml") => manifest.push_str(&body),
            ("rust", first) => {
                if let Some(path) = first.strip_prefix("// ").filter(|p| p.ends_with(".rs")) {
                    assert!(
                        path == "src/main.rs" || path.starts_with("tests/"),
                        "README.md: a file block goes in src/main.rs or tests/, not {path}"
                    );
                    files.push((path.to_owned(), body));
                }
            }
            _ => {}
        }
    }
    Crate { manifest, files }
}

/// `cargo ARGS` in the crate at `dir`, which must succeed.
fn cargo(dir: &Path, target: &Path, args: &[&str]) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "`cargo {}` on the README's crate failed:\n{}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
}

#[test]
fn the_readme_builds_and_runs_as_a_crate_of_its_own() {
    let root = workspace();
    let readme = fs::read_to_string(root.join("README.md")).expect("README.md");
    let krate = readme_crate(&readme);
    let paths: Vec<&str> = krate.files.iter().map(|(p, _)| p.as_str()).collect();
    assert!(
        paths.contains(&"src/main.rs") && paths.iter().any(|p| p.starts_with("tests/")),
        "README.md should hold the quick start (`// src/main.rs`) and a test \
         (`// tests/NAME.rs`); found {paths:?}"
    );
    assert!(
        krate.manifest.contains("[dependencies]") && krate.manifest.contains("[dev-dependencies]"),
        "README.md's `# Cargo.toml` blocks should list the dependencies and dev-dependencies"
    );

    // Kept under the target directory between runs, so that a second run
    // builds only what changed.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("readme-crate");
    let _ = fs::remove_dir_all(dir.join("src"));
    let _ = fs::remove_dir_all(dir.join("tests"));
    let published = ["idem-tools", "idem-runtime", "idem-macros", "idem-rules"];
    let patch: String = published
        .iter()
        .map(|name| {
            let path = if *name == "idem-tools" {
                root.clone()
            } else {
                root.join(name)
            };
            format!("{name} = {{ path = {:?} }}\n", path.display().to_string())
        })
        .collect();
    let manifest = format!(
        "[package]\nname = \"readme\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         {}\n[patch.crates-io]\n{patch}\n[workspace]\n",
        krate.manifest
    );
    for (path, text) in [("Cargo.toml".to_owned(), manifest)]
        .into_iter()
        .chain(krate.files)
    {
        let file = dir.join(&path);
        fs::create_dir_all(file.parent().expect("a folder")).expect("the crate's folders");
        fs::write(&file, text).expect("a file of the crate");
    }
    // The workspace's versions of every dependency, as a user resolving
    // today would get: the lock file is pruned to what the crate uses.
    fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).expect("Cargo.lock");

    let target = dir.join("target");
    cargo(&dir, &target, &["run", "--quiet"]);
    cargo(&dir, &target, &["test", "--quiet"]);
}
