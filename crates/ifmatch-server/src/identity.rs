//! Whose bearer tokens the server takes: the development issuer, a key of the server's own
//! made on first start under the data directory (`auth/issuer.pem`) that `ifmatch token`
//! signs with, and the issuers, roles and assignments of an identity file
//! (`--identity`, read by [`ifmatch_azure::identity::Identity::from_config`]).

use std::path::Path;

use anyhow::Context;
use ifmatch_azure::identity::Identity;
use ifmatch_azure::token::DevIssuer;

/// The development issuer of the data directory `data`: its key, made if not there yet.
/// Two processes making it at once agree on one (the first to link its file wins).
pub fn dev_issuer(data: &Path) -> anyhow::Result<DevIssuer> {
    let directory = data.join("auth");
    let path = directory.join("issuer.pem");
    if !path.exists() {
        std::fs::create_dir_all(&directory)
            .with_context(|| format!("creating {}", directory.display()))?;
        let key = rcgen::KeyPair::generate().context("making the development issuer's key")?;
        let draft = directory.join(format!("issuer.{}.pem", std::process::id()));
        crate::https::write_private(&draft, key.serialize_pem().as_bytes())?;
        let linked = std::fs::hard_link(&draft, &path);
        std::fs::remove_file(&draft)?;
        match linked {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(e).with_context(|| format!("writing {}", path.display()));
            }
            _ => {}
        }
    }
    let pem = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    DevIssuer::from_pem(&pem).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// The identity a server over `data` takes tokens by: the development issuer, and `file`'s
/// issuers, roles and assignments (its `jwks` paths read beside it).
pub fn identity(data: &Path, file: Option<&Path>) -> anyhow::Result<Identity> {
    let identity = match file {
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            let beside = file.parent().unwrap_or(Path::new("."));
            let load = |name: &str| {
                let path = beside.join(name);
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
            };
            Identity::from_config(&text, load)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?
        }
        None => Identity::new(),
    };
    Ok(identity.trusting(dev_issuer(data)?.issuer()))
}
