//! [`DynIdemStore`], the object-safe twin of [`IdemStore`] that the
//! registry holds stores as, and the forwarding that makes every store one,
//! an `Arc` of a store a store, and an erased store a store again.
//!
//! The operations are listed once, in [`operations!`]; the trait and the
//! three forwarding implementations are generated from that list, so a new
//! operation is added in one place (and in [`IdemStore`], which documents
//! it).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::contract::{Claim, Entry, IdemStore};
use super::inspect::{RecordInfo, ScanFilter, ScanPage};
use super::token::LeaseToken;
use crate::error::StoreError;
use crate::key::{Fingerprint, IdemKey};

/// A boxed, `Send` future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Calls `$then!` with every store operation: its name, its object-safe
/// twin's name, the parameters it borrows, those it takes by value, and
/// what it answers.
macro_rules! operations {
    ($then:ident) => {
        $then! {
            claim, dyn_claim(key: IdemKey, tool: str, fingerprint: Fingerprint; lease: Duration) -> Claim;
            complete, dyn_complete(key: IdemKey, token: LeaseToken, result: str; ttl: Duration) -> ();
            release, dyn_release(key: IdemKey, token: LeaseToken;) -> ();
            fail, dyn_fail(key: IdemKey, token: LeaseToken, error: str; ttl: Duration) -> ();
            renew, dyn_renew(key: IdemKey, token: LeaseToken; lease: Duration) -> ();
            get, dyn_get(key: IdemKey;) -> Option<Entry>;
            purge_expired, dyn_purge_expired(;) -> u64;
            count_expired, dyn_count_expired(;) -> u64;
            inspect, dyn_inspect(key: IdemKey;) -> Option<RecordInfo>;
            scan, dyn_scan(filter: ScanFilter, cursor: str; limit: usize) -> ScanPage;
        }
    };
}

/// Generates [`DynIdemStore`] and its implementation for every store.
macro_rules! dyn_store {
    ($(
        $op:ident, $dyn_op:ident($($r:ident: $rty:ty),*; $($v:ident: $vty:ty),*) -> $out:ty;
    )*) => {
        /// The object-safe twin of [`IdemStore`], implemented for every
        /// `IdemStore`; what `Arc<dyn DynIdemStore>` erases to. Each method
        /// is the `IdemStore` operation of the same name, boxed.
        pub trait DynIdemStore: Send + Sync + 'static {
            /// [`IdemStore::backend`].
            fn dyn_backend(&self) -> &'static str;

            $(
                #[doc = concat!("[`IdemStore::", stringify!($op), "`], boxed.")]
                fn $dyn_op<'a>(
                    &'a self,
                    $($r: &'a $rty,)*
                    $($v: $vty,)*
                ) -> BoxFuture<'a, Result<$out, StoreError>>;
            )*
        }

        impl<T: IdemStore> DynIdemStore for T {
            fn dyn_backend(&self) -> &'static str {
                self.backend()
            }

            $(
                fn $dyn_op<'a>(
                    &'a self,
                    $($r: &'a $rty,)*
                    $($v: $vty,)*
                ) -> BoxFuture<'a, Result<$out, StoreError>> {
                    Box::pin(self.$op($($r,)* $($v,)*))
                }
            )*
        }
    };
}

/// Generates the implementations of [`IdemStore`] that forward to another
/// store: through an `Arc`, and through an erased store.
macro_rules! forwarding_stores {
    ($(
        $op:ident, $dyn_op:ident($($r:ident: $rty:ty),*; $($v:ident: $vty:ty),*) -> $out:ty;
    )*) => {
        /// A shared store is a store: keep an `Arc` to inspect what the
        /// registry wrote.
        impl<T: IdemStore> IdemStore for Arc<T> {
            fn backend(&self) -> &'static str {
                (**self).backend()
            }

            $(
                fn $op(
                    &self,
                    $($r: &$rty,)*
                    $($v: $vty,)*
                ) -> impl Future<Output = Result<$out, StoreError>> + Send {
                    (**self).$op($($r,)* $($v,)*)
                }
            )*
        }

        /// An erased store is a store, so generic code (the conformance
        /// suite, say) runs against `Arc<dyn DynIdemStore>` too.
        impl IdemStore for Arc<dyn DynIdemStore> {
            fn backend(&self) -> &'static str {
                (**self).dyn_backend()
            }

            $(
                fn $op(
                    &self,
                    $($r: &$rty,)*
                    $($v: $vty,)*
                ) -> impl Future<Output = Result<$out, StoreError>> + Send {
                    // One lifetime for all the borrows: the async block's.
                    async move { (**self).$dyn_op($($r,)* $($v,)*).await }
                }
            )*
        }
    };
}

operations!(dyn_store);
operations!(forwarding_stores);
