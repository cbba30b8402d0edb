//! Every relative link of the project's markdown resolves: the file it
//! names is there, and so is the heading its `#anchor` names (as GitHub
//! makes anchors of headings). Links to the web are not followed, nor
//! rustdoc's intra-doc links (`cargo doc` checks those); links inside
//! fenced blocks and code spans are not links.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The workspace's root: this test lives in `checks/`.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the workspace root")
}

/// The markdown files a reader follows links in: the root's, docs/, the
/// guide's chapters and the packages' pages.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in [
        "",
        "docs",
        "src/guide",
        "packaging/pypi",
        "packaging/npm/idem-mcp",
    ] {
        let Ok(entries) = fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The text of `markdown` outside fenced blocks, line by line (with their
/// numbers), code spans blanked.
fn prose(markdown: &str) -> Vec<(usize, String)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (n, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut out = String::with_capacity(line.len());
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            }
            out.push(if in_code { ' ' } else { c });
        }
        lines.push((n + 1, out));
    }
    lines
}

/// The targets of the inline links `[text](target)` in `line`.
fn targets(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].split_whitespace().next().unwrap_or_default();
        found.push(target.to_owned());
        rest = &after[end..];
    }
    found
}

/// The anchors GitHub gives the headings of `markdown`: lowercased, each
/// space a hyphen, anything but letters, digits, `-` and `_` dropped; a
/// repeated one gets `-1`, `-2`, ...
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let Some(heading) = line.strip_prefix('#').filter(|_| !fenced) else {
            continue;
        };
        let text = heading.trim_start_matches('#').trim();
        let base: String = text
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let root = workspace();
    let mut broken = Vec::new();
    let files = markdown_files(&root);
    assert!(files.len() >= 8, "found only {files:?}");
    for file in &files {
        let text = fs::read_to_string(file).expect("read the markdown");
        for (n, line) in prose(&text) {
            for target in targets(&line) {
                // The web is not followed; rustdoc's intra-doc links
                // (`crate::guide::..`) are `cargo doc`'s to check.
                let intra_doc = target.contains("::") && !target.contains('/');
                if target.contains("://")
                    || target.starts_with("mailto:")
                    || target.is_empty()
                    || intra_doc
                {
                    continue;
                }
                let (path, anchor) = match target.split_once('#') {
                    Some((path, anchor)) => (path, Some(anchor)),
                    None => (target.as_str(), None),
                };
                let shown = format!(
                    "{}:{n}: {target}",
                    file.strip_prefix(&root).unwrap_or(file).display()
                );
                let linked = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().expect("a folder").join(path)
                };
                if !linked.exists() {
                    broken.push(format!("{shown} (no such file)"));
                    continue;
                }
                if let Some(anchor) = anchor {
                    let heads = fs::read_to_string(&linked)
                        .map(|t| anchors(&t))
                        .unwrap_or_default();
                    if !heads.contains(anchor) {
                        broken.push(format!("{shown} (no such heading)"));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    let made =
        anchors("# What a write tool guarantees\n## `idem console`: a page\n## Keys\n## Keys\n");
    let expected: BTreeSet<String> = [
        "what-a-write-tool-guarantees",
        "idem-console-a-page",
        "keys",
        "keys-1",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(made, expected);
    assert_eq!(
        targets("see [a](b.md#c) and [d](https://e) `[f](g)`"),
        ["b.md#c", "https://e", "g"]
    );
}
