//! What an operator reads of a [`RedisStore`](super::RedisStore): one
//! record through the INSPECT script, and the records of a namespace by
//! `SCAN .. MATCH` — on a cluster, node by node over its primaries, the
//! cursor naming the node (`<host>:<port>@<cursor>`) — each page's records
//! read in one pipeline.

use redis::Value as RValue;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};

use super::RedisStore;
use super::connection::Conn;
use super::error::{as_text, connection_lost, store_error};
use super::record::State;
use super::scripts::scripts;
use crate::error::StoreError;
use crate::key::{Fingerprint, IdemKey};
use crate::store::{LeaseToken, RecordInfo, ScanFilter, ScanPage};

impl RedisStore {
    /// The record under `key` as INSPECT reads it, with its payload if
    /// `payload`.
    pub(super) async fn read_info(
        &self,
        key: &IdemKey,
        payload: bool,
    ) -> Result<Option<RecordInfo>, StoreError> {
        let with_payload: &[u8] = if payload { b"1" } else { b"0" };
        match self.eval(&scripts().inspect, key, &[with_payload]).await?.0 {
            RValue::Nil => Ok(None),
            RValue::Array(parts) => decode(key, &parts, payload).map(Some),
            other => Err(StoreError::corrupt(
                key.as_str(),
                format!("unexpected reply to inspect: {other:?}"),
            )),
        }
    }

    /// One page of the records `filter` admits from `cursor`.
    pub(super) async fn scan_page(
        &self,
        filter: &ScanFilter,
        cursor: &str,
        limit: usize,
    ) -> Result<ScanPage, StoreError> {
        let mut scan = redis::cmd("SCAN");
        let (keys, next) = if !self.conns.is_cluster() {
            let at: u64 = parse_cursor(cursor)?;
            scan.arg(at)
                .arg("MATCH")
                .arg(pattern(filter))
                .arg("COUNT")
                .arg(limit.max(1));
            let (next, keys): (u64, Vec<String>) = self.query(&scan).await.map_err(store_error)?;
            (keys, (next != 0).then(|| next.to_string()))
        } else {
            let primaries = self.primaries().await?;
            let (node, at) = match cursor.rsplit_once('@') {
                Some((node, at)) => (node.to_owned(), parse_cursor(at)?),
                None if cursor.is_empty() => match primaries.first() {
                    Some(first) => (first.clone(), 0),
                    None => return Ok(ScanPage::default()),
                },
                None => return Err(bad_cursor(cursor)),
            };
            let (host, port) = node
                .rsplit_once(':')
                .and_then(|(h, p)| Some((h.to_owned(), p.parse().ok()?)))
                .ok_or_else(|| bad_cursor(cursor))?;
            scan.arg(at)
                .arg("MATCH")
                .arg(pattern(filter))
                .arg("COUNT")
                .arg(limit.max(1));
            let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port });
            let reply = self
                .conns
                .send(async |conn| match conn {
                    Conn::Cluster(mut conn) => {
                        conn.route_command(scan.clone(), route.clone()).await
                    }
                    Conn::Single(_) => unreachable!("a cluster's store has a cluster connection"),
                })
                .await
                .map_err(store_error)?;
            let (next, keys): (u64, Vec<String>) =
                redis::from_redis_value(reply).map_err(|e| StoreError::backend(e.to_string()))?;
            let next = if next != 0 {
                Some(format!("{node}@{next}"))
            } else {
                // The next primary in address order, from its start.
                primaries
                    .iter()
                    .find(|p| **p > node)
                    .map(|p| format!("{p}@0"))
            };
            (keys, next)
        };
        let mut records = self.read_infos(keys).await?;
        records.retain(|record| filter.admits(record));
        Ok(ScanPage::new(records, next))
    }

    /// The records under `keys` (one node's), without payloads, skipping
    /// those gone since SCAN saw them: the first alone (which loads the
    /// script on its node if it lacks it), the rest in one pipeline. A
    /// pipeline a server refused (a corrupt record) is read again key by
    /// key, so that the error names its key.
    async fn read_infos(&self, keys: Vec<String>) -> Result<Vec<RecordInfo>, StoreError> {
        let keys: Vec<IdemKey> = keys.into_iter().map(IdemKey::from_raw).collect();
        let Some((first, rest)) = keys.split_first() else {
            return Ok(Vec::new());
        };
        let mut records: Vec<RecordInfo> =
            self.read_info(first, false).await?.into_iter().collect();
        let mut pipe = redis::pipe();
        let (verb, script) = self.invocation(&scripts().inspect);
        for key in rest {
            pipe.cmd(verb).arg(script).arg(1).arg(key.as_str()).arg("0");
        }
        let sent: Result<Vec<RValue>, _> = self
            .conns
            .send(async |mut conn| pipe.query_async(&mut conn).await)
            .await;
        let replies = match sent {
            Ok(replies) => replies,
            Err(e) if connection_lost(&e) || e.is_timeout() => return Err(store_error(e)),
            Err(_) => {
                for key in rest {
                    records.extend(self.read_info(key, false).await?);
                }
                return Ok(records);
            }
        };
        for (key, reply) in rest.iter().zip(replies) {
            match reply {
                RValue::Nil => {}
                RValue::Array(parts) => records.push(decode(key, &parts, false)?),
                other => {
                    return Err(StoreError::corrupt(
                        key.as_str(),
                        format!("unexpected reply to inspect: {other:?}"),
                    ));
                }
            }
        }
        Ok(records)
    }

    /// The addresses (`host:port`) of the cluster's primaries that serve
    /// slots, sorted, from `CLUSTER NODES`.
    async fn primaries(&self) -> Result<Vec<String>, StoreError> {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("NODES");
        let nodes: String = self.query(&cmd).await.map_err(store_error)?;
        let mut primaries: Vec<String> = nodes
            .lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let flags = fields.get(2)?;
                let serves = fields.len() > 8;
                let primary = flags.split(',').any(|f| f == "master")
                    && !flags.split(',').any(|f| f == "fail" || f == "noaddr");
                let address = fields.get(1)?.split(['@', ',']).next()?;
                (primary && serves).then(|| address.to_owned())
            })
            .collect();
        primaries.sort();
        Ok(primaries)
    }
}

/// The `SCAN .. MATCH` pattern of every key of the filter's namespace: its
/// prefix with glob characters escaped, then `*`.
fn pattern(filter: &ScanFilter) -> String {
    let mut pattern = String::new();
    for c in filter.key_prefix().chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('*');
    pattern
}

fn parse_cursor(at: &str) -> Result<u64, StoreError> {
    if at.is_empty() {
        return Ok(0);
    }
    at.parse().map_err(|_| bad_cursor(at))
}

fn bad_cursor(cursor: &str) -> StoreError {
    StoreError::backend(format!("{cursor:?} is not a cursor this store gave out"))
}

/// Decodes INSPECT's `{state, fp, attempt, token, tool, age, lease, pttl,
/// payload, about}` (`about` empty when the record says nothing).
fn decode(key: &IdemKey, parts: &[RValue], payload: bool) -> Result<RecordInfo, StoreError> {
    let corrupt = |why: &str| StoreError::corrupt(key.as_str(), why.to_owned());
    let field = |i: usize| {
        parts
            .get(i)
            .and_then(as_text)
            .ok_or_else(|| corrupt("short reply"))
    };
    let number = |i: usize| -> Result<i64, StoreError> {
        field(i)?.parse().map_err(|_| corrupt("bad number"))
    };
    let ms = |n: i64| std::time::Duration::from_millis(u64::try_from(n).unwrap_or(0));
    let state = State::parse(&field(0)?).ok_or_else(|| corrupt("unknown state"))?;
    let attempt = u32::try_from(number(2)?).map_err(|_| corrupt("bad attempt"))?;
    let running = state == State::Running;
    let holder = if running || matches!(state, State::Unknown | State::Awaiting | State::Approved) {
        let id = u128::from_str_radix(&field(3)?, 16).map_err(|_| corrupt("bad token"))?;
        Some(LeaseToken::from_parts(id, attempt))
    } else {
        None
    };
    let tool = field(4)?;
    let age = number(5)?;
    let about = field(9)?;
    Ok(RecordInfo {
        key: key.clone(),
        state,
        tool: (!tool.is_empty()).then_some(tool),
        attempt,
        fingerprint: Fingerprint::from_hex(&field(1)?).ok_or_else(|| corrupt("bad fingerprint"))?,
        age: (age >= 0).then(|| ms(age)),
        lease_left: running.then(|| number(6)).transpose()?.map(ms),
        expires_in: ms(number(7)?),
        holder,
        payload: if payload
            && matches!(
                state,
                State::Done | State::Failed | State::Unknown | State::Awaiting
            ) {
            Some(field(8)?)
        } else {
            None
        },
        about: (!about.is_empty()).then_some(about),
    })
}
