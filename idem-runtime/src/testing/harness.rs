//! The [`Harness`] a backend implements to run the suite, the harness of
//! [`MemoryStore`], one that runs the suite through `Arc<dyn IdemStore>`,
//! and the runtime each case runs on.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::key::{Fingerprint, IdemKey};
use crate::store::IdemStore;
use crate::store::memory::MemoryStore;

/// What the suite needs from a backend.
pub trait Harness: Send + Sync + 'static {
    /// The backend under test.
    type Store: IdemStore;

    /// The store, shared.
    fn store(&self) -> Arc<Self::Store>;

    /// Writes a record under `key` that the backend cannot understand
    /// (garbage bytes, a foreign format, an unknown version). For a backend
    /// that holds typed records, a recorded result that is not JSON.
    fn corrupt(&self, key: &IdemKey, fingerprint: &Fingerprint) -> impl Future<Output = ()> + Send;

    /// The address of the server the store talks to, so that the network
    /// fault cases can put a [`Proxy`](crate::testing::Proxy) in front of it. `None` (the default)
    /// for a store without a connection, where those cases have nothing to
    /// break and pass at once.
    fn server(&self) -> Option<SocketAddr> {
        None
    }

    /// Another store over the same records whose connections go to `addr`
    /// (a [`Proxy`](crate::testing::Proxy) in front of [`server`](Self::server)) instead of the
    /// server itself. Only called when `server` is `Some`.
    fn store_via(&self, addr: SocketAddr) -> impl Future<Output = Arc<Self::Store>> + Send {
        async move { panic!("this harness names no server, so nothing connects via {addr}") }
    }

    /// Removes what the harness created (a schema, a file), after each case
    /// that did not panic. Does nothing by default.
    fn cleanup(&self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// The suite's harness for [`MemoryStore`].
#[derive(Debug, Default)]
pub struct MemoryHarness {
    store: Arc<MemoryStore>,
}

impl MemoryHarness {
    /// A harness over a fresh store.
    pub fn new() -> MemoryHarness {
        MemoryHarness::default()
    }
}

impl Harness for MemoryHarness {
    type Store = MemoryStore;

    fn store(&self) -> Arc<MemoryStore> {
        self.store.clone()
    }

    async fn corrupt(&self, key: &IdemKey, fingerprint: &Fingerprint) {
        self.store
            .plant_done(key, fingerprint, "\u{0}{not json", Duration::from_secs(60));
    }
}

/// Runs the suite through `Arc<dyn IdemStore>`, as the registry holds
/// stores, instead of the backend's own type.
#[derive(Debug)]
pub struct Erased<H>(pub H);

impl<H: Harness> Harness for Erased<H> {
    type Store = Arc<dyn IdemStore>;

    fn store(&self) -> Arc<Arc<dyn IdemStore>> {
        let erased: Arc<dyn IdemStore> = self.0.store();
        Arc::new(erased)
    }

    fn corrupt(&self, key: &IdemKey, fingerprint: &Fingerprint) -> impl Future<Output = ()> + Send {
        self.0.corrupt(key, fingerprint)
    }

    fn server(&self) -> Option<SocketAddr> {
        self.0.server()
    }

    async fn store_via(&self, addr: SocketAddr) -> Arc<Arc<dyn IdemStore>> {
        let erased: Arc<dyn IdemStore> = self.0.store_via(addr).await;
        Arc::new(erased)
    }

    fn cleanup(&self) -> impl Future<Output = ()> + Send {
        self.0.cleanup()
    }
}

/// Runs `fut` on a fresh multi-threaded runtime; what the generated tests
/// call.
pub fn run<F: Future<Output = ()>>(fut: F) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build();
    match rt {
        Ok(rt) => rt.block_on(fut),
        Err(e) => panic!("could not start a Tokio runtime: {e}"),
    }
}
