//! The TLS of ifmatch's HTTP clients: rustls over `ring`, trusting the system's roots as
//! rustls-platform-verifier reads them; the provider chosen here, not left to the process's
//! default (which a program using this crate need not install).

use std::sync::{Arc, OnceLock};

/// A reqwest client builder whose `https://` connections are made as above (HTTP/1.1); fails
/// as reqwest's own does when the system has no root certificates to read.
pub fn client_builder() -> Result<reqwest::ClientBuilder, rustls::Error> {
    Ok(reqwest::Client::builder().tls_backend_preconfigured(tls()?))
}

/// The one configuration every client of the process shares: its verifier reads the system's
/// roots once, not once a client.
fn tls() -> Result<rustls::ClientConfig, rustls::Error> {
    use rustls_platform_verifier::BuilderVerifierExt;
    static MADE: OnceLock<rustls::ClientConfig> = OnceLock::new();
    if let Some(made) = MADE.get() {
        return Ok(made.clone());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_platform_verifier()?
        .with_no_client_auth();
    Ok(MADE.get_or_init(|| tls).clone())
}
