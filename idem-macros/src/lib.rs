//! Attribute macros of idem. Use them through the `idem` crate.
