//! The process-wide rustls crypto provider that a `rediss://` store's
//! client needs: *ring*, unless the application chose one first.

/// Installs *ring* as rustls's process-wide provider, unless one is.
pub(crate) fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Fails only if another thread installed one first: fine either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
