//! Compile-time contract of `#[read_tool]` / `#[write_tool]`: every
//! rejection in `tests/ui/fail` fails with its `.stderr`, every program in
//! `tests/ui/pass` compiles.
//!
//! Compiler diagnostics change between releases, so the `.stderr` files are
//! tied to the compiler they were made with; on another compiler this test
//! says so instead of failing. To regenerate them:
//! `TRYBUILD=overwrite cargo test -p idem-checks --test ui`, then read the diff.

#[rustversion::attr(
    not(stable(1.95)),
    ignore = "the .stderr files were made with rustc 1.95; regenerate them with TRYBUILD=overwrite"
)]
#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
