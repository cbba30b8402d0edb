//! Recorded results and errors encrypted at rest (feature `encryption`):
//! [`ResultKeys`], given to
//! [`RegistryBuilder::encrypt_results`](crate::RegistryBuilder::encrypt_results).
//!
//! A sealed record's payload is `idem-sealed:v1:<key id>:<base64url>`, the
//! base64 of a random 24-byte nonce and the XChaCha20-Poly1305 ciphertext
//! (RustCrypto's `chacha20poly1305`) of the result's JSON or the error's
//! text. The associated data binds it to its place: the record's key, what
//! it holds (a result or an error) and the key id, so a payload copied onto
//! another record, or relabelled, fails authentication. A store operator
//! sees keys and fingerprints (hashes), states and times, and ciphertext.
//!
//! Reading a record never runs anything on doubt: a payload under a key id
//! the registry does not have, one that fails authentication, or a
//! plaintext payload where sealed ones are expected (unless
//! [`ResultKeys::accept_plaintext`]) is an error for the caller, as a
//! corrupt record is.

use crate::error::StoreError;
use crate::key::IdemKey;

/// What a payload holds: part of what its seal authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PayloadKind {
    /// A result's JSON.
    Result,
    /// A recorded failure's text.
    Error,
    /// What a record says of its operation ([`About`](crate::store::About)).
    About,
}

impl PayloadKind {
    fn as_str(self) -> &'static str {
        match self {
            PayloadKind::Result => "result",
            PayloadKind::Error => "error",
            PayloadKind::About => "about",
        }
    }
}

/// How every sealed payload begins.
const SEALED: &str = "idem-sealed:v1:";

/// Put before a plaintext payload that begins as a sealed one would (or
/// with this prefix itself), so that it is never taken for one: an error
/// message may say anything. Taken off again when the payload is read.
const PLAIN: &str = "idem-plain:";

/// `text` as a plaintext payload: escaped with [`PLAIN`] if it could be
/// taken for a sealed one.
fn plain(text: String) -> String {
    if text.starts_with(SEALED) || text.starts_with(PLAIN) {
        format!("{PLAIN}{text}")
    } else {
        text
    }
}

/// A plaintext payload's text: its [`PLAIN`] escape, if any, taken off.
fn unplain(text: String) -> String {
    match text.strip_prefix(PLAIN) {
        Some(escaped) => escaped.to_owned(),
        None => text,
    }
}

#[cfg(feature = "encryption")]
pub use self::keys::{InvalidKeyId, ResultKeys};

/// Without the feature there are no keys: the type has no values.
#[cfg(not(feature = "encryption"))]
#[derive(Debug)]
pub(crate) enum ResultKeys {}

/// `text`, sealed under the current key when there are keys.
pub(crate) fn seal(
    keys: Option<&ResultKeys>,
    key: &IdemKey,
    kind: PayloadKind,
    text: String,
) -> String {
    match keys {
        #[cfg(feature = "encryption")]
        Some(keys) => keys.seal(key, kind, &text),
        #[cfg(not(feature = "encryption"))]
        Some(never) => match *never {},
        None => {
            let _ = (key, kind);
            plain(text)
        }
    }
}

/// The payload `text` read back: opened when sealed, checked against what
/// the registry expects.
pub(crate) fn open(
    keys: Option<&ResultKeys>,
    key: &IdemKey,
    kind: PayloadKind,
    text: String,
) -> Result<String, StoreError> {
    match keys {
        #[cfg(feature = "encryption")]
        Some(keys) => keys.open(key, kind, text),
        #[cfg(not(feature = "encryption"))]
        Some(never) => match *never {},
        None if text.starts_with(SEALED) => Err(StoreError::corrupt(
            key.as_str(),
            format!(
                "the recorded {} is encrypted, and this registry has no keys to read it \
                 (RegistryBuilder::encrypt_results)",
                kind.as_str()
            ),
        )),
        None => Ok(unplain(text)),
    }
}

#[cfg(feature = "encryption")]
mod keys {
    use std::collections::HashMap;

    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as BASE64;
    use chacha20poly1305::aead::{Aead, KeyInit, Payload};
    use chacha20poly1305::{XChaCha20Poly1305, XNonce};

    use super::{PayloadKind, SEALED, unplain};
    use crate::error::StoreError;
    use crate::key::IdemKey;

    const NONCE: usize = 24;

    /// The keys recorded results and errors are encrypted with: one
    /// current key, which seals every new record, and older ones, which
    /// only open records sealed before a rotation. Each has an id, written
    /// in every record it seals.
    ///
    /// To rotate: make the new key current and keep the old one with
    /// [`also`](Self::also) until the records it sealed have expired (the
    /// tools' `ttl`), then drop it.
    ///
    /// ```
    /// # #[cfg(feature = "encryption")] {
    /// use idem_runtime::ResultKeys;
    /// let keys = ResultKeys::new("2026-12", [7; 32])?   // from your secret store
    ///     .also("2026-06", [3; 32])?;                   // still opens older records
    /// let registry = idem_runtime::Registry::builder(()).encrypt_results(keys).build()?;
    /// # }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub struct ResultKeys {
        current: (String, XChaCha20Poly1305),
        older: HashMap<String, XChaCha20Poly1305>,
        accept_plaintext: bool,
    }

    impl std::fmt::Debug for ResultKeys {
        /// Key ids only: never a key.
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("ResultKeys")
                .field("current", &self.current.0)
                .field("older", &self.older.keys().collect::<Vec<_>>())
                .field("accept_plaintext", &self.accept_plaintext)
                .finish()
        }
    }

    /// A key id that cannot be written in a record: ids are 1 to 32 ASCII
    /// letters, digits, `-` or `_`, each given once.
    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
    #[error(
        "invalid or repeated key id {0:?}: use 1 to 32 ASCII letters, digits, `-` or `_`, once each"
    )]
    pub struct InvalidKeyId(pub String);

    fn checked(id: &str) -> Result<String, InvalidKeyId> {
        let ok = (1..=32).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        ok.then(|| id.to_owned())
            .ok_or_else(|| InvalidKeyId(id.to_owned()))
    }

    impl ResultKeys {
        /// Seals new records with `key` (32 bytes of a secret, such as
        /// from a key management service), written as `id`.
        pub fn new(id: &str, key: [u8; 32]) -> Result<ResultKeys, InvalidKeyId> {
            Ok(ResultKeys {
                current: (checked(id)?, XChaCha20Poly1305::new(&key.into())),
                older: HashMap::new(),
                accept_plaintext: false,
            })
        }

        /// Also opens records sealed under `id` with `key`.
        pub fn also(mut self, id: &str, key: [u8; 32]) -> Result<ResultKeys, InvalidKeyId> {
            let id = checked(id)?;
            if id == self.current.0 || self.older.contains_key(&id) {
                return Err(InvalidKeyId(id));
            }
            self.older.insert(id, XChaCha20Poly1305::new(&key.into()));
            Ok(self)
        }

        /// Reads plaintext records too: for the time after encryption is
        /// turned on, while records written before it are still kept.
        /// Otherwise a plaintext record is refused, so that whoever can
        /// write to the store cannot plant a result.
        pub fn accept_plaintext(mut self) -> ResultKeys {
            self.accept_plaintext = true;
            self
        }

        pub(crate) fn seal(&self, key: &IdemKey, kind: PayloadKind, text: &str) -> String {
            let (id, cipher) = &self.current;
            let mut nonce = [0u8; NONCE];
            crate::unique::fill_random(&mut nonce);
            let aad = associated(key, kind, id);
            let sealed = cipher
                .encrypt(
                    &XNonce::from(nonce),
                    Payload {
                        msg: text.as_bytes(),
                        aad: &aad,
                    },
                )
                .expect("XChaCha20-Poly1305 seals any message shorter than 256 GiB");
            let mut bytes = Vec::with_capacity(NONCE + sealed.len());
            bytes.extend_from_slice(&nonce);
            bytes.extend_from_slice(&sealed);
            format!("{SEALED}{id}:{}", BASE64.encode(bytes))
        }

        pub(crate) fn open(
            &self,
            key: &IdemKey,
            kind: PayloadKind,
            text: String,
        ) -> Result<String, StoreError> {
            let what = kind.as_str();
            let corrupt = |reason: String| StoreError::corrupt(key.as_str(), reason);
            let Some(rest) = text.strip_prefix(SEALED) else {
                return match self.accept_plaintext {
                    true => Ok(unplain(text)),
                    false => Err(corrupt(format!(
                        "the recorded {what} is not encrypted, and this registry reads only \
                         encrypted records (ResultKeys::accept_plaintext)"
                    ))),
                };
            };
            let (id, body) = rest
                .split_once(':')
                .ok_or_else(|| corrupt(format!("the recorded {what} is a malformed seal")))?;
            let cipher = match id == self.current.0 {
                true => &self.current.1,
                false => self.older.get(id).ok_or_else(|| {
                    corrupt(format!(
                        "the recorded {what} is sealed under key id {id:?}, which this registry \
                         does not have"
                    ))
                })?,
            };
            let bytes = BASE64
                .decode(body)
                .ok()
                .filter(|b| b.len() >= NONCE)
                .ok_or_else(|| corrupt(format!("the recorded {what} is a malformed seal")))?;
            let (nonce, sealed) = bytes.split_at(NONCE);
            let nonce: [u8; NONCE] = nonce.try_into().expect("split at NONCE");
            let aad = associated(key, kind, id);
            let opened = cipher
                .decrypt(
                    &XNonce::from(nonce),
                    Payload {
                        msg: sealed,
                        aad: &aad,
                    },
                )
                .map_err(|_| {
                    corrupt(format!(
                        "the recorded {what} fails authentication under key id {id:?}: altered, \
                         or copied from another record"
                    ))
                })?;
            String::from_utf8(opened)
                .map_err(|_| corrupt(format!("the recorded {what} is not UTF-8 once opened")))
        }
    }

    /// What a seal authenticates besides the text: where it belongs.
    fn associated(key: &IdemKey, kind: PayloadKind, id: &str) -> Vec<u8> {
        let mut aad = Vec::with_capacity(64 + key.as_str().len());
        for part in ["idem/v1/sealed", key.as_str(), kind.as_str(), id] {
            aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
            aad.extend_from_slice(part.as_bytes());
        }
        aad
    }
}

#[cfg(test)]
mod plain_tests {
    use serde_json::json;

    use super::*;
    use crate::key::Scope;

    /// Without keys, any text is read back as it was written, even one
    /// that begins as a sealed payload or as the escape itself; a sealed
    /// payload is still refused.
    #[test]
    fn a_plaintext_that_looks_sealed_reads_back_as_written() {
        let key = IdemKey::derive(Scope::Run("r"), "t", 1, &json!({}));
        for text in [
            "card declined",
            "idem-sealed:v1:k1:AAAA",
            "idem-plain:",
            "idem-plain:idem-sealed:v1:",
            "",
        ] {
            let stored = seal(None, &key, PayloadKind::Error, text.to_owned());
            assert!(!stored.starts_with(SEALED), "{stored}");
            let read = open(None, &key, PayloadKind::Error, stored).expect("reads");
            assert_eq!(read, text);
        }
        let sealed = "idem-sealed:v1:k1:AAAA".to_owned();
        assert!(open(None, &key, PayloadKind::Error, sealed).is_err());
    }
}

#[cfg(all(test, feature = "encryption"))]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::key::Scope;

    fn key(n: u64) -> IdemKey {
        IdemKey::derive(Scope::Run("r"), "t", 1, &json!({ "n": n }))
    }

    #[test]
    fn seals_open_only_where_they_were_made() {
        let keys = ResultKeys::new("k1", [9; 32]).expect("keys");
        let text = r#"{"card":"4111"}"#.to_owned();
        let sealed = seal(Some(&keys), &key(1), PayloadKind::Result, text.clone());
        assert!(sealed.starts_with("idem-sealed:v1:k1:") && !sealed.contains("4111"));
        let again = seal(Some(&keys), &key(1), PayloadKind::Result, text.clone());
        assert_ne!(sealed, again, "a fresh nonce per seal");
        let open_as = |k: u64, holds| open(Some(&keys), &key(k), holds, sealed.clone());
        assert_eq!(open_as(1, PayloadKind::Result).expect("opens"), text);
        assert!(open_as(2, PayloadKind::Result).is_err(), "another record");
        assert!(open_as(1, PayloadKind::Error).is_err(), "another kind");
        // Altered in any way: refused.
        let body = sealed.rsplit(':').next().expect("body");
        for bad in [
            format!("idem-sealed:v1:k1:{}", &body[..body.len() - 1]),
            format!("idem-sealed:v1:k1:{}A", body),
            "idem-sealed:v1:k1:".to_owned(),
            "idem-sealed:v1:k1:!!".to_owned(),
            "idem-sealed:v1:k1".to_owned(),
            sealed.replacen("k1", "k2", 1),
        ] {
            assert!(
                open(Some(&keys), &key(1), PayloadKind::Result, bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn key_ids_are_checked_and_keys_never_printed() {
        for id in ["", "has:colon", "has space", &"x".repeat(33)] {
            assert!(ResultKeys::new(id, [0; 32]).is_err(), "{id:?}");
        }
        let keys = ResultKeys::new("a", [0xAB; 32]).expect("keys");
        assert!(keys.also("a", [1; 32]).is_err(), "a repeated id");
        let keys = ResultKeys::new("a", [0xAB; 32])
            .expect("keys")
            .also("b", [0xCD; 32]);
        let shown = format!("{:?}", keys.expect("keys"));
        assert!(
            !shown.contains("171") && !shown.to_lowercase().contains("ab, "),
            "{shown}"
        );
    }
}
