//! A listener served over HTTPS: the operator's certificate and key (PEM files), or a
//! self-signed certificate made on first start under the data directory and kept there (as
//! the Cosmos DB emulator makes its own), so that clients can be told once to trust it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Where a listener's certificate comes from.
#[derive(Debug, Clone)]
pub enum Certificate {
    /// The operator's PEM files: the chain, then the key.
    Given(PathBuf, PathBuf),
    /// One made on first start for `names` (host names and addresses), kept in the directory.
    SelfSigned(PathBuf, Vec<String>),
}

impl Certificate {
    /// The TLS configuration of a server with this certificate (HTTP/2 and HTTP/1.1 offered
    /// by ALPN), and the path of the certificate a client may be told to trust.
    pub fn config(&self) -> std::io::Result<(Arc<ServerConfig>, PathBuf)> {
        let (cert, key) = match self {
            Self::Given(cert, key) => (cert.clone(), key.clone()),
            Self::SelfSigned(directory, names) => made(directory, names)?,
        };
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert)
            .and_then(|certs| certs.collect())
            .map_err(|e| invalid(&cert, e))?;
        let private = PrivateKeyDer::from_pem_file(&key).map_err(|e| invalid(&key, e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(std::io::Error::other)?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(std::io::Error::other)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok((Arc::new(config), cert))
    }
}

fn invalid(path: &Path, error: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{}: {error}", path.display()),
    )
}

/// The self-signed certificate and key under `directory`, made for `names` if not there yet.
fn made(directory: &Path, names: &[String]) -> std::io::Result<(PathBuf, PathBuf)> {
    let (cert, key) = (directory.join("cert.pem"), directory.join("key.pem"));
    if cert.exists() && key.exists() {
        return Ok((cert, key));
    }
    std::fs::create_dir_all(directory)?;
    let made = rcgen::generate_simple_self_signed(names.to_vec()).map_err(std::io::Error::other)?;
    // The key first, readable by this user alone, then the certificate: a certificate on disk
    // always has its key.
    write_private(&key, made.signing_key.serialize_pem().as_bytes())?;
    std::fs::write(&cert, made.cert.pem())?;
    Ok((cert, key))
}

pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}
