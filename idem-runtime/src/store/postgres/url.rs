//! Reading a PostgreSQL connection string: libpq's TLS parameters that
//! tokio-postgres does not read (`sslmode=verify-ca`, `verify-full`;
//! `sslrootcert`) are taken out before it parses the rest. Errors never
//! quote the string: it may hold a password.

use tokio_postgres::Config;
use tokio_postgres::config::SslMode as PgSslMode;

use super::error::PgError;
use crate::error::StoreError;

/// How much TLS a connection insists on, and how much of the server's
/// certificate it checks: libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SslMode {
    /// Plaintext.
    Disable,
    /// TLS when the server offers it, else plaintext; the certificate is
    /// not checked. libpq's default, and ours.
    Prefer,
    /// TLS or no connection; the certificate is checked against a root
    /// certificate only when one is given (as libpq does).
    Require,
    /// TLS, the certificate chain checked against the roots.
    VerifyCa,
    /// TLS, the chain checked and the server's name matched.
    VerifyFull,
}

impl SslMode {
    fn parse(mode: &str) -> Result<SslMode, StoreError> {
        Ok(match mode {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(invalid(format!(
                    "sslmode {other:?} is not supported: use disable, prefer, require, \
                     verify-ca or verify-full"
                )));
            }
        })
    }
}

/// A connection string, read.
pub(super) struct ConnectionString {
    /// Everything tokio-postgres reads, with its `ssl_mode` set to what
    /// TLS must be negotiated (`verify-*` is `require` there).
    pub(super) config: Config,
    pub(super) mode: SslMode,
    /// `sslrootcert`: a PEM file of root certificates, or `system`.
    pub(super) root_cert: Option<String>,
}

/// Reads `url`: `postgres://…?sslmode=…` or `host=… sslmode=…`.
pub(super) fn parse(url: &str) -> Result<ConnectionString, StoreError> {
    let (rest, taken) = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        take_from_uri(url)?
    } else {
        take_from_key_values(url)?
    };
    let mode = taken
        .mode
        .as_deref()
        .map_or(Ok(SslMode::Prefer), SslMode::parse)?;
    let mut config: Config = rest
        .parse()
        .map_err(|e| invalid(format!("invalid PostgreSQL URL: {}", PgError::from(e))))?;
    config.ssl_mode(match mode {
        SslMode::Disable => PgSslMode::Disable,
        SslMode::Prefer => PgSslMode::Prefer,
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => PgSslMode::Require,
    });
    Ok(ConnectionString {
        config,
        mode,
        root_cert: taken.root_cert,
    })
}

/// The parameters taken out of a connection string.
#[derive(Default)]
struct Taken {
    mode: Option<String>,
    root_cert: Option<String>,
}

impl Taken {
    /// Takes `key`'s `value` if it is ours; `false` to leave the pair be.
    fn take(&mut self, key: &str, value: String) -> bool {
        match key {
            "sslmode" => self.mode = Some(value),
            "sslrootcert" => self.root_cert = Some(value),
            _ => return false,
        }
        true
    }
}

/// `postgres://…?a=b&sslmode=c`: the query's `sslmode` and `sslrootcert`
/// taken out, percent-decoded.
fn take_from_uri(url: &str) -> Result<(String, Taken), StoreError> {
    let mut taken = Taken::default();
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), taken));
    };
    let mut kept: Vec<&str> = Vec::new();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(value)?;
        if !taken.take(key, value) {
            kept.push(pair);
        }
    }
    let rest = match kept.is_empty() {
        true => base.to_owned(),
        false => format!("{base}?{}", kept.join("&")),
    };
    Ok((rest, taken))
}

fn percent_decode(value: &str) -> Result<String, StoreError> {
    #[cfg(feature = "postgres-tls")]
    let decoded = percent_encoding::percent_decode_str(value)
        .decode_utf8()
        .map(|v| v.into_owned())
        .map_err(|_| invalid("a URL parameter is not UTF-8 once percent-decoded"));
    // Without TLS only `sslmode` matters, and its values need no decoding.
    #[cfg(not(feature = "postgres-tls"))]
    let decoded = Ok(value.to_owned());
    decoded
}

/// `host=… sslmode=c password='it''s'`: `key=value` pairs separated by
/// whitespace, a value quoted in `'…'` with `\` escapes; ours taken out.
fn take_from_key_values(s: &str) -> Result<(String, Taken), StoreError> {
    let mut taken = Taken::default();
    let mut kept = String::with_capacity(s.len());
    let mut rest = s.trim_start();
    while !rest.is_empty() {
        let eq = rest
            .find('=')
            .ok_or_else(|| invalid("invalid PostgreSQL connection string: a key without `=`"))?;
        let key = rest[..eq].trim();
        let after = rest[eq + 1..].trim_start();
        let (value, len) = value_at(after)?;
        let end = rest.len() - after.len() + len;
        if !taken.take(key, value) {
            kept.push_str(&rest[..end]);
            kept.push(' ');
        }
        rest = rest[end..].trim_start();
    }
    Ok((kept, taken))
}

/// The value at the start of `s`, unquoted, and how many bytes it took.
fn value_at(s: &str) -> Result<(String, usize), StoreError> {
    let Some(quoted) = s.strip_prefix('\'') else {
        let len = s.find(char::is_whitespace).unwrap_or(s.len());
        return Ok((s[..len].to_owned(), len));
    };
    let mut value = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' => return Ok((value, i + 2)),
            '\\' => value.extend(chars.next().map(|(_, c)| c)),
            c => value.push(c),
        }
    }
    Err(invalid(
        "invalid PostgreSQL connection string: an unterminated quoted value",
    ))
}

fn invalid(message: impl Into<String>) -> StoreError {
    StoreError::backend(message.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_modes_and_root_certs_are_taken_out_of_uris() {
        let read = parse(
            "postgres://u:pw@db.example:5433/app?sslmode=verify-full&application_name=x&sslrootcert=%2Fetc%2Fca.pem",
        )
        .expect("parse");
        assert_eq!(read.mode, SslMode::VerifyFull);
        assert_eq!(read.config.get_ssl_mode(), PgSslMode::Require);
        assert_eq!(read.config.get_application_name(), Some("x"));
        assert_eq!(read.config.get_password(), Some(&b"pw"[..]));
        #[cfg(feature = "postgres-tls")]
        assert_eq!(read.root_cert.as_deref(), Some("/etc/ca.pem"));
        let plain = parse("postgresql://u@h/app").expect("parse");
        assert_eq!(plain.mode, SslMode::Prefer);
        assert_eq!(plain.config.get_ssl_mode(), PgSslMode::Prefer);
    }

    #[test]
    fn verify_modes_and_root_certs_are_taken_out_of_key_values() {
        let read = parse(
            "host=h user=u password='it\\'s = secret' sslmode = verify-ca sslrootcert='/a b/ca.pem' dbname=app",
        )
        .expect("parse");
        assert_eq!(read.mode, SslMode::VerifyCa);
        assert_eq!(read.config.get_password(), Some(&b"it's = secret"[..]));
        assert_eq!(read.config.get_dbname(), Some("app"));
        assert_eq!(read.root_cert.as_deref(), Some("/a b/ca.pem"));
        assert_eq!(
            parse("host=h sslmode=disable").expect("parse").mode,
            SslMode::Disable
        );
    }

    #[test]
    fn bad_strings_are_refused_without_quoting_them() {
        for url in [
            "postgres://u:s3cret@h/app?sslmode=allow",
            "host=h password='s3cret",
            "host=h s3cret",
            "postgres://u:s3cret@h:notaport/app",
        ] {
            let err = parse(url).err().expect("refused").to_string();
            assert!(!err.contains("s3cret"), "{err}");
        }
    }
}
