//! The TLS of ifmatch's HTTP clients: rustls over `ring`, trusting the system's roots as
//! rustls-platform-verifier reads them; the provider chosen here, not left to the process's
//! default (which a program using this crate need not install).

use std::sync::Arc;

/// A reqwest client builder whose `https://` connections are made as above (HTTP/1.1); fails
/// as reqwest's own does when the system has no root certificates to read.
pub fn client_builder() -> Result<reqwest::ClientBuilder, rustls::Error> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_platform_verifier()?
        .with_no_client_auth();
    Ok(reqwest::Client::builder().tls_backend_preconfigured(tls))
}
