//! The README's quick start and the guide's test-kit snippet, built and
//! run as a newcomer's crate of its own (and its promise that the macros need no
//! dependency but idem, in a second crate): only the dependencies the README's
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

/// `cargo ARGS` in the crate at `dir`, which must succeed. The crates
/// share one target directory, so that idem is built once for them.
fn cargo(dir: &Path, args: &[&str]) {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("readme-target");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "`cargo {}` in {} failed:\n{}\n{}",
        args.join(" "),
        dir.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
}

#[test]
fn the_readme_builds_and_runs_as_a_crate_of_its_own() {
    let root = workspace();
    // The README's blocks, then the guide's (its test kit's example).
    let mut readme = fs::read_to_string(root.join("README.md")).expect("README.md");
    let mut chapters: Vec<_> = fs::read_dir(root.join("src/guide"))
        .expect("src/guide")
        .flatten()
        .map(|entry| entry.path())
        .collect();
    chapters.sort();
    for chapter in chapters {
        readme += &fs::read_to_string(chapter).expect("a chapter");
    }
    let krate = readme_crate(&readme);
    let paths: Vec<&str> = krate.files.iter().map(|(p, _)| p.as_str()).collect();
    assert!(
        paths.contains(&"src/main.rs") && paths.iter().any(|p| p.starts_with("tests/")),
        "README.md should hold the quick start (`// src/main.rs`), and it or the guide a \
         test (`// tests/NAME.rs`); found {paths:?}"
    );
    assert!(
        krate.manifest.contains("[dependencies]") && krate.manifest.contains("[dev-dependencies]"),
        "README.md's `# Cargo.toml` blocks should list the dependencies and dev-dependencies"
    );

    let dir = write_crate("readme", &krate.manifest, krate.files);
    cargo(&dir, &["run", "--quiet"]);
    cargo(&dir, &["test", "--quiet"]);
}

/// The README's promise that the macros need nothing but idem: a crate
/// whose only dependencies are idem-tools and tokio (for `main`) builds a
/// read and a write tool and calls them.
#[test]
fn the_macros_need_no_dependency_but_idem() {
    let manifest = "[dependencies]\nidem-tools = \"0.1\"\n\
                    tokio = { version = \"1\", features = [\"macros\", \"rt-multi-thread\"] }\n";
    let main = r##"
use idem::prelude::*;

/// Look an order up.
#[read_tool]
async fn order(id: u64, note: Option<String>) -> Result<String, String> {
    Ok(format!("order {id} {}", note.unwrap_or_default()))
}

/// Refund an order.
#[write_tool(key = [id], ignore = [reason])]
async fn refund(id: u64, reason: Option<String>, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = (reason, ctx.idem_key());
    Ok(id)
}

#[tokio::main]
async fn main() {
    let registry = Registry::builder(()).tool(order).tool(refund).build().unwrap();
    let args = r#"{"id": 7, "reason": "broken"}"#;
    let first = registry.call("run", "refund", args.into()).await.unwrap();
    let again = registry.call("run", "refund", r#"{"id": 7}"#.into()).await.unwrap();
    assert_eq!(first, again);
    registry.call("run", "order", r#"{"id": 7}"#.into()).await.unwrap();
}
"##;
    let dir = write_crate(
        "idem-alone",
        manifest,
        vec![("src/main.rs".into(), main.into())],
    );
    cargo(&dir, &["run", "--quiet"]);
}

/// Writes the crate `name`, with the manifest lines `dependencies` and
/// `files` by their paths, under the target directory (kept between runs,
/// so that a second run builds only what changed), idem taken from this
/// workspace; its folder.
fn write_crate(name: &str, dependencies: &str, files: Vec<(String, String)>) -> PathBuf {
    let root = workspace();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = fs::remove_dir_all(dir.join("src"));
    let _ = fs::remove_dir_all(dir.join("tests"));
    let published = ["idem-tools", "idem-runtime", "idem-macros", "idem-rules"];
    let patch: String = published
        .iter()
        .map(|krate| {
            let path = if *krate == "idem-tools" {
                root.clone()
            } else {
                root.join(krate)
            };
            format!("{krate} = {{ path = {:?} }}\n", path.display().to_string())
        })
        .collect();
    let manifest = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         {dependencies}\n[patch.crates-io]\n{patch}\n[workspace]\n",
    );
    for (path, text) in [("Cargo.toml".to_owned(), manifest)]
        .into_iter()
        .chain(files)
    {
        let file = dir.join(&path);
        fs::create_dir_all(file.parent().expect("a folder")).expect("the crate's folders");
        fs::write(&file, text).expect("a file of the crate");
    }
    // The workspace's versions of every dependency, as a user resolving
    // today would get: the lock file is pruned to what the crate uses.
    fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).expect("Cargo.lock");
    dir
}
