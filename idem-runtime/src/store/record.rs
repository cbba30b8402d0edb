//! The record every durable backend keeps, decoded in one place: the state
//! names, the fingerprint and attempt as stored, and what a live record
//! means to a claim or a read. The byte layout of each backend is in
//! `docs/spec.md` ("Record formats"); golden records of every format ever
//! written are decoded by `tests/records.rs`.
//!
//! Redis records are one line of text, parsed by the Lua scripts on the
//! server; [`RunningLine`] writes the one a claim sets without a script
//! and the settled one that replaces it, [`settled_entry`] reads a recorded
//! outcome a claim gets back, and [`State::parse`] reads the state tags the
//! scripts answer.

#[cfg(any(feature = "sqlite", feature = "postgres"))]
use crate::error::StoreError;
use crate::key::Fingerprint;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use std::time::Duration;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
use crate::key::IdemKey;
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
use crate::store::contract::Entry;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use crate::store::inspect::{RecordInfo, ScanPage};
use crate::store::token::LeaseToken;

/// Where a record is in its life; the public [`RecordState`], by its
/// short name here.
pub(crate) use crate::store::inspect::RecordState as State;

/// A record's fields as a SQL backend reads them from its row.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) struct Row {
    pub(crate) state: String,
    pub(crate) fingerprint: Vec<u8>,
    pub(crate) attempt: i64,
    pub(crate) payload: Option<String>,
    /// Whether a running record's lease is still live; `None` when the row
    /// has no lease.
    pub(crate) lease_live: Option<bool>,
}

/// What a live (unexpired) record means.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Live {
    Running {
        fingerprint: Fingerprint,
        attempt: u32,
        lease_live: bool,
    },
    Released {
        attempt: u32,
    },
    Done {
        fingerprint: Fingerprint,
        result: String,
    },
    Failed {
        fingerprint: Fingerprint,
        error: String,
    },
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl Live {
    /// Decodes a row of the record under `key`; a row no version of idem
    /// wrote is [`StoreError::Corrupt`], saying what is wrong.
    pub(crate) fn decode(key: &str, row: Row) -> Result<Live, StoreError> {
        let corrupt = |why: String| StoreError::corrupt(key, why);
        let state = State::parse(&row.state)
            .ok_or_else(|| corrupt(format!("unknown state {:?}", row.state)))?;
        let fingerprint = fingerprint(key, &row.fingerprint)?;
        let attempt = attempt(key, row.attempt)?;
        // The payload (a result of up to `max_result_bytes`) moves, never copied.
        let missing = |what: &str| corrupt(format!("{} without {what}", state.as_str()));
        Ok(match state {
            State::Running => Live::Running {
                fingerprint,
                attempt,
                lease_live: row
                    .lease_live
                    .ok_or_else(|| corrupt("running without a lease".into()))?,
            },
            State::Released => Live::Released { attempt },
            State::Done => Live::Done {
                fingerprint,
                result: row.payload.ok_or_else(|| missing("a result"))?,
            },
            State::Failed => Live::Failed {
                fingerprint,
                error: row.payload.ok_or_else(|| missing("an error"))?,
            },
        })
    }

    /// The attempt number a new claim of this record takes, or `None`
    /// while it is held or settled.
    pub(crate) fn next_attempt(&self) -> Option<u32> {
        match self {
            Live::Running {
                attempt,
                lease_live: false,
                ..
            }
            | Live::Released { attempt } => Some(attempt.saturating_add(1)),
            _ => None,
        }
    }

    /// The entry a caller sees; `None` for a released record.
    pub(crate) fn into_entry(self) -> Option<Entry> {
        match self {
            Live::Running {
                fingerprint,
                attempt,
                ..
            } => Some(Entry::Running {
                fingerprint,
                attempt,
            }),
            Live::Released { .. } => None,
            Live::Done {
                fingerprint,
                result,
            } => Some(Entry::Done {
                result,
                fingerprint,
            }),
            Live::Failed { fingerprint, error } => Some(Entry::Failed { error, fingerprint }),
        }
    }
}

/// A fingerprint stored as its bytes ([`Fingerprint::to_bytes`]).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn fingerprint(key: &str, bytes: &[u8]) -> Result<Fingerprint, StoreError> {
    Fingerprint::from_bytes(bytes).ok_or_else(|| {
        StoreError::corrupt(
            key,
            "the fingerprint is not 32 bytes followed by whole field tags of 8",
        )
    })
}

/// What a SQL backend reads of a record for an operator: its row, with
/// its times as milliseconds from now by the store's clock.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) struct InfoRow {
    pub(crate) key: String,
    pub(crate) state: String,
    pub(crate) tool: Option<String>,
    pub(crate) fingerprint: Vec<u8>,
    pub(crate) attempt: i64,
    pub(crate) token: Option<Vec<u8>>,
    /// Since the record entered its state; `None` in a row of schema 1.
    pub(crate) age_ms: Option<i64>,
    /// Until a running record's lease lapses (negative once it has).
    pub(crate) lease_ms: Option<i64>,
    pub(crate) expires_ms: i64,
    pub(crate) payload: Option<String>,
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl InfoRow {
    /// The record as [`RecordInfo`]; a row no version of idem wrote is
    /// [`StoreError::Corrupt`].
    pub(crate) fn decode(self) -> Result<RecordInfo, StoreError> {
        let key = self.key;
        let corrupt = |why: String| StoreError::corrupt(&key, why);
        let state = State::parse(&self.state)
            .ok_or_else(|| corrupt(format!("unknown state {:?}", self.state)))?;
        let attempt = attempt(&key, self.attempt)?;
        let holder = match (state, self.token) {
            (State::Running, Some(token)) => Some(LeaseToken::from_parts(
                u128::from_be_bytes(
                    <[u8; 16]>::try_from(token.as_slice())
                        .map_err(|_| corrupt("the token is not 16 bytes".into()))?,
                ),
                attempt,
            )),
            (State::Running, None) => return Err(corrupt("running without a token".into())),
            _ => None,
        };
        if state == State::Running && self.lease_ms.is_none() {
            return Err(corrupt("running without a lease".into()));
        }
        Ok(RecordInfo {
            fingerprint: fingerprint(&key, &self.fingerprint)?,
            state,
            tool: self.tool,
            attempt,
            age: self.age_ms.map(positive_ms),
            lease_left: self
                .lease_ms
                .filter(|_| state == State::Running)
                .map(positive_ms),
            expires_in: positive_ms(self.expires_ms),
            holder,
            payload: self.payload,
            key: IdemKey::from_raw(key),
        })
    }
}

/// A page of a scan along the primary key (`key > cursor ORDER BY key
/// LIMIT limit`) decoded from its `rows`: the next page starts after the
/// last key when this one is full; a page less than full ends the scan.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn keyset_page(rows: Vec<InfoRow>, limit: i64) -> Result<ScanPage, StoreError> {
    let full = i64::try_from(rows.len()).is_ok_and(|n| n >= limit);
    let next = rows.last().filter(|_| full).map(|row| row.key.clone());
    let records = rows
        .into_iter()
        .map(InfoRow::decode)
        .collect::<Result<_, _>>()?;
    Ok(ScanPage::new(records, next))
}

/// A span of milliseconds, zero if negative.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn positive_ms(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// An attempt number stored as an integer.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn attempt(key: &str, stored: impl TryInto<u32>) -> Result<u32, StoreError> {
    stored
        .try_into()
        .map_err(|_| StoreError::corrupt(key, "bad attempt"))
}

/// The Redis record of a running claim, as the claim writes it, and the
/// settled record its holder writes over it: `2|running|<fingerprint
/// hex>|<attempt>|<tool>|<life>|<token hex>|` in format 2,
/// `1|running|<fingerprint hex>|<attempt>|<token hex>|` in format 1
/// (`scripts/prelude.lua` writes the same bytes).
#[cfg(feature = "redis")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunningLine {
    text: String,
    /// Where the life's digits are (format 2).
    life: Option<std::ops::Range<usize>>,
}

#[cfg(feature = "redis")]
impl RunningLine {
    /// The record of `token`'s claim in `format`, of tool `tool`,
    /// expiring in `life` ms.
    pub(crate) fn new(
        format: u32,
        fingerprint: &Fingerprint,
        tool: &str,
        life: u64,
        token: &LeaseToken,
    ) -> RunningLine {
        // Built piece by piece: this is on every claim's path.
        let mut text = String::with_capacity(128 + tool.len());
        text.push_str(if format == 1 { "1|" } else { "2|" });
        text.push_str(State::Running.as_str());
        text.push('|');
        push_fingerprint(&mut text, format, fingerprint);
        text.push('|');
        text.push_str(itoa::Buffer::new().format(token.attempt()));
        text.push('|');
        let mut life_at = None;
        if format != 1 {
            text.push_str(tool);
            text.push('|');
            let start = text.len();
            text.push_str(itoa::Buffer::new().format(life));
            life_at = Some(start..text.len());
            text.push('|');
        }
        token.push_id_hex(&mut text);
        text.push('|');
        RunningLine {
            text,
            life: life_at,
        }
    }

    /// The record as stored.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// The record that settles this one into `state` (done, failed,
    /// released), kept `keep_ms`, all but its payload: the same
    /// fingerprint, attempt, tool and token, the life replaced by
    /// `keep_ms`.
    pub(crate) fn settled_head(&self, state: State, keep_ms: u64) -> String {
        // Both formats start with the version, then `|running|`.
        const RUNNING: usize = "1|running|".len();
        let mut head = String::with_capacity(self.text.len() + 8);
        head.push_str(&self.text[..2]);
        head.push_str(state.as_str());
        head.push('|');
        match &self.life {
            None => head.push_str(&self.text[RUNNING..]),
            Some(life) => {
                head.push_str(&self.text[RUNNING..life.start]);
                head.push_str(itoa::Buffer::new().format(keep_ms));
                head.push_str(&self.text[life.end..]);
            }
        }
        head
    }
}

/// Appends `fingerprint` as a Redis record of `format` holds it: whole in
/// format 2; format 1's readers take 64 digits only, so there its field
/// tags are left out (and a conflict names no field).
#[cfg(feature = "redis")]
pub(crate) fn push_fingerprint(out: &mut String, format: u32, fingerprint: &Fingerprint) {
    if format == 1 {
        crate::key::push_hex(out, fingerprint.digest());
    } else {
        fingerprint.push_hex(out);
    }
}

/// The outcome a Redis record holds, read back by a claim's `SET .. NX
/// GET`: the entry to replay when `line` is a well-formed `done` or
/// `failed` record of format 1 or 2, else `None`. A running or released
/// record, a format this version does not know or anything malformed goes
/// to the CLAIM script, which reads it with every check
/// (`scripts/prelude.lua`): this reader accepts a subset of what the
/// script accepts, never more, so it can only save a round trip, never
/// decide differently.
#[cfg(feature = "redis")]
pub(crate) fn settled_entry(line: &[u8]) -> Option<Entry> {
    let line = std::str::from_utf8(line).ok()?;
    let (version, rest) = line.split_once('|')?;
    // Format 1: state|fp|attempt|token|payload; format 2 adds the tool
    // and the life after the attempt.
    let fields = match version {
        "1" => 4,
        "2" => 6,
        _ => return None,
    };
    let mut parts = rest.splitn(fields + 1, '|');
    let state = State::parse(parts.next()?)?;
    let fingerprint = parts.next()?;
    if version == "1" && fingerprint.len() != 64 {
        return None; // format 1 has no field tags
    }
    let fingerprint = Fingerprint::from_hex(fingerprint)?;
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    if !digits(parts.next()?) {
        return None;
    }
    if version == "2" {
        parts.next()?; // the tool: anything but `|`
        if !digits(parts.next()?) {
            return None;
        }
    }
    if !hex(parts.next()?) {
        return None;
    }
    let payload = parts.next()?.to_owned();
    match state {
        State::Done => Some(Entry::Done {
            result: payload,
            fingerprint,
        }),
        State::Failed => Some(Entry::Failed {
            error: payload,
            fingerprint,
        }),
        State::Running | State::Released => None,
    }
}

#[cfg(all(test, feature = "redis"))]
mod tests {
    use super::*;

    const FP: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    const TOKEN: &str = "0123456789abcdef0123456789abcdef";
    /// One field tag: 4 bytes of the path's hash, 4 of the value's.
    const TAG: &str = "a1b2c3d4e5f60718";

    #[test]
    fn a_settled_redis_record_is_replayed_from_its_line() {
        let fingerprint = Fingerprint::from_hex(FP).unwrap();
        let done = format!("2|done|{FP}|0|charge|8000|{TOKEN}|{{\"id\":1}}");
        assert_eq!(
            settled_entry(done.as_bytes()),
            Some(Entry::Done {
                result: "{\"id\":1}".into(),
                fingerprint: fingerprint.clone()
            })
        );
        // Format 1, a payload holding `|`, a record settled before tokens.
        let failed = format!("1|failed|{FP}|3||declined | code 51");
        assert_eq!(
            settled_entry(failed.as_bytes()),
            Some(Entry::Failed {
                error: "declined | code 51".into(),
                fingerprint
            })
        );
        // Field tags after the digest (format 2).
        let tagged = format!("2|done|{FP}{TAG}|0|charge|8000|{TOKEN}|r");
        let entry = settled_entry(tagged.as_bytes()).expect("a tagged record");
        assert_eq!(entry.fingerprint().to_hex(), format!("{FP}{TAG}"));
    }

    /// The settled record a holder writes is the claim's with the state,
    /// the life and the payload changed, as `scripts/settle.lua` writes it.
    #[test]
    fn a_running_line_settles_into_the_scripts_record() {
        let fingerprint = Fingerprint::from_hex(FP).unwrap();
        let token = LeaseToken::from_parts(0x0123456789abcdef0123456789abcdef, 3);
        let running = RunningLine::new(2, &fingerprint, "charge", 30_030_000, &token);
        assert_eq!(
            running.as_str(),
            format!("2|running|{FP}|3|charge|30030000|{TOKEN}|")
        );
        assert_eq!(
            running.settled_head(State::Done, 86_400_000),
            format!("2|done|{FP}|3|charge|86400000|{TOKEN}|")
        );
        let old = RunningLine::new(1, &fingerprint, "charge", 30_030_000, &token);
        assert_eq!(old.as_str(), format!("1|running|{FP}|3|{TOKEN}|"));
        // Field tags follow the digest in format 2; format 1 leaves them out.
        let tagged = Fingerprint::from_hex(&format!("{FP}{TAG}")).unwrap();
        let running = RunningLine::new(2, &tagged, "charge", 8000, &token);
        assert_eq!(
            running.as_str(),
            format!("2|running|{FP}{TAG}|3|charge|8000|{TOKEN}|")
        );
        let running = RunningLine::new(1, &tagged, "charge", 8000, &token);
        assert_eq!(running.as_str(), format!("1|running|{FP}|3|{TOKEN}|"));
        assert_eq!(
            old.settled_head(State::Released, 60_000),
            format!("1|released|{FP}|3|{TOKEN}|")
        );
    }

    /// Whatever the reader does not fully recognise goes to the script.
    #[test]
    fn anything_else_is_left_to_the_claim_script() {
        for line in [
            format!("2|running|{FP}|0|charge|8000|{TOKEN}|"),
            format!("2|released|{FP}|1|charge|8000|{TOKEN}|"),
            format!("3|done|{FP}|0|charge|8000|{TOKEN}|r"),
            format!("2|done|{}|0|charge|8000|{TOKEN}|r", &FP[1..]),
            format!("2|done|{FP}|x|charge|8000|{TOKEN}|r"),
            format!("2|done|{FP}|0|charge|8s|{TOKEN}|r"),
            format!("2|done|{FP}|0|charge|8000|{TOKEN}"),
            format!("2|finished|{FP}|0|charge|8000|{TOKEN}|r"),
            format!("1|done|{FP}|0|not-hex|r"),
            format!("1|done|{FP}{TAG}|0|{TOKEN}|r"),
            format!("2|done|{FP}{}|0|charge|8000|{TOKEN}|r", &TAG[1..]),
            "garbage".to_owned(),
        ] {
            assert_eq!(settled_entry(line.as_bytes()), None, "{line}");
        }
        assert_eq!(settled_entry(b"2|done|\xff"), None);
    }
}
