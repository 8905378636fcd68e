//! TLS to an `https://` origin (S3, Azure Storage, R2 and most origins on the internet speak
//! nothing else): rustls, with the system's trusted roots as `rustls-platform-verifier` reads
//! them and any the operator adds (`--upstream-ca`, for a private CA or a storage emulator's
//! own certificate), the upstream's host as the name the certificate must carry, and HTTP/1.1
//! agreed by ALPN. A certificate that does not verify fails the connection: a 502, with the
//! reason in the log.
//!
//! A certificate in `--upstream-ca` is also trusted as itself, when the origin presents exactly
//! it (still for the upstream's name, still proving it holds its key): the self-signed
//! certificates `openssl req -x509` makes, as storage emulators' guides have one do, say
//! `CA:TRUE`, which the web's rules refuse on a server (`CaUsedAsEndEntity`).

use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::options::ProxyError;

/// How connections to one `https://` origin are made secure.
#[derive(Clone)]
pub(super) struct Tls {
    connector: TlsConnector,
    /// The name the origin's certificate must carry: the upstream's host.
    name: ServerName<'static>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("name", &self.name).finish()
    }
}

impl Tls {
    /// For the origin `host` (a name, or an address, IPv6 in brackets), trusting the system's
    /// roots and those in the PEM file `extra_roots`.
    pub(super) fn new(host: &str, extra_roots: Option<&Path>) -> Result<Self, ProxyError> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_owned())
            .map_err(|_| ProxyError::BadUpstream(host.to_owned()))?;
        let roots = match extra_roots {
            Some(path) => read_roots(path)?,
            None => Vec::new(),
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let platform = rustls_platform_verifier::Verifier::new_with_extra_roots(
            roots.iter().cloned(),
            provider.clone(),
        )
        .map_err(|e| ProxyError::Tls(e.to_string()))?;
        let verifier = Verifier {
            platform,
            pinned: roots,
        };
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| ProxyError::Tls(e.to_string()))?
            .dangerous() // The platform's verifier, and the operator's own certificates.
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        // The origin's connections carry HTTP/1.1 only (see `origin`).
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            connector: TlsConnector::from(Arc::new(config)),
            name,
        })
    }

    /// `tcp`, once its TLS handshake with the origin succeeded.
    pub(super) async fn connect(&self, tcp: TcpStream) -> io::Result<TlsStream<TcpStream>> {
        self.connector.connect(self.name.clone(), tcp).await
    }
}

/// The platform's verifier, which also takes a certificate of the operator's as itself.
#[derive(Debug)]
struct Verifier {
    platform: rustls_platform_verifier::Verifier,
    /// The certificates of `--upstream-ca`.
    pinned: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self
            .pinned
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
        {
            let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
            rustls::client::verify_server_name(&parsed, server_name)?;
            return Ok(ServerCertVerified::assertion());
        }
        (self.platform).verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    // The handshake's signature is checked with the certificate's key either way.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.platform.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.platform.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.platform.supported_verify_schemes()
    }
}

/// The certificates of the PEM file at `path`: at least one.
fn read_roots(path: &Path) -> Result<Vec<CertificateDer<'static>>, ProxyError> {
    let bad = |why: String| ProxyError::UpstreamCa(path.to_owned(), why);
    let roots = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if roots.is_empty() {
        return Err(bad("no PEM certificate in it".into()));
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_addresses_are_what_a_certificate_is_checked_against() {
        for host in ["example.com", "127.0.0.1", "[::1]", "localhost"] {
            assert!(Tls::new(host, None).is_ok(), "{host}");
        }
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let missing = dir.path().join("missing.pem");
        for path in [&empty, &missing] {
            let error = Tls::new("example.com", Some(path)).unwrap_err();
            assert!(matches!(error, ProxyError::UpstreamCa(..)), "{error}");
        }
    }
}
