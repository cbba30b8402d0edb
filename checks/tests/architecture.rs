//! The shape of the source tree, checked so that it stays as the crate docs
//! describe it:
//!
//! - the files of each crate import one another one way: no file imports a
//!   file that imports it back, directly or through others;
//! - every library file opens with a comment saying what it is for;
//! - no library function is longer than 80 lines unless a comment right
//!   above it, starting `// Long:`, says why;
//! - no library file holds more than 600 lines of code (comments, blank
//!   lines and its unit tests not counted);
//! - every test `docs/spec.md` names as showing a guarantee exists;
//! - a store that wraps another (`impl<S: IdemStore> IdemStore for ..`)
//!   forwards every operation of the trait: a default left in place would
//!   silently answer `Unsupported` for the store it wraps.
//!
//! Run with `--nocapture` to see the import graph, file by file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The library crates of the workspace, by source folder.
const CRATES: &[&str] = &[
    "idem-runtime/src",
    "idem-macros/src",
    "idem-rules/src",
    "src",
    "cli/src",
];

/// The longest function the library keeps without a reason.
const MAX_FN_LINES: usize = 80;

/// The most lines of code a library file holds.
const MAX_FILE_CODE_LINES: usize = 600;

/// One library file: where it is, its module path and its parsed text.
/// The workspace's root: this test lives in `checks/`.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

struct SourceFile {
    path: PathBuf,
    module: Vec<String>,
    text: String,
    ast: syn::File,
}

fn source_files(root: &str) -> Vec<SourceFile> {
    let base = workspace().join(root);
    let mut files: Vec<SourceFile> = rust_files(&base)
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("a readable source file");
            let ast = syn::parse_file(&text)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
            let module = module_path(&base, &path);
            SourceFile {
                path,
                module,
                text,
                ast,
            }
        })
        .collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}

/// `engine/mod.rs` is `engine`, `engine/hold.rs` is `engine::hold`, `lib.rs` the root.
fn module_path(base: &Path, path: &Path) -> Vec<String> {
    let relative = path
        .strip_prefix(base)
        .expect("under the crate's source folder");
    let mut module: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(
        module.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        let _ = module.pop();
    }
    module
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Meta>()
                .is_ok_and(|meta| meta.path().is_ident("test"))
    })
}

/// The module paths a file names (through `crate::`, `super::`, `self::` or
/// a child module), made absolute; test-only modules are left out.
struct Mentions<'a> {
    module: Vec<String>,
    children: &'a BTreeSet<Vec<String>>,
    found: BTreeSet<Vec<String>>,
    /// `use` items that re-export: the name they give and the path they name.
    reexports: BTreeMap<String, Vec<String>>,
}

impl Mentions<'_> {
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let (first, rest) = segments.split_first()?;
        match first.as_str() {
            "crate" => Some(rest.to_vec()),
            "self" => Some(self.module.iter().chain(rest).cloned().collect()),
            "super" => {
                let mut base = self.module.clone();
                let mut rest = segments;
                while rest.first().is_some_and(|s| s == "super") {
                    let _ = base.pop();
                    rest = &rest[1..];
                }
                Some(base.into_iter().chain(rest.iter().cloned()).collect())
            }
            // A lone name (`claim`) is a local or an item in scope; only
            // a path through it (`claim::run`) names a child module.
            _ if rest.is_empty() => None,
            _ => {
                let child: Vec<String> = self.module.iter().chain([first]).cloned().collect();
                self.children
                    .contains(&child)
                    .then(|| child.into_iter().chain(rest.iter().cloned()).collect())
            }
        }
    }

    fn note(&mut self, segments: &[String], reexport: bool) {
        if let Some(path) = self.absolute(segments) {
            if let (true, Some(name)) = (reexport, path.last()) {
                let _ = self.reexports.insert(name.clone(), path.clone());
            }
            let _ = self.found.insert(path);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree, reexport: bool) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree, reexport);
                let _ = prefix.pop();
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.note(&prefix.clone(), reexport);
                let _ = prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.note(&prefix.clone(), false);
                let _ = prefix.pop();
            }
            syn::UseTree::Glob(_) => self.note(&prefix.clone(), false),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree, reexport);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Mentions<'_> {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if is_test_only(&item.attrs) {
            return;
        }
        if item.content.is_some() {
            self.module.push(item.ident.to_string());
            syn::visit::visit_item_mod(self, item);
            let _ = self.module.pop();
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        if is_test_only(&item.attrs) {
            return;
        }
        let reexport = !matches!(item.vis, syn::Visibility::Inherited);
        self.use_tree(&mut Vec::new(), &item.tree, reexport);
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if !is_test_only(&item.attrs) {
            syn::visit::visit_item_fn(self, item);
        }
    }

    // `pub(crate)` names a module but imports nothing.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.note(&segments, false);
        syn::visit::visit_path(self, path);
    }
}

/// Which file defines what a path names: the file of its longest module
/// prefix, followed through that file's re-exports.
fn resolve(
    path: &[String],
    modules: &BTreeMap<Vec<String>, usize>,
    reexports: &[BTreeMap<String, Vec<String>>],
) -> Option<usize> {
    let mut path = path.to_vec();
    for _ in 0..8 {
        let (length, &file) = (0..=path.len())
            .rev()
            .find_map(|n| modules.get(&path[..n]).map(|f| (n, f)))?;
        match path.get(length).and_then(|name| reexports[file].get(name)) {
            Some(target) if target != &path => {
                path = target.iter().chain(&path[length + 1..]).cloned().collect();
            }
            _ => return Some(file),
        }
    }
    None
}

/// For each file, the files it imports.
fn import_graph(files: &[SourceFile]) -> Vec<BTreeSet<usize>> {
    let modules: BTreeMap<Vec<String>, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.module.clone(), i))
        .collect();
    let children: BTreeSet<Vec<String>> = modules.keys().cloned().collect();
    let mentions: Vec<Mentions<'_>> = files
        .iter()
        .map(|file| {
            let mut m = Mentions {
                module: file.module.clone(),
                children: &children,
                found: BTreeSet::new(),
                reexports: BTreeMap::new(),
            };
            m.visit_file(&file.ast);
            m
        })
        .collect();
    let reexports: Vec<_> = mentions.iter().map(|m| m.reexports.clone()).collect();
    mentions
        .iter()
        .enumerate()
        .map(|(i, m)| {
            m.found
                .iter()
                .filter_map(|path| resolve(path, &modules, &reexports))
                .filter(|&target| target != i)
                .collect()
        })
        .collect()
}

/// The groups of files that import one another (Tarjan's strongly connected
/// components with more than one file).
fn cycles(graph: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    struct Walk<'a> {
        graph: &'a [BTreeSet<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on_stack: Vec<bool>,
        next: usize,
        found: Vec<Vec<usize>>,
    }
    impl Walk<'_> {
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.next);
            self.low[v] = self.next;
            self.next += 1;
            self.stack.push(v);
            self.on_stack[v] = true;
            for &w in self.graph[v].iter() {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(index) if self.on_stack[w] => self.low[v] = self.low[v].min(index),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut group = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack[w] = false;
                    group.push(w);
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort_unstable();
                    self.found.push(group);
                }
            }
        }
    }
    let n = graph.len();
    let mut walk = Walk {
        graph,
        index: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on_stack: vec![false; n],
        next: 0,
        found: Vec::new(),
    };
    for v in 0..n {
        if walk.index[v].is_none() {
            walk.visit(v);
        }
    }
    walk.found
}

fn name(file: &SourceFile) -> String {
    let root = workspace();
    file.path
        .strip_prefix(root)
        .unwrap_or(&file.path)
        .display()
        .to_string()
}

#[test]
fn files_import_one_another_one_way() {
    let mut problems = Vec::new();
    for root in CRATES {
        let files = source_files(root);
        let graph = import_graph(&files);
        println!("{root}:");
        for (file, imports) in files.iter().zip(&graph) {
            let names: Vec<String> = imports.iter().map(|&i| name(&files[i])).collect();
            println!(
                "  {} ({} lines) -> {}",
                name(file),
                file.text.lines().count(),
                names.join(", ")
            );
        }
        for group in cycles(&graph) {
            let names: Vec<String> = group.iter().map(|&i| name(&files[i])).collect();
            problems.push(format!(
                "these files import one another: {}",
                names.join(", ")
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_library_file_says_what_it_is_for() {
    let missing: Vec<String> = CRATES
        .iter()
        .flat_map(|root| source_files(root))
        .filter(|file| !file.text.trim_start().starts_with("//"))
        .map(|file| name(&file))
        .collect();
    assert!(
        missing.is_empty(),
        "these files do not open with a comment saying what they are for: {missing:?}"
    );
}

/// Every function with a body: its name, the line of its name and its
/// length in lines.
struct Functions {
    found: Vec<(String, usize, usize)>,
}

impl Functions {
    fn note(&mut self, name: &syn::Ident, block: &syn::Block) {
        use syn::spanned::Spanned;
        let start = name.span().start().line;
        let lines = block.span().end().line + 1 - start;
        self.found.push((name.to_string(), start, lines));
    }
}

impl<'ast> Visit<'ast> for Functions {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if !is_test_only(&item.attrs) {
            syn::visit::visit_item_mod(self, item);
        }
    }
    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        self.note(&item.sig.ident, &item.block);
        syn::visit::visit_item_fn(self, item);
    }
    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        self.note(&item.sig.ident, &item.block);
        syn::visit::visit_impl_item_fn(self, item);
    }
    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if let Some(block) = &item.default {
            self.note(&item.sig.ident, block);
        }
        syn::visit::visit_trait_item_fn(self, item);
    }
}

/// Whether the lines just above `line` (1-based) hold a `// Long:` comment,
/// looking up past doc comments and attributes.
fn reason_given(text: &str, line: usize) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    lines[..line.saturating_sub(1)]
        .iter()
        .rev()
        .map(|l| l.trim())
        .take_while(|l| l.starts_with("//") || l.starts_with("#["))
        .any(|l| l.starts_with("// Long:"))
}

#[test]
fn library_functions_are_short_or_say_why_not() {
    let mut long = Vec::new();
    for root in CRATES {
        for file in source_files(root) {
            let mut functions = Functions { found: Vec::new() };
            functions.visit_file(&file.ast);
            for (function, start, lines) in functions.found {
                if lines > MAX_FN_LINES && !reason_given(&file.text, start) {
                    long.push(format!(
                        "{}:{start} `{function}` ({lines} lines)",
                        name(&file)
                    ));
                }
            }
        }
    }
    assert!(
        long.is_empty(),
        "split these functions into the steps a reader follows, or say above them \
         why not in a `// Long:` comment:\n{}",
        long.join("\n")
    );
}

/// The lines of code of `text`: neither blank nor a comment, and before its
/// unit tests (a `#[cfg(test)]` at the start of a line).
fn code_lines(text: &str) -> usize {
    text.lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .count()
}

#[test]
fn library_files_stay_under_the_size_a_reader_holds() {
    let large: Vec<String> = CRATES
        .iter()
        .flat_map(|root| source_files(root))
        .map(|file| (code_lines(&file.text), file))
        .filter(|(lines, _)| *lines > MAX_FILE_CODE_LINES)
        .map(|(lines, file)| format!("{} ({lines} lines of code)", name(&file)))
        .collect();
    assert!(
        large.is_empty(),
        "split these files by the roles their parts play (at most {MAX_FILE_CODE_LINES} lines of code each):\n{}",
        large.join("\n")
    );
}

/// The tests: the test files, the conformance cases among them, and the
/// unit tests of the crates' sources (each file from its `#[cfg(test)]` on).
fn test_sources() -> String {
    let root = workspace();
    let mut text = String::new();
    let whole = [
        root.join("tests"),
        root.join("integrations/tests"),
        root.join("cli/tests"),
        root.join("checks/tests"),
        root.join("idem-runtime/src/testing"),
    ];
    let unit = [root.join("idem-runtime/src"), root.join("idem-macros/src")];
    for (dir, whole_files) in whole
        .iter()
        .map(|d| (d, true))
        .chain(unit.iter().map(|d| (d, false)))
    {
        for path in rust_files(dir) {
            let file = std::fs::read_to_string(&path).expect("a readable source file");
            let tests = match whole_files {
                true => Some(file.as_str()),
                false => file.find("#[cfg(test)]").map(|at| &file[at..]),
            };
            text.push_str(tests.unwrap_or_default());
        }
    }
    text
}

/// The `.rs` files under `dir`, in every subfolder.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source folder") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

/// The methods of the trait `name` in the runtime, and each impl of it for
/// a type generic over an implementor of it (a wrapper), with the methods
/// that impl writes.
fn wrappers_of(name: &str) -> (BTreeSet<String>, Vec<(String, BTreeSet<String>)>) {
    let methods = |items: &mut dyn Iterator<Item = String>| items.collect::<BTreeSet<_>>();
    let (mut declared, mut wrappers) = (BTreeSet::new(), Vec::new());
    for file in source_files("idem-runtime/src") {
        for item in &file.ast.items {
            match item {
                syn::Item::Trait(t) if t.ident == name => {
                    declared = methods(&mut t.items.iter().filter_map(|i| match i {
                        syn::TraitItem::Fn(f) => Some(f.sig.ident.to_string()),
                        _ => None,
                    }));
                }
                syn::Item::Impl(i)
                    if i.trait_.as_ref().is_some_and(|(_, path, _)| {
                        path.segments.last().is_some_and(|s| s.ident == name)
                    }) && i.generics.type_params().any(|p| {
                        p.bounds.iter().any(|b| {
                            matches!(b, syn::TypeParamBound::Trait(t)
                                if t.path.segments.last().is_some_and(|s| s.ident == name))
                        })
                    }) =>
                {
                    let written = methods(&mut i.items.iter().filter_map(|i| match i {
                        syn::ImplItem::Fn(f) => Some(f.sig.ident.to_string()),
                        _ => None,
                    }));
                    let ty = match &*i.self_ty {
                        syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
                        _ => None,
                    };
                    let ty = ty.unwrap_or_default();
                    wrappers.push((format!("{} ({ty})", file.path.display()), written));
                }
                _ => {}
            }
        }
    }
    (declared, wrappers)
}

#[test]
fn a_wrapping_store_forwards_every_operation() {
    let (declared, wrappers) = wrappers_of("IdemStore");
    assert!(declared.len() >= 9, "the trait's methods: {declared:?}");
    assert!(
        wrappers.len() >= 2,
        "the Arc impl and the fault injector: {wrappers:?}"
    );
    for (at, written) in wrappers {
        let missing: Vec<_> = declared.difference(&written).collect();
        assert!(
            missing.is_empty(),
            "{at} wraps a store but leaves {missing:?} to the trait's defaults: forward them"
        );
    }
}

#[test]
fn the_spec_names_only_tests_that_exist() {
    let spec = std::fs::read_to_string(workspace().join("docs/spec.md")).expect("docs/spec.md");
    let guarantees = &spec[spec.find("## Guarantees").expect("a Guarantees section")..];
    let sources = test_sources();
    // Test names are snake case of three words or more, in backticks.
    let named: BTreeSet<&str> = guarantees
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|word| {
            word.matches('_').count() >= 2
                && word
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        })
        .collect();
    assert!(named.len() > 40, "the Guarantees section names its tests");
    let missing: Vec<&str> = named
        .into_iter()
        .filter(|name| {
            !sources.contains(&format!("fn {name}(")) && !sources.contains(&format!("fn {name}<"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/spec.md names tests that do not exist (renamed? update the spec): {missing:?}"
    );
}
