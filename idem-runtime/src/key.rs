//! Idempotency keys and argument fingerprints (docs/spec.md, "Keys").

use std::fmt;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::canonical::{with_buffer, write_value};

/// Version tag of the key derivation; part of every digest.
const KEY_DOMAIN: &str = "idem/v1";
/// Version tag of the key derivation of a call made for a tenant: its
/// first field differs from [`KEY_DOMAIN`], so a tenant's key can never be
/// a tenantless one, and the tenant follows it, length-prefixed.
const TENANT_KEY_DOMAIN: &str = "idem/v1/tenant";
/// Domain tag of argument fingerprints, so a fingerprint is never a key.
const FINGERPRINT_DOMAIN: &str = "idem/fingerprint/v1";
/// Domain tag of the value half of a fingerprint's field tag.
const FIELD_DOMAIN: &str = "idem/fingerprint/field/v1";
/// Domain tag of the path half of a field tag.
const FIELD_PATH_DOMAIN: &str = "idem/fingerprint/path/v1";

/// What an operation's identity is scoped to.
///
/// `Run` keys make a duplicate within one agent run harmless (a retried
/// turn, a repeated tool call, a resumed checkpoint) while letting another
/// run do the same thing again. `Global` keys make the operation happen once
/// ever (within the result TTL), whichever run asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope<'a> {
    /// Scoped to one agent run, named by its id.
    Run(&'a str),
    /// Shared by every run.
    Global,
}

pub use idem_rules::ScopeKind;

impl<'a> Scope<'a> {
    /// The scope of a call made in `run_id` by a tool scoped `kind`.
    pub fn of(kind: ScopeKind, run_id: &'a str) -> Scope<'a> {
        match kind {
            ScopeKind::Run => Scope::Run(run_id),
            ScopeKind::Global => Scope::Global,
        }
    }
}

/// The identity of one operation: `"idem:" + hex(SHA-256(..))`, optionally
/// prefixed by a namespace.
///
/// It depends on what the operation does — the scope, the tool, its version
/// and the canonical arguments — and never on the attempt, so every retry of
/// one operation gets the same key. It is what the store is keyed on and what
/// [`WriteCtx::idem_key`](crate::WriteCtx::idem_key) hands to the tool body
/// to pass downstream (a payment API's `Idempotency-Key`, say).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdemKey(String);

impl IdemKey {
    /// Derives the key of calling `tool` (at `version`) with `args` in `scope`.
    ///
    /// `digest = SHA-256(enc("idem/v1") ‖ enc(scope) ‖ enc(tool) ‖
    /// enc(version as decimal) ‖ enc(canonical_json(args)))` where scope is
    /// `"run:" + run_id` or `"global"` and `enc(x)` is x's UTF-8 length as
    /// 8 bytes big-endian followed by x. The length prefixes make the encoding
    /// injective.
    ///
    /// ```
    /// use idem_runtime::{IdemKey, Scope};
    /// use serde_json::json;
    /// let a = IdemKey::derive(Scope::Run("run-42"), "charge_card", 1,
    ///     &json!({"amount": 100, "currency": "usd", "customer_id": "cus_1"}));
    /// let b = IdemKey::derive(Scope::Run("run-42"), "charge_card", 1,
    ///     &json!({"customer_id": "cus_1", "currency": "usd", "amount": 100}));
    /// assert_eq!(a, b);
    /// assert_eq!(a.as_str(), "idem:3547ebd6d4c68bb01e6f6281e4541908d3eaf75463efb241f406a8c5cd33a71a");
    /// ```
    pub fn derive(scope: Scope<'_>, tool: &str, version: u32, args: &Value) -> IdemKey {
        Self::from_digest(
            None,
            &hash_value(key_head(None, scope, tool, version), args),
        )
    }

    /// The key of the same operation made for `tenant` (a customer, a
    /// principal): `digest = SHA-256(enc("idem/v1/tenant") ‖ enc(tenant) ‖
    /// enc(scope) ‖ enc(tool) ‖ enc(version) ‖ enc(canonical_json(args)))`.
    /// No two tenants share a key in any scope, `Global` included, and no
    /// tenant's key is a tenantless one.
    ///
    /// ```
    /// use idem_runtime::{IdemKey, Scope};
    /// use serde_json::json;
    /// let args = json!({"user_id": 7});
    /// let acme = IdemKey::derive_for_tenant("acme", Scope::Global, "reset_password", 1, &args);
    /// let globex = IdemKey::derive_for_tenant("globex", Scope::Global, "reset_password", 1, &args);
    /// assert_ne!(acme, globex);
    /// assert_ne!(acme, IdemKey::derive(Scope::Global, "reset_password", 1, &args));
    /// ```
    pub fn derive_for_tenant(
        tenant: &str,
        scope: Scope<'_>,
        tool: &str,
        version: u32,
        args: &Value,
    ) -> IdemKey {
        Self::from_digest(
            None,
            &hash_value(key_head(Some(tenant), scope, tool, version), args),
        )
    }

    /// The key of an operation whose caller chose its key (an upstream
    /// `Idempotency-Key`, a queue message id; docs/spec.md, "Explicit
    /// keys"): as [`derive`](Self::derive) or, with a tenant,
    /// [`derive_for_tenant`](Self::derive_for_tenant), with the canonical
    /// arguments replaced by `0x00 ‖ "operation-key" ‖ 0x00 ‖
    /// operation_key`. Canonical JSON never holds a NUL byte, so no
    /// operation key can give an argument-derived key.
    ///
    /// ```
    /// use idem_runtime::{IdemKey, Scope};
    /// use serde_json::json;
    /// let explicit = IdemKey::derive_explicit(None, Scope::Run("run-42"), "charge_card", 1, "{}");
    /// assert_ne!(explicit, IdemKey::derive(Scope::Run("run-42"), "charge_card", 1, &json!({})));
    /// ```
    pub fn derive_explicit(
        tenant: Option<&str>,
        scope: Scope<'_>,
        tool: &str,
        version: u32,
        operation_key: &str,
    ) -> IdemKey {
        let digest = hash_framed(key_head(tenant, scope, tool, version), |out| {
            write_explicit(out, operation_key);
            Ok::<(), std::convert::Infallible>(())
        });
        match digest {
            Ok(digest) => Self::from_digest(None, &digest),
            Err(never) => match never {},
        }
    }

    /// `"idem:" + hex(digest)`, under `namespace` as
    /// [`with_namespace`](Self::with_namespace) puts it, in one allocation.
    pub(crate) fn from_digest(namespace: Option<&str>, digest: &[u8; 32]) -> IdemKey {
        let namespace = namespace.unwrap_or_default();
        let mut key = String::with_capacity(namespace.len() + 1 + 5 + 64);
        if !namespace.is_empty() {
            key.push_str(namespace);
            key.push(':');
        }
        key.push_str("idem:");
        push_hex(&mut key, digest);
        IdemKey(key)
    }

    /// The digest of the key whose canonical arguments `write` appends to
    /// the buffer it is given (see [`derive`](Self::derive)).
    pub(crate) fn digest_with<E>(
        tenant: Option<&str>,
        scope: Scope<'_>,
        tool: &str,
        version: u32,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<[u8; 32], E> {
        hash_framed(key_head(tenant, scope, tool, version), write)
    }

    /// The digest this key ends with, when it has the form this crate
    /// writes (`[<namespace>:]idem:<64 hex digits>`), and the namespace
    /// part before it.
    pub(crate) fn split_digest(&self) -> Option<(&str, [u8; 32])> {
        let (prefix, hex) = self.0.split_at_checked(self.0.len().checked_sub(64)?)?;
        let namespace = prefix.strip_suffix("idem:")?;
        Some((namespace, parse_hex32(hex)?))
    }

    /// This key under `namespace`: `"<namespace>:idem:<hex>"`.
    ///
    /// Namespaces keep several applications (or environments) apart in one
    /// store. [`Registry`](crate::Registry) applies its namespace itself.
    pub fn with_namespace(self, namespace: &str) -> IdemKey {
        if namespace.is_empty() {
            return self;
        }
        let mut key = String::with_capacity(namespace.len() + 1 + self.0.len());
        key.push_str(namespace);
        key.push(':');
        key.push_str(&self.0);
        IdemKey(key)
    }

    /// The key as stored and as handed downstream.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Wraps a key string read back from a store or a test. No check is made
    /// that it was derived as above.
    pub fn from_raw(key: impl Into<String>) -> IdemKey {
        IdemKey(key.into())
    }

    /// The key as an owned string.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for IdemKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for IdemKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdemKey({})", self.0)
    }
}

impl AsRef<str> for IdemKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A digest of an operation's checked arguments, stored beside its record,
/// with a short tag for each checked field.
///
/// When a tool keys on a subset of its arguments (`key = [..]`, `check =
/// [..]`, or a caller's operation key), two calls can share a key yet
/// differ in payload; comparing fingerprints ([`matches`](Self::matches))
/// tells a true duplicate from such a conflict, and the field tags tell
/// which checked fields differ, so that a
/// [`KeyConflict`](crate::ToolError::KeyConflict) can name them. The
/// registry stores [`Fingerprint::of`] the arguments for such tools, with
/// the tags; for a tool keyed on all its arguments the key's own digest
/// already covers them, and serves as the fingerprint, without tags.
///
/// A field's tag is 4 bytes of a hash of its path and 4 of a hash of its
/// value salted with the operation's key: a value never appears, and the
/// same value in two operations has two tags. Stored, a fingerprint is
/// [`to_bytes`](Self::to_bytes) (32 bytes, then 8 per tag) or
/// [`to_hex`](Self::to_hex); a store keeps it whole.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    digest: [u8; 32],
    fields: Box<[FieldTag]>,
}

/// One checked field's tag: 4 bytes of its path's hash, then 4 of its
/// value's.
pub(crate) type FieldTag = [u8; 8];

/// The most field tags one fingerprint carries: an operation with more
/// checked fields tags the first this many, in path order, and a conflict
/// in the others is reported without their names.
pub(crate) const MAX_FIELD_TAGS: usize = 64;

impl Fingerprint {
    /// The fingerprint of `args`: SHA-256 over a domain tag and
    /// `canonical_json(args)`, both length-prefixed; without field tags.
    pub fn of(args: &Value) -> Fingerprint {
        Fingerprint::from_digest(hash_value(|m| enc(m, FINGERPRINT_DOMAIN.as_bytes()), args))
    }

    /// A fingerprint that is `digest` alone.
    pub(crate) fn from_digest(digest: [u8; 32]) -> Fingerprint {
        Fingerprint {
            digest,
            fields: Box::new([]),
        }
    }

    /// This fingerprint with `fields` as its field tags (at most
    /// [`MAX_FIELD_TAGS`] of them).
    pub(crate) fn with_fields(mut self, fields: Vec<FieldTag>) -> Fingerprint {
        debug_assert!(fields.len() <= MAX_FIELD_TAGS);
        self.fields = fields.into_boxed_slice();
        self
    }

    /// Whether the fingerprint is `digest` alone, without field tags.
    pub(crate) fn is_just(&self, digest: &[u8; 32]) -> bool {
        self.digest == *digest && self.fields.is_empty()
    }

    /// The digest of the checked arguments, without the field tags.
    pub fn digest(&self) -> &[u8; 32] {
        &self.digest
    }

    /// Whether the two fingerprints are of the same checked arguments: their
    /// digests are equal. The field tags only explain a difference (a
    /// record written without them matches one with them).
    pub fn matches(&self, other: &Fingerprint) -> bool {
        self.digest == other.digest
    }

    /// The positions of this fingerprint's field tags whose field `stored`
    /// holds with another value, or does not tag: the checked fields that
    /// differ from the stored operation's. Empty when `stored` has no tags
    /// (written without them), since then nothing can be told.
    pub(crate) fn differing_fields(&self, stored: &Fingerprint) -> Vec<usize> {
        if stored.fields.is_empty() {
            return Vec::new();
        }
        // A tag equal to one of `stored`'s is the same path with the same
        // value; any other is a value that changed, or a path `stored`
        // lacks.
        (0..self.fields.len())
            .filter(|&i| !stored.fields.contains(&self.fields[i]))
            .collect()
    }

    /// The stored form: the digest's 32 bytes, then 8 per field tag.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(32 + 8 * self.fields.len());
        bytes.extend_from_slice(&self.digest);
        for tag in &self.fields {
            bytes.extend_from_slice(tag);
        }
        bytes
    }

    /// Reads the stored form written by [`to_bytes`](Self::to_bytes): 32
    /// bytes, then at most 64 tags of 8; `None` for
    /// anything else.
    pub fn from_bytes(bytes: &[u8]) -> Option<Fingerprint> {
        let (digest, tags) = bytes.split_first_chunk::<32>()?;
        let (fields, rest) = tags.as_chunks::<8>();
        if !rest.is_empty() || fields.len() > MAX_FIELD_TAGS {
            return None;
        }
        Some(Fingerprint {
            digest: *digest,
            fields: fields.into(),
        })
    }

    /// Parses the lowercase hex form written by `Display` (64 digits, then
    /// 16 per field tag); `None` for anything else.
    pub fn from_hex(hex: &str) -> Option<Fingerprint> {
        let (digest, tags) = hex.split_at_checked(64)?;
        let digest = parse_hex32(digest)?;
        if tags.len() % 16 != 0 || tags.len() / 16 > MAX_FIELD_TAGS {
            return None;
        }
        let mut fields = vec![[0; 8]; tags.len() / 16];
        parse_hex_into(tags.as_bytes(), fields.as_flattened_mut())
            .then(|| Fingerprint::from_digest(digest).with_fields(fields))
    }

    /// The lowercase hex form, as Redis stores it: 64 digits, then 16 per
    /// field tag.
    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(self.hex_len());
        self.push_hex(&mut s);
        s
    }

    /// How long [`to_hex`](Self::to_hex) is.
    pub(crate) fn hex_len(&self) -> usize {
        64 + 16 * self.fields.len()
    }

    /// Appends [`to_hex`](Self::to_hex) to `out`.
    pub(crate) fn push_hex(&self, out: &mut String) {
        push_hex(out, &self.digest);
        for tag in &self.fields {
            push_hex(out, tag);
        }
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({})", self.to_hex())
    }
}

/// The tag of checked field `path`, holding `value` (`None`: absent), in
/// the operation whose key digest is `key`: its [`path_tag`], then its
/// [`value_tag`]. (The registry puts the halves together itself: a
/// tool's path halves are hashed once.)
#[cfg(any(test, feature = "test-util"))]
pub(crate) fn field_tag(key: &[u8; 32], path: &str, value: Option<&Value>) -> FieldTag {
    tag_of(path_tag(path), value_tag(key, path, value))
}

/// A field's tag from its two halves.
pub(crate) fn tag_of(path: [u8; 4], value: [u8; 4]) -> FieldTag {
    let mut tag = [0; 8];
    tag[..4].copy_from_slice(&path);
    tag[4..].copy_from_slice(&value);
    tag
}

/// The first half of a field's tag: 4 bytes of a hash of its path alone
/// (a path names a member of the schema, no secret), so that a tool's
/// paths are hashed once, when its registry is built.
pub(crate) fn path_tag(path: &str) -> [u8; 4] {
    let Ok(digest) = hash_framed(
        |m| enc(m, FIELD_PATH_DOMAIN.as_bytes()),
        |out| {
            out.extend_from_slice(path.as_bytes());
            Ok::<_, std::convert::Infallible>(())
        },
    );
    [digest[0], digest[1], digest[2], digest[3]]
}

/// The second half of a field's tag: 4 bytes of a hash of its value,
/// salted with the operation's key and the path, so that the same value
/// in two operations has two tags. `-` stands for an absent field, `=`
/// and the canonical JSON for a present one.
pub(crate) fn value_tag(key: &[u8; 32], path: &str, value: Option<&Value>) -> [u8; 4] {
    let salted = |m: &mut Vec<u8>| {
        enc(m, FIELD_DOMAIN.as_bytes());
        enc(m, key);
        enc(m, path.as_bytes());
    };
    let Ok(digest) = hash_framed(salted, |out| {
        match value {
            Some(value) => {
                out.push(b'=');
                write_value(out, value);
            }
            None => out.push(b'-'),
        }
        Ok::<_, std::convert::Infallible>(())
    });
    [digest[0], digest[1], digest[2], digest[3]]
}

/// `x`'s length as 8 bytes big-endian, then `x`.
fn enc(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// The framing of a key's digest ahead of its arguments:
/// `enc("idem/v1") ‖ enc(scope) ‖ enc(tool) ‖ enc(version)`.
fn key_head<'a>(
    tenant: Option<&'a str>,
    scope: Scope<'a>,
    tool: &'a str,
    version: u32,
) -> impl FnOnce(&mut Vec<u8>) + 'a {
    move |m| {
        match tenant {
            None => enc(m, KEY_DOMAIN.as_bytes()),
            Some(tenant) => {
                enc(m, TENANT_KEY_DOMAIN.as_bytes());
                enc(m, tenant.as_bytes());
            }
        }
        match scope {
            Scope::Run(run_id) => {
                m.extend_from_slice(&((4 + run_id.len()) as u64).to_be_bytes());
                m.extend_from_slice(b"run:");
                m.extend_from_slice(run_id.as_bytes());
            }
            Scope::Global => enc(m, b"global"),
        }
        enc(m, tool.as_bytes());
        enc(m, itoa::Buffer::new().format(version).as_bytes());
    }
}

/// Writes the payload that stands for the arguments in a key its caller
/// chose: `0x00 ‖ "operation-key" ‖ 0x00 ‖ operation_key`
/// ([`IdemKey::derive_explicit`]).
pub(crate) fn write_explicit(out: &mut Vec<u8>, operation_key: &str) {
    out.push(0);
    out.extend_from_slice(b"operation-key");
    out.push(0);
    out.extend_from_slice(operation_key.as_bytes());
}

/// [`hash_framed`] of a JSON value's canonical form, which cannot fail.
fn hash_value(head: impl FnOnce(&mut Vec<u8>), value: &Value) -> [u8; 32] {
    let digest = hash_framed(head, |out| {
        write_value(out, value);
        Ok::<_, std::convert::Infallible>(())
    });
    match digest {
        Ok(digest) => digest,
        Err(never) => match never {},
    }
}

/// SHA-256 of `head ‖ enc(body)`, where `head` and `write` append the
/// framing and the body to one buffer: the message is hashed in one piece
/// by sha2, which costs less than feeding the hasher field by field, and
/// the body is written where it is hashed.
fn hash_framed<E>(
    head: impl FnOnce(&mut Vec<u8>),
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
) -> Result<[u8; 32], E> {
    with_buffer(|m| {
        head(m);
        let at = m.len();
        m.extend_from_slice(&[0; 8]);
        write(m)?;
        let len = (m.len() - at - 8) as u64;
        m[at..at + 8].copy_from_slice(&len.to_be_bytes());
        Ok(Sha256::digest(m.as_slice()).into())
    })
}

/// Appends `bytes` (a multiple of 8 of them, at most 32) as lowercase
/// hex digits.
pub(crate) fn push_hex(out: &mut String, bytes: &[u8]) {
    let mut buf = [0u8; 64];
    let (chunks, rest) = bytes.as_chunks::<8>();
    debug_assert!(
        rest.is_empty() && chunks.len() <= 4,
        "{} bytes",
        bytes.len()
    );
    for (digits, chunk) in buf.chunks_exact_mut(16).zip(chunks) {
        digits.copy_from_slice(&hex16(*chunk));
    }
    // Hex digits are ASCII: always valid UTF-8.
    out.push_str(std::str::from_utf8(&buf[..chunks.len() * 16]).unwrap_or_default());
}

/// Sixteen bytes as 32 lowercase hex digits, on the stack.
pub(crate) fn hex32(bytes: [u8; 16]) -> [u8; 32] {
    let (high, low) = bytes.split_at(8);
    let mut out = [0u8; 32];
    out[..16].copy_from_slice(&hex16(high.try_into().unwrap_or_default()));
    out[16..].copy_from_slice(&hex16(low.try_into().unwrap_or_default()));
    out
}

/// Eight bytes as sixteen lowercase hex digits: each byte's two digits
/// read from a table of all 256, fewer instructions than spreading the
/// nibbles over a `u128` (hex is on every call's path: the key, the
/// record's fingerprint, the lease token).
fn hex16(bytes: [u8; 8]) -> [u8; 16] {
    /// Byte → its two lowercase hex digits.
    static PAIRS: [[u8; 2]; 256] = {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut table = [[0u8; 2]; 256];
        let mut b = 0;
        while b < 256 {
            table[b] = [DIGITS[b >> 4], DIGITS[b & 0xF]];
            b += 1;
        }
        table
    };
    let mut out = [0u8; 16];
    for (digits, byte) in out.as_chunks_mut::<2>().0.iter_mut().zip(bytes) {
        *digits = PAIRS[usize::from(byte)];
    }
    out
}

/// The 32 bytes that 64 lowercase hex digits spell; `None` for anything
/// else.
pub(crate) fn parse_hex32(hex: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    parse_hex_into(hex.as_bytes(), &mut out).then_some(out)
}

/// Fills `out` with the bytes the lowercase hex digits `hex` spell;
/// false, with `out` unspecified, unless `hex` is exactly that many digits.
fn parse_hex_into(hex: &[u8], out: &mut [u8]) -> bool {
    /// Lowercase hex digit → its value; 0xFF for anything else.
    static NIBBLE: [u8; 256] = {
        let mut table = [0xFF_u8; 256];
        let mut i = 0;
        while i < 10 {
            table[b'0' as usize + i] = i as u8;
            i += 1;
        }
        let mut i = 0;
        while i < 6 {
            table[b'a' as usize + i] = 10 + i as u8;
            i += 1;
        }
        table
    };
    if hex.len() != 2 * out.len() {
        return false;
    }
    let mut bad = 0u8;
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let (hi, lo) = (NIBBLE[usize::from(pair[0])], NIBBLE[usize::from(pair[1])]);
        bad |= hi | lo;
        *byte = (hi << 4) | (lo & 0xF);
    }
    // Any 0xFF nibble sets the high bits.
    bad & 0xF0 == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fingerprint_hex_and_bytes_round_trip_and_reject_junk() {
        let plain = Fingerprint::of(&json!({"a": 1}));
        let key = [7; 32];
        let tagged = plain.clone().with_fields(vec![
            field_tag(&key, "a", Some(&json!(1))),
            field_tag(&key, "b", None),
        ]);
        for fp in [&plain, &tagged] {
            assert_eq!(Fingerprint::from_hex(&fp.to_hex()).as_ref(), Some(fp));
            assert_eq!(Fingerprint::from_bytes(&fp.to_bytes()).as_ref(), Some(fp));
        }
        assert_eq!(tagged.to_hex().len(), 64 + 2 * 16);
        assert!(tagged.matches(&plain), "the tags only explain a difference");
        assert_eq!(Fingerprint::from_hex("zz"), None);
        assert_eq!(Fingerprint::from_hex(&"A".repeat(64)), None);
        let hex = tagged.to_hex();
        assert_eq!(Fingerprint::from_hex(&hex[..hex.len() - 1]), None);
        assert_eq!(
            Fingerprint::from_hex(&format!("{hex}G123456789abcdef")),
            None
        );
        let bytes = tagged.to_bytes();
        assert_eq!(Fingerprint::from_bytes(&bytes[..bytes.len() - 1]), None);
        assert_eq!(Fingerprint::from_bytes(&bytes[..31]), None);
        let too_many = vec![0; 32 + 8 * (MAX_FIELD_TAGS + 1)];
        assert_eq!(Fingerprint::from_bytes(&too_many), None);
        assert!(Fingerprint::from_bytes(&too_many[..32 + 8 * MAX_FIELD_TAGS]).is_some());
        assert!(!plain.matches(&Fingerprint::of(&json!({"a": 2}))));
    }

    #[test]
    fn field_tags_tell_which_fields_differ() {
        let key = [1; 32];
        let tags = |fields: &[(&str, Option<Value>)]| {
            let tags = fields
                .iter()
                .map(|(path, v)| field_tag(&key, path, v.as_ref()))
                .collect();
            Fingerprint::of(&json!(null)).with_fields(tags)
        };
        let stored = tags(&[("note", Some(json!("a"))), ("source", None)]);
        let now = tags(&[("note", Some(json!("a"))), ("source", Some(json!(null)))]);
        assert_eq!(now.differing_fields(&stored), vec![1], "absent is not null");
        let now = tags(&[("amount", Some(json!(1))), ("note", Some(json!("b")))]);
        assert_eq!(now.differing_fields(&stored), vec![0, 1]);
        assert_eq!(
            now.differing_fields(&Fingerprint::of(&json!(null))),
            Vec::<usize>::new()
        );
        // Salted with the key: the same value in another operation has
        // another tag.
        let other = field_tag(&[2; 32], "note", Some(&json!("a")));
        assert_ne!(other, field_tag(&key, "note", Some(&json!("a"))));
    }

    #[test]
    fn hex_digits_agree_with_format_for_every_byte_at_every_position() {
        for byte in 0..=255_u8 {
            for at in 0..32 {
                let mut bytes = [0x5A_u8; 32];
                bytes[at] = byte;
                let mut hex = String::new();
                push_hex(&mut hex, &bytes);
                let expected: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                assert_eq!(hex, expected);
            }
        }
    }

    #[test]
    fn namespace_prefixes_the_key() {
        let k = IdemKey::derive(Scope::Global, "t", 1, &json!({}));
        let hex = k.as_str().to_owned();
        assert_eq!(k.clone().with_namespace("").as_str(), hex);
        assert_eq!(k.with_namespace("shop").as_str(), format!("shop:{hex}"));
    }
}
