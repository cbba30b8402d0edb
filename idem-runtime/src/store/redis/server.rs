//! What a Redis server is, read from its `HELLO` reply, for the one
//! feature beyond Redis 7.0 that a [`RedisStore`](super::RedisStore) uses
//! when it is there: `SET .. IFEQ`, a native compare-and-set.

use redis::Value as RValue;

use super::error::as_bytes;

/// Whether the server answering `hello` takes `SET key value IFEQ
/// current`: Valkey 8.1 and later, Redis 8.4 and later. Anything else,
/// including a server that speaks the protocol under another name or a
/// version it does not give as numbers, is not asked: a server that
/// ignored an option it does not know would write without comparing.
pub(super) fn compares_and_sets(hello: &RValue) -> bool {
    let (mut server, mut version) = (None, None);
    for (name, value) in fields(hello) {
        match name {
            b"server" => server = text(value),
            b"version" => version = text(value).and_then(release),
            _ => {}
        }
    }
    match (server, version) {
        (Some("valkey"), Some(v)) => v >= (8, 1),
        (Some("redis"), Some(v)) => v >= (8, 4),
        _ => false,
    }
}

/// The name and value pairs of a `HELLO` reply: a map in RESP3, a flat
/// array of names and values in RESP2.
fn fields(hello: &RValue) -> Vec<(&[u8], &RValue)> {
    match hello {
        RValue::Map(pairs) => pairs
            .iter()
            .filter_map(|(k, v)| Some((as_bytes(k)?, v)))
            .collect(),
        RValue::Array(items) => items
            .chunks_exact(2)
            .filter_map(|pair| Some((as_bytes(&pair[0])?, &pair[1])))
            .collect(),
        _ => Vec::new(),
    }
}

fn text(v: &RValue) -> Option<&str> {
    std::str::from_utf8(as_bytes(v)?).ok()
}

/// A version's major and minor numbers: `8.1.0` → `(8, 1)`.
fn release(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(server: &str, version: &str) -> RValue {
        let s = |t: &str| RValue::BulkString(t.as_bytes().to_vec());
        RValue::Array(vec![
            s("server"),
            s(server),
            s("version"),
            s(version),
            s("proto"),
            RValue::Int(2),
        ])
    }

    #[test]
    fn only_the_servers_that_have_set_ifeq_are_asked_for_it() {
        for (server, version, native) in [
            ("valkey", "8.1.0", true),
            ("valkey", "8.1.4", true),
            ("valkey", "9.0.0", true),
            ("valkey", "255.255.255", true), // built from its unstable branch
            ("valkey", "8.0.2", false),
            ("redis", "8.4.0", true),
            ("redis", "8.2.1", false),
            ("redis", "7.0.15", false),
            // Valkey with `extended-redis-compatibility` gives Redis 7.2.4.
            ("redis", "7.2.4", false),
            ("dragonfly", "9.9.9", false),
            ("redis", "8", false),
            ("redis", "eight.four", false),
        ] {
            assert_eq!(
                compares_and_sets(&hello(server, version)),
                native,
                "{server} {version}"
            );
        }
        // RESP3 answers a map.
        let s = |t: &str| RValue::SimpleString(t.to_owned());
        let map = RValue::Map(vec![(s("server"), s("valkey")), (s("version"), s("8.1.1"))]);
        assert!(compares_and_sets(&map));
        assert!(!compares_and_sets(&RValue::Nil));
        assert!(!compares_and_sets(&RValue::Array(vec![s("server")])));
    }
}
