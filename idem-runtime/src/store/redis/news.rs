//! How a [`RedisStore`](super::RedisStore) carries announcements between
//! processes ([`IdemStore::announce`](crate::IdemStore::announce)): a
//! `PUBLISH` on one channel, the key as the message, heard on a pub/sub
//! connection of the store's own: to the server, or to any node of a
//! cluster, whose `PUBLISH` reaches every node.

use std::pin::pin;

use futures_core::Stream;
use redis::Cmd;

use super::error::store_error;
use crate::key::IdemKey;
use crate::store::news::Teller;

/// The channel a store announces changed records on.
const NEWS_CHANNEL: &str = "idem:news";

/// The command that announces `key`.
pub(super) fn publish(key: &IdemKey) -> Cmd {
    let mut publish = redis::cmd("PUBLISH");
    publish.arg(NEWS_CHANNEL).arg(key.as_str());
    publish
}

/// Listens for the announcements on a pub/sub connection made by
/// `client`, telling each key heard to `teller`, until the connection
/// ends (`Ok`) or fails.
pub(super) async fn listen(client: redis::Client, teller: Teller) -> Result<(), String> {
    let failed = |e| store_error(e).to_string();
    let mut pubsub = client.get_async_pubsub().await.map_err(failed)?;
    pubsub.subscribe(NEWS_CHANNEL).await.map_err(failed)?;
    let mut messages = pin!(pubsub.into_on_message());
    while let Some(message) = std::future::poll_fn(|cx| messages.as_mut().poll_next(cx)).await {
        if let Ok(key) = message.get_payload::<String>() {
            teller.tell(&key);
        }
    }
    Ok(())
}
