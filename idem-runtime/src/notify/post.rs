//! One HTTP/1.1 POST, as a webhook needs it and no more: connect (TLS on
//! rustls with *ring* and the platform's roots for `https`), send the
//! body with its headers, read the status line, close. No redirects, no
//! pooling, no proxy: a webhook is a few requests a minute. Written here
//! rather than taken from an HTTP client crate so that turning on
//! `notify` changes nothing about the application's own HTTP clients
//! (a client crate's TLS features are unified across the build).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Where a webhook goes: `http(s)://host[:port]/path?query`, parsed once.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) tls: bool,
    pub(crate) host: String,
    pub(crate) port: u16,
    /// The path and query, as the request line names them.
    pub(crate) path: String,
}

impl Target {
    /// `url`, which must be `http` or `https` with a host; `Err` says why
    /// not, without quoting the URL (its path may be a secret).
    pub(crate) fn parse(url: &str) -> Result<Target, String> {
        let uri: http::Uri = url
            .trim()
            .parse()
            .map_err(|e| format!("is not a URL ({e})"))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            Some(other) => return Err(format!("must be http or https, not {other}")),
            None => return Err("must be http or https, and names no scheme".into()),
        };
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or("names no host")?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        Ok(Target {
            tls,
            host,
            port,
            path,
        })
    }

    /// The scheme, host and port, which logs may show.
    pub(crate) fn receiver(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}:{}", self.host, self.port)
    }
}

impl std::fmt::Debug for Target {
    /// Without the path, which may be a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Target({})", self.receiver())
    }
}

/// What makes TLS connections: *ring*, the platform's roots.
#[derive(Clone)]
pub(crate) struct Client {
    tls: Arc<rustls::ClientConfig>,
    timeout: Duration,
}

/// How one POST went: the status the receiver answered, or why none came.
pub(crate) type Posted = Result<u16, String>;

impl Client {
    /// A client whose every POST takes at most `timeout`.
    pub(crate) fn new(timeout: Duration) -> Result<Client, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Client {
            tls: Arc::new(tls),
            timeout,
        })
    }

    /// POSTs `body` with `headers` to `target`.
    pub(crate) async fn post(
        &self,
        target: &Target,
        headers: &[(&str, String)],
        body: &[u8],
    ) -> Posted {
        let sent = tokio::time::timeout(self.timeout, self.exchange(target, headers, body));
        match sent.await {
            Ok(answered) => answered,
            Err(_) => Err(format!("no answer within {:?}", self.timeout)),
        }
    }

    async fn exchange(&self, target: &Target, headers: &[(&str, String)], body: &[u8]) -> Posted {
        let tcp = TcpStream::connect((target.host.as_str(), target.port))
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        let _ = tcp.set_nodelay(true);
        if !target.tls {
            return exchange(tcp, target, headers, body).await;
        }
        let name = rustls::pki_types::ServerName::try_from(target.host.clone())
            .map_err(|e| format!("not a host name for TLS: {e}"))?;
        let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
        let tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        exchange(tls, target, headers, body).await
    }
}

/// Writes the request on `stream` and reads the status of the answer.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    target: &Target,
    headers: &[(&str, String)],
    body: &[u8],
) -> Posted {
    let host = match (target.tls, target.port) {
        (true, 443) | (false, 80) => target.host.clone(),
        (_, port) => format!("{}:{port}", target.host),
    };
    let mut head = format!(
        "POST {} HTTP/1.1\r\nhost: {host}\r\ncontent-length: {}\r\nconnection: close\r\n",
        target.path,
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let io = |e: std::io::Error| format!("the connection failed: {e}");
    stream.write_all(head.as_bytes()).await.map_err(io)?;
    stream.write_all(body).await.map_err(io)?;
    stream.flush().await.map_err(io)?;
    let mut answer = Vec::with_capacity(256);
    let mut chunk = [0u8; 512];
    while !answer.contains(&b'\n') && answer.len() < 8192 {
        let n = stream.read(&mut chunk).await.map_err(io)?;
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&chunk[..n]);
    }
    status(&answer).ok_or_else(|| "the answer is not HTTP".to_owned())
}

/// The status code of an answer's status line (`HTTP/1.1 204 No Content`).
fn status(answer: &[u8]) -> Option<u16> {
    let line = answer.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    words.next().filter(|v| v.starts_with("HTTP/"))?;
    words.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_taken_apart_or_refused_without_being_quoted() {
        let t = Target::parse("https://hooks.slack.com/services/T0/B0/SECRET?x=1").unwrap();
        assert_eq!(
            (t.tls, t.host.as_str(), t.port, t.path.as_str()),
            (true, "hooks.slack.com", 443, "/services/T0/B0/SECRET?x=1")
        );
        assert_eq!(t.receiver(), "https://hooks.slack.com:443");
        let t = Target::parse("http://[::1]:8080").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("::1", 8080, "/")
        );
        for (bad, says) in [
            ("ftp://h.example/SECRET", "not ftp"),
            ("hooks.example/SECRET", "URL"),
            ("https:///SECRET", "URL"),
        ] {
            let why = Target::parse(bad).unwrap_err();
            assert!(
                why.contains(says) && !why.contains("SECRET"),
                "{bad}: {why}"
            );
        }
    }

    #[test]
    fn a_status_is_read_from_the_status_line() {
        assert_eq!(status(b"HTTP/1.1 204 No Content\r\n"), Some(204));
        assert_eq!(status(b"HTTP/1.0 503\r\n\r\n"), Some(503));
        assert_eq!(status(b"SSH-2.0-OpenSSH\r\n"), None);
        assert_eq!(status(b""), None);
    }
}
