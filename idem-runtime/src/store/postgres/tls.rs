//! TLS for [`PostgresStore`](super::PostgresStore) (feature
//! `postgres-tls`): libpq's `sslmode`s on rustls (with *ring*).
//!
//! `prefer` and `require` encrypt without checking the certificate, as
//! libpq does (`require` checks the chain when a root certificate is
//! given); `verify-ca` checks the chain; `verify-full` also the server's
//! name. The roots are, in order: [`PostgresOptions::tls_root_ca`](super::PostgresOptions::tls_root_ca),
//! the URL's `sslrootcert` (a PEM file; `system` for the platform's), or
//! the platform's.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::url::SslMode;
use crate::error::StoreError;

/// The connector for `mode`: `None` for plaintext.
pub(super) fn connector(
    mode: SslMode,
    root_pem: Option<&[u8]>,
    root_file: Option<&str>,
) -> Result<Option<MakeRustlsConnect>, StoreError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let given = root_pem.is_some() || root_file.is_some_and(|f| f != "system");
    let verifier: Arc<dyn ServerCertVerifier> = match mode {
        SslMode::Disable => return Ok(None),
        SslMode::Prefer | SslMode::Require if !given => {
            Arc::new(Unchecked(provider.signature_verification_algorithms))
        }
        SslMode::Prefer | SslMode::Require | SslMode::VerifyCa => {
            Arc::new(ChainOnly(webpki(root_pem, root_file, &provider)?))
        }
        SslMode::VerifyFull => webpki(root_pem, root_file, &provider)?,
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(Some(MakeRustlsConnect::new(config)))
}

/// The standard verifier (chain and name) over the roots.
fn webpki(
    root_pem: Option<&[u8]>,
    root_file: Option<&str>,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, StoreError> {
    let roots = Arc::new(roots(root_pem, root_file)?);
    WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(tls_error)
}

fn roots(root_pem: Option<&[u8]>, root_file: Option<&str>) -> Result<RootCertStore, StoreError> {
    let mut store = RootCertStore::empty();
    let certs: Vec<CertificateDer<'static>> = match (root_pem, root_file) {
        (Some(pem), _) => CertificateDer::pem_slice_iter(pem)
            .collect::<Result<_, _>>()
            .map_err(|e| tls_error(format!("the root certificate PEM: {e}")))?,
        (None, Some(file)) if file != "system" => CertificateDer::pem_file_iter(file)
            .and_then(|certs| certs.collect::<Result<_, _>>())
            .map_err(|e| tls_error(format!("sslrootcert {file:?}: {e}")))?,
        _ => rustls_native_certs::load_native_certs().certs,
    };
    let (added, _) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err(tls_error(
            "no usable root certificate to verify the server with",
        ));
    }
    Ok(store)
}

fn tls_error(e: impl std::fmt::Display) -> StoreError {
    StoreError::backend(format!("PostgreSQL TLS: {e}"))
}

/// `prefer` and `require` without a root: encrypted, the certificate not
/// checked (the handshake's signatures still are).
#[derive(Debug)]
struct Unchecked(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// `verify-ca`: the standard verifier, but a certificate for another name
/// passes. webpki checks the chain before the name, so a name error means
/// the chain held.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
