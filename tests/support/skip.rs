//! Services are never skipped silently: without one a test prints why and
//! how to get it, and under `CI=true` it fails instead. Shared by the
//! facade's tests and the integrations' (`integrations/tests`).

/// Whether this run is CI, where a missing service is a failure.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Reports a missing service: a panic under CI, a printed skip otherwise.
pub(crate) fn unavailable(what: &str, how: &str) {
    let message = format!("{what} is not available. {how}");
    if in_ci() {
        panic!("CI=true and {message}");
    }
    eprintln!("SKIPPED (not in CI): {message}");
}
