//! The Redis record: one line of text, parsed by the Lua scripts on the
//! server. [`RunningLine`] writes the one a claim sets without a script and
//! the settled one that replaces it, [`settled_entry`] reads a recorded
//! outcome a claim gets back, and [`State::parse`] reads the state tags the
//! scripts answer. The layout is in `docs/spec.md` ("Record formats").

use crate::key::Fingerprint;
use crate::store::contract::Entry;
use crate::store::token::LeaseToken;

/// Where a record is in its life: the public `RecordState`, by the short
/// name the scripts' answers are read with.
pub(super) use crate::store::inspect::RecordState as State;

/// The Redis record of a running claim, as the claim writes it, and the
/// settled record its holder writes over it: `4|running|<fingerprint
/// hex>|<attempt>|<tool>|<life>|<retention>|<about's length>|<about>|<token
/// hex>|` in format 4; format 3 without the retention, format 2 without
/// the about either (`2|running|<fingerprint
/// hex>|<attempt>|<tool>|<life>|<token hex>|`), format 1 without the tool
/// and life (`1|running|<fingerprint hex>|<attempt>|<token hex>|`).
/// `scripts/prelude.lua` writes the same bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunningLine {
    text: String,
    /// Where the life's digits are (formats 2 and 3).
    life: Option<std::ops::Range<usize>>,
    /// Where the fingerprint's hex is.
    fingerprint: std::ops::Range<usize>,
}

impl RunningLine {
    /// The record of `token`'s claim in `format`, of tool `tool`,
    /// expiring in `life` ms, kept `retention` ms after its lease (format
    /// 4), saying `about` (format 3 and later).
    pub(crate) fn new(
        format: u32,
        fingerprint: &Fingerprint,
        tool: &str,
        life: u64,
        retention: u64,
        token: &LeaseToken,
        about: &str,
    ) -> RunningLine {
        // Built piece by piece, in one allocation: this is on every claim's
        // path. At most: the format, the state and eleven `|` (20 bytes),
        // the fingerprint's hex, four decimal numbers (20 digits each), the
        // token's hex digits.
        let room = 20 + fingerprint.hex_len() + 4 * 20 + LeaseToken::ID_HEX_LEN;
        let mut text = String::with_capacity(room + tool.len() + about.len());
        text.push_str(match format {
            1 => "1|",
            2 => "2|",
            3 => "3|",
            _ => "4|",
        });
        text.push_str(State::Running.as_str());
        text.push('|');
        let fingerprint_at = text.len();
        push_fingerprint(&mut text, format, fingerprint);
        let fingerprint_at = fingerprint_at..text.len();
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
        if format >= 4 {
            text.push_str(itoa::Buffer::new().format(retention));
            text.push('|');
        }
        if format >= 3 {
            text.push_str(itoa::Buffer::new().format(about.len()));
            text.push('|');
            text.push_str(about);
            text.push('|');
        }
        token.push_id_hex(&mut text);
        text.push('|');
        RunningLine {
            text,
            life: life_at,
            fingerprint: fingerprint_at,
        }
    }

    /// The fingerprint as the line writes it.
    pub(crate) fn fingerprint_hex(&self) -> &[u8] {
        &self.text.as_bytes()[self.fingerprint.clone()]
    }

    /// The record as stored.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// The record that settles this one into `state` (done, failed,
    /// released) with `payload`, kept `keep_ms`: the same fingerprint,
    /// attempt, tool, retention, about and token, the life replaced by
    /// `keep_ms`. Returns it and the length of its head, all but the
    /// payload.
    pub(crate) fn settled(&self, state: State, keep_ms: u64, payload: &[u8]) -> (Vec<u8>, usize) {
        // Every format starts with the version, then `|running|`.
        const RUNNING: usize = "1|running|".len();
        let text = self.text.as_bytes();
        let mut record = Vec::with_capacity(text.len() + 8 + payload.len());
        record.extend_from_slice(&text[..2]);
        record.extend_from_slice(state.as_str().as_bytes());
        record.push(b'|');
        match &self.life {
            None => record.extend_from_slice(&text[RUNNING..]),
            Some(life) => {
                record.extend_from_slice(&text[RUNNING..life.start]);
                record.extend_from_slice(itoa::Buffer::new().format(keep_ms).as_bytes());
                record.extend_from_slice(&text[life.end..]);
            }
        }
        let head = record.len();
        record.extend_from_slice(payload);
        (record, head)
    }
}

/// Appends `fingerprint` as a Redis record of `format` holds it: whole in
/// formats 2 and later; format 1's readers take 64 digits only, so there its field
/// tags are left out (and a conflict names no field).
pub(crate) fn push_fingerprint(out: &mut String, format: u32, fingerprint: &Fingerprint) {
    if format == 1 {
        crate::key::push_hex(out, fingerprint.digest());
    } else {
        fingerprint.push_hex(out);
    }
}

/// The outcome a Redis record holds, read back by a claim's `SET .. NX
/// GET`: the entry to replay when `line` is a well-formed `done` or
/// `failed` record of format 1 to 4, else `None`. A running or released
/// record, a format this version does not know or anything malformed goes
/// to the CLAIM script, which reads it with every check
/// (`scripts/prelude.lua`): this reader accepts a subset of what the
/// script accepts, never more, so it can only save a round trip, never
/// decide differently.
///
/// `ours` is the claim's own fingerprint as a line of format 2 or later
/// writes it, and the fingerprint itself: a record that holds the same
/// (every duplicate's) is not parsed again.
pub(crate) fn settled_entry(
    mut line: Vec<u8>,
    ours: Option<(&[u8], &Fingerprint)>,
) -> Option<Entry> {
    let (state, fingerprint, payload_at) = settled_head(&line, ours)?;
    // The payload keeps the reply's buffer: this is every duplicate's path.
    line.drain(..payload_at);
    let payload = String::from_utf8(line).ok()?;
    match state {
        Settled::Done => Some(Entry::Done {
            result: payload,
            fingerprint,
        }),
        Settled::Failed => Some(Entry::Failed {
            error: payload,
            fingerprint,
        }),
    }
}

/// The states [`settled_entry`] reads: the others go to the script.
enum Settled {
    Done,
    Failed,
}

/// What comes before a settled record's payload: its state, its
/// fingerprint, and where the payload starts.
fn settled_head(
    line: &[u8],
    ours: Option<(&[u8], &Fingerprint)>,
) -> Option<(Settled, Fingerprint, usize)> {
    // Read as bytes, field by field: only the payload needs to be text.
    let mut fields = Fields(line);
    let format = match fields.next()? {
        b"1" => 1,
        b"2" => 2,
        b"3" => 3,
        b"4" => 4,
        _ => return None,
    };
    let format_2 = format >= 2;
    let state = match fields.next()? {
        b"done" => Settled::Done,
        b"failed" => Settled::Failed,
        _ => return None,
    };
    let fingerprint = match ours {
        // A duplicate's usual case: the record holds the claim's own.
        Some((hex, ours)) if format_2 && fields.skip(hex) => ours.clone(),
        _ => {
            let field = fields.next()?;
            if !format_2 && field.len() != 64 {
                return None; // format 1 has no field tags
            }
            Fingerprint::from_hex(std::str::from_utf8(field).ok()?)?
        }
    };
    let digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
    if !digits(fields.next()?) {
        return None;
    }
    if format_2 {
        fields.next()?; // the tool: anything but `|`
        if !digits(fields.next()?) {
            return None;
        }
    }
    if format >= 4 && !digits(fields.next()?) {
        return None; // the retention
    }
    if format >= 3 {
        fields.skip_about()?;
    }
    fields.skip_token()?;
    Some((state, fingerprint, line.len() - fields.0.len()))
}

/// The `|`-ended fields of a record, front first; what is left after the
/// last one read is the payload.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn next(&mut self) -> Option<&'a [u8]> {
        // Byte by byte: the fields before the payload are short, where
        // `memchr`'s set-up costs more than it saves.
        let end = self.0.iter().position(|&b| b == b'|')?;
        let field = &self.0[..end];
        self.0 = &self.0[end + 1..];
        Some(field)
    }

    /// Passes the next field if it is `expected`, without searching for
    /// its end.
    fn skip(&mut self, expected: &[u8]) -> bool {
        let n = expected.len();
        let matches = self.0.get(n) == Some(&b'|') && &self.0[..n] == expected;
        if matches {
            self.0 = &self.0[n + 1..];
        }
        matches
    }

    /// Passes the token, hex digits (none in a record settled before
    /// tokens): the usual [`LeaseToken::ID_HEX_LEN`] of them without
    /// searching for the field's end.
    fn skip_token(&mut self) -> Option<()> {
        const DIGITS: usize = LeaseToken::ID_HEX_LEN;
        let token = if self.0.get(DIGITS) == Some(&b'|') {
            let token = &self.0[..DIGITS];
            self.0 = &self.0[DIGITS + 1..];
            token
        } else {
            self.next()?
        };
        token.iter().all(u8::is_ascii_hexdigit).then_some(())
    }

    /// Passes the about (format 3 and later): its length, then that many bytes and `|`.
    fn skip_about(&mut self) -> Option<()> {
        let n = decimal(self.next()?)?;
        if self.0.get(n) != Some(&b'|') {
            return None;
        }
        self.0 = &self.0[n + 1..];
        Some(())
    }
}

/// `digits` as a decimal number: at least one digit and nothing else, the
/// length of a field (what `str::parse::<usize>` reads, without its
/// sign, read from bytes).
fn decimal(digits: &[u8]) -> Option<usize> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0usize, |n, &d| {
        let digit = d.checked_sub(b'0').filter(|d| *d <= 9)?;
        n.checked_mul(10)?.checked_add(usize::from(digit))
    })
}

#[cfg(test)]
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
            settled_entry(done.into(), None),
            Some(Entry::Done {
                result: "{\"id\":1}".into(),
                fingerprint: fingerprint.clone()
            })
        );
        // Format 1, a payload holding `|`, a record settled before tokens.
        let failed = format!("1|failed|{FP}|3||declined | code 51");
        assert_eq!(
            settled_entry(failed.into(), None),
            Some(Entry::Failed {
                error: "declined | code 51".into(),
                fingerprint: fingerprint.clone()
            })
        );
        // Field tags after the digest (format 2).
        let tagged = format!("2|done|{FP}{TAG}|0|charge|8000|{TOKEN}|r");
        let entry = settled_entry(tagged.clone().into(), None).expect("a tagged record");
        assert_eq!(entry.fingerprint().to_hex(), format!("{FP}{TAG}"));
        // A duplicate's own fingerprint is taken as it is, not parsed;
        // another one is read from the record.
        let ours = entry.fingerprint().clone();
        let hex = ours.to_hex();
        let same = settled_entry(tagged.clone().into(), Some((hex.as_bytes(), &ours)));
        assert_eq!(same.map(|e| e.fingerprint().clone()), Some(ours.clone()));
        let other = Fingerprint::from_hex(FP).expect("a digest alone");
        let read = settled_entry(tagged.clone().into(), Some((FP.as_bytes(), &other)));
        assert_eq!(read.map(|e| e.fingerprint().to_hex()), Some(hex));
        // Format 3: an about holding `|`, and an empty one.
        let about = r#"{"arguments":{"memo":"a|b"}}"#;
        let done = format!(
            "3|done|{FP}|0|charge|8000|{}|{about}|{TOKEN}|r|s",
            about.len()
        );
        assert_eq!(
            settled_entry(done.into(), None),
            Some(Entry::Done {
                result: "r|s".into(),
                fingerprint
            })
        );
        let bare = format!("3|done|{FP}|0|charge|8000|0||{TOKEN}|r");
        assert!(settled_entry(bare.into(), None).is_some());
        // Format 4: the claim's retention before the about.
        let done = format!("4|done|{FP}|0|charge|8000|86400000|0||{TOKEN}|r|s");
        assert_eq!(
            settled_entry(done.into(), None).map(|e| e.fingerprint().to_hex()),
            Some(FP.to_owned())
        );
    }

    /// The settled record a holder writes is the claim's with the state,
    /// the life and the payload changed, as `scripts/settle.lua` writes it.
    #[test]
    fn a_running_line_settles_into_the_scripts_record() {
        let fingerprint = Fingerprint::from_hex(FP).unwrap();
        let token = LeaseToken::from_parts(0x0123456789abcdef0123456789abcdef, 3);
        let about = r#"{"arguments":{"memo":"a|b"}}"#;
        let running = RunningLine::new(
            4,
            &fingerprint,
            "charge",
            86_430_000,
            86_400_000,
            &token,
            about,
        );
        assert_eq!(
            running.as_str(),
            format!("4|running|{FP}|3|charge|86430000|86400000|28|{about}|{TOKEN}|")
        );
        let head = format!("4|done|{FP}|3|charge|86400000|86400000|28|{about}|{TOKEN}|");
        assert_eq!(
            running.settled(State::Done, 86_400_000, b"{\"id\":7}"),
            (format!("{head}{{\"id\":7}}").into_bytes(), head.len())
        );
        let running = RunningLine::new(3, &fingerprint, "charge", 30_030_000, 0, &token, about);
        assert_eq!(
            running.as_str(),
            format!("3|running|{FP}|3|charge|30030000|28|{about}|{TOKEN}|")
        );
        let head = format!("3|done|{FP}|3|charge|86400000|28|{about}|{TOKEN}|");
        assert_eq!(
            running.settled(State::Done, 86_400_000, b"{\"id\":7}"),
            (format!("{head}{{\"id\":7}}").into_bytes(), head.len())
        );
        let running = RunningLine::new(2, &fingerprint, "charge", 30_030_000, 0, &token, about);
        assert_eq!(
            running.as_str(),
            format!("2|running|{FP}|3|charge|30030000|{TOKEN}|")
        );
        let head = format!("2|done|{FP}|3|charge|86400000|{TOKEN}|");
        assert_eq!(
            running.settled(State::Done, 86_400_000, b"{\"id\":7}"),
            (format!("{head}{{\"id\":7}}").into_bytes(), head.len())
        );
        let old = RunningLine::new(1, &fingerprint, "charge", 30_030_000, 0, &token, "");
        assert_eq!(old.as_str(), format!("1|running|{FP}|3|{TOKEN}|"));
        // Field tags follow the digest in format 2; format 1 leaves them out.
        let tagged = Fingerprint::from_hex(&format!("{FP}{TAG}")).unwrap();
        let running = RunningLine::new(2, &tagged, "charge", 8000, 0, &token, "");
        assert_eq!(
            running.as_str(),
            format!("2|running|{FP}{TAG}|3|charge|8000|{TOKEN}|")
        );
        let running = RunningLine::new(1, &tagged, "charge", 8000, 0, &token, "");
        assert_eq!(running.as_str(), format!("1|running|{FP}|3|{TOKEN}|"));
        let head = format!("1|released|{FP}|3|{TOKEN}|");
        assert_eq!(
            old.settled(State::Released, 60_000, b""),
            (head.clone().into_bytes(), head.len())
        );
    }

    /// Whatever the reader does not fully recognise goes to the script.
    #[test]
    fn anything_else_is_left_to_the_claim_script() {
        for line in [
            format!("2|running|{FP}|0|charge|8000|{TOKEN}|"),
            format!("2|released|{FP}|1|charge|8000|{TOKEN}|"),
            format!("5|done|{FP}|0|charge|8000|{TOKEN}|r"),
            format!("4|done|{FP}|0|charge|8000|0||{TOKEN}|r"),
            format!("4|done|{FP}|0|charge|8000|1h|0||{TOKEN}|r"),
            format!("3|done|{FP}|0|charge|8000|{TOKEN}|r"),
            format!("3|done|{FP}|0|charge|8000|9|short|{TOKEN}|r"),
            format!("4|done|{FP}|0|charge|8000|0|+0||{TOKEN}|r"),
            format!("4|done|{FP}|0|charge|8000|0|||{TOKEN}|r"),
            format!("2|done|{FP}|0|charge|8000|{}|r", "g".repeat(32)),
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
            assert_eq!(settled_entry(line.clone().into(), None), None, "{line}");
        }
        assert_eq!(settled_entry(b"2|done|\xff".to_vec(), None), None);
    }
}
