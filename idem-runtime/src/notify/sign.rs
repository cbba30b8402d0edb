//! Signing as Standard Webhooks signs (<https://www.standardwebhooks.com>):
//! the secret is `whsec_` and base64 of 24 to 64 random bytes; a message's
//! signature is `v1,` and base64 of HMAC-SHA256, under the secret's bytes,
//! of `"{webhook-id}.{webhook-timestamp}.{body}"`.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::error::NotifyError;

/// The prefix of a secret as the spec writes it.
const PREFIX: &str = "whsec_";
/// How long a secret may be, in bytes: the spec's bounds.
const SECRET_BYTES: std::ops::RangeInclusive<usize> = 24..=64;

/// The secret a webhook is signed with: `whsec_` and base64 of 24 to 64
/// random bytes, as Standard Webhooks writes it (and as its libraries,
/// Svix and others, take it). Its `Debug` never shows it.
///
/// ```
/// use idem_runtime::notify::WebhookSecret;
///
/// let secret: WebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
/// let signature = secret.sign("msg_1", 1_700_000_000, br#"{"type":"approval.requested"}"#);
/// assert!(signature.starts_with("v1,"));
/// assert!(secret.verify("msg_1", 1_700_000_000, br#"{"type":"approval.requested"}"#, &signature));
/// assert!(!secret.verify("msg_1", 1_700_000_001, br#"{"type":"approval.requested"}"#, &signature));
/// assert!("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse::<WebhookSecret>().is_err());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret {
    bytes: Vec<u8>,
}

impl WebhookSecret {
    /// A new secret of 32 random bytes, from the operating system's
    /// source of randomness.
    pub fn generate() -> WebhookSecret {
        let mut bytes = vec![0; 32];
        crate::unique::fill_random(&mut bytes);
        WebhookSecret { bytes }
    }

    /// The `webhook-signature` header of a message: `v1,` and base64 of
    /// HMAC-SHA256 of `"{id}.{timestamp}.{body}"`.
    pub fn sign(&self, id: &str, timestamp: u64, body: &[u8]) -> String {
        format!("v1,{}", STANDARD.encode(self.mac(id, timestamp, body)))
    }

    /// Whether `signatures` (a `webhook-signature` header: one or more
    /// `v1,<base64>` separated by spaces, as a sender rotating its secret
    /// sends) holds this secret's signature of the message, compared in
    /// constant time.
    pub fn verify(&self, id: &str, timestamp: u64, body: &[u8], signatures: &str) -> bool {
        signatures.split(' ').any(|given| {
            let Some(encoded) = given.strip_prefix("v1,") else {
                return false;
            };
            let Ok(given) = STANDARD.decode(encoded) else {
                return false;
            };
            let mut mac = self.hmac();
            mac.update(&message(id, timestamp, body));
            mac.verify_slice(&given).is_ok()
        })
    }

    fn hmac(&self) -> Hmac<Sha256> {
        // HMAC takes a key of any length.
        Hmac::<Sha256>::new_from_slice(&self.bytes).expect("HMAC takes any key length")
    }

    fn mac(&self, id: &str, timestamp: u64, body: &[u8]) -> Vec<u8> {
        let mut mac = self.hmac();
        mac.update(&message(id, timestamp, body));
        mac.finalize().into_bytes().to_vec()
    }
}

/// What is signed: `"{id}.{timestamp}.{body}"`.
fn message(id: &str, timestamp: u64, body: &[u8]) -> Vec<u8> {
    let mut signed = Vec::with_capacity(id.len() + 24 + body.len());
    signed.extend_from_slice(id.as_bytes());
    signed.push(b'.');
    signed.extend_from_slice(timestamp.to_string().as_bytes());
    signed.push(b'.');
    signed.extend_from_slice(body);
    signed
}

impl FromStr for WebhookSecret {
    type Err = NotifyError;

    /// `whsec_` and base64 of 24 to 64 bytes. The error never quotes
    /// what was given.
    fn from_str(given: &str) -> Result<WebhookSecret, NotifyError> {
        let bad = |why: &str| NotifyError::Secret(why.to_owned());
        let encoded = given.trim().strip_prefix(PREFIX).ok_or_else(|| {
            bad("a webhook secret starts with `whsec_`, then base64 of 24 to 64 random bytes (make one with `idem webhook-secret`)")
        })?;
        let bytes = STANDARD
            .decode(encoded)
            .map_err(|_| bad("what follows `whsec_` in the webhook secret is not base64"))?;
        if !SECRET_BYTES.contains(&bytes.len()) {
            return Err(NotifyError::Secret(format!(
                "the webhook secret holds {} bytes; Standard Webhooks wants 24 to 64",
                bytes.len()
            )));
        }
        Ok(WebhookSecret { bytes })
    }
}

impl fmt::Display for WebhookSecret {
    /// The secret as the spec writes it, `whsec_` and base64: to hand to
    /// the receiver, once.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}", STANDARD.encode(&self.bytes))
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the spec's reference libraries (standard-webhooks,
    /// `libraries/python/standardwebhooks/tests.py`'s constants):
    /// a known secret, id, timestamp and body, and the signature they
    /// give.
    #[test]
    fn signs_as_the_reference_libraries_do() {
        let secret: WebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
        let (id, timestamp) = ("msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330);
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            secret.sign(id, timestamp, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_changed_body_id_or_timestamp_does_not_verify() {
        let secret = WebhookSecret::generate();
        let signature = secret.sign("msg_1", 10, b"{}");
        assert!(secret.verify("msg_1", 10, b"{}", &signature));
        assert!(secret.verify("msg_1", 10, b"{}", &format!("v1,bm9wZQ== {signature}")));
        assert!(!secret.verify("msg_1", 10, b"{ }", &signature));
        assert!(!secret.verify("msg_2", 10, b"{}", &signature));
        assert!(!secret.verify("msg_1", 11, b"{}", &signature));
        assert!(!WebhookSecret::generate().verify("msg_1", 10, b"{}", &signature));
    }

    #[test]
    fn a_secret_round_trips_and_a_bad_one_is_refused_without_being_quoted() {
        let secret = WebhookSecret::generate();
        assert_eq!(secret.to_string().parse::<WebhookSecret>().unwrap(), secret);
        assert_eq!(format!("{secret:?}"), "WebhookSecret(..)");
        for bad in [
            "s3cr3t-s3cr3t-s3cr3t-s3cr3t",
            "whsec_***not base64***",
            "whsec_c2hvcnQ=",
        ] {
            let message = bad.parse::<WebhookSecret>().unwrap_err().to_string();
            assert!(!message.contains(bad), "{message}");
            assert!(message.contains("webhook secret"), "{message}");
        }
    }
}
