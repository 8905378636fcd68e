//! What one instance's shared cache forgets, the others forget too: each instance publishes
//! what its cache forgets because of a write or a purge on a Redis channel, and forgets what
//! the others publish there.
//!
//! Redis delivers a published message to the subscribers connected at that moment, and no
//! later: while an instance's subscription is down it hears nothing, so once it is back the
//! instance forgets everything it stores (it cannot know what it missed). A write's answer
//! does not wait for the others to forget (they hear within a round trip to Redis, in the
//! usual case).

use std::time::Duration;

use crate::connection::Redis;
use ifmatch_cache::{Forgotten, SharedCacheHandle};

/// Shares `cache`'s invalidations with every instance on `channel` of the Redis `connection`
/// reaches: publishes what it forgets over it, and forgets, until the runtime stops, what the
/// others publish (subscribed to its master, again after a failover).
pub fn share_invalidations(connection: Redis, channel: &str, cache: SharedCacheHandle) {
    let me = uuid::Uuid::new_v4().simple().to_string();
    let (channel, own) = (channel.to_owned(), me.clone());
    let publishing = channel.clone();
    let publisher = connection.clone();
    cache.on_forget(move |forgotten| {
        let message = encode(&own, forgotten);
        let (mut connection, channel) = (publisher.clone(), publishing.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let sent: redis::RedisResult<()> = redis::cmd("PUBLISH")
                    .arg(channel)
                    .arg(message)
                    .query_async(&mut connection)
                    .await;
                if let Err(error) = sent {
                    tracing::warn!(%error, "an invalidation was not published");
                }
            });
        }
    });
    tokio::spawn(listen(connection, channel, me, cache));
}

/// Forgets what the others publish on `channel`, reconnecting (and forgetting everything)
/// after a loss.
async fn listen(connection: Redis, channel: String, me: String, cache: SharedCacheHandle) {
    use futures_util::StreamExt;
    let mut lost = false;
    loop {
        let subscribed = async {
            let mut pubsub = connection.client().await?.get_async_pubsub().await?;
            pubsub.subscribe(&channel).await?;
            redis::RedisResult::Ok(pubsub)
        };
        match subscribed.await {
            Ok(pubsub) => {
                if lost {
                    let forgotten = cache.forget(Forgotten::Prefix(""));
                    tracing::info!(
                        forgotten,
                        "invalidations heard again; the cache starts empty"
                    );
                }
                let mut messages = pubsub.into_on_message();
                while let Some(message) = messages.next().await {
                    let Ok(text) = message.get_payload::<String>() else {
                        continue;
                    };
                    if let Some(forgotten) = decode(&text, &me) {
                        cache.forget(forgotten);
                    }
                }
                tracing::warn!("the invalidation channel was lost; reconnecting");
            }
            Err(error) => tracing::warn!(%error, "cannot subscribe to invalidations; retrying"),
        }
        lost = true;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A message: the sender, `K` or `P`, and the key or prefix.
fn encode(me: &str, forgotten: Forgotten<'_>) -> String {
    match forgotten {
        Forgotten::Key(key) => format!("{me} K {key}"),
        Forgotten::Prefix(prefix) => format!("{me} P {prefix}"),
    }
}

/// What a message from another instance says is forgotten (`None`: ours, or not one).
fn decode<'a>(message: &'a str, me: &str) -> Option<Forgotten<'a>> {
    let (sender, rest) = message.split_once(' ')?;
    if sender == me {
        return None;
    }
    match rest.split_once(' ')? {
        ("K", key) => Some(Forgotten::Key(key)),
        ("P", prefix) => Some(Forgotten::Prefix(prefix)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_ours_are_skipped() {
        for forgotten in [Forgotten::Key("h /a b"), Forgotten::Prefix("h /")] {
            let message = encode("me", forgotten);
            assert_eq!(decode(&message, "other"), Some(forgotten));
            assert_eq!(decode(&message, "me"), None);
        }
        assert_eq!(decode("x Q y", "me"), None);
    }
}
