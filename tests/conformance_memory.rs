//! The store conformance suite against `MemoryStore`, directly and erased.

mod direct {
    idem::conformance_tests!(async { Some(idem::testing::MemoryHarness::new()) });
}

mod erased {
    idem::conformance_tests!(async {
        Some(idem::testing::Erased(idem::testing::MemoryHarness::new()))
    });
}
