//! Whose bearer tokens the server takes: the development issuer, a key of the server's own
//! that `ifmatch token` signs with, and the issuers, roles and assignments of an identity file
//! (`--identity`, read by [`ifmatch_azure::identity::Identity::from_config`]).
//!
//! The development issuer's key is kept where the tables are: one server's under its data
//! directory (`auth/issuer.pem`, a file `ifmatch token` reads while the server runs); a
//! fleet's in the tables it shares (Redis, a bucket), so every instance takes the tokens
//! `ifmatch token --backend URL` mints. Whoever comes first makes it; the others read it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use ifmatch_azure::identity::{Identity, Issuer, KeySource};
use ifmatch_azure::token::DevIssuer;
use ifmatch_backends::Choice;
use ifmatch_table::{Change, DateTime, Entity, Expected, TableError, Tables, Value};

/// How often fetched keys are fetched again, rotated or not.
const REFETCH: Duration = Duration::from_secs(3600);

/// The least time between two fetches of one issuer's keys, however many tokens name keys it
/// does not have (a stranger's tokens must not make the server hammer the issuer).
const AT_MOST_EVERY: Duration = Duration::from_secs(10);

/// The table of a fleet's tables that keeps the server's own secrets: `~` begins no
/// account's tables (theirs are `{account}~{name}`), so no account reaches it.
const SERVER_TABLE: &str = "~server~auth";

/// The development issuer's key's place in [`SERVER_TABLE`].
fn issuer_key() -> (String, String) {
    ("issuer".into(), "development".into())
}

/// The development issuer of the backends `choice` names: in the tables a fleet shares, or
/// under the data directory `data`; its key made if not there yet.
pub async fn dev_issuer(choice: &Choice, data: &Path) -> anyhow::Result<DevIssuer> {
    match choice.shared_tables().await? {
        Some(tables) => shared_issuer(&tables).await,
        None => local_issuer(data),
    }
}

/// The development issuer kept in `tables`: read, or made by one conditional insert (two
/// instances starting at once agree on the first's).
async fn shared_issuer<T: Tables>(tables: &T) -> anyhow::Result<DevIssuer> {
    let read = |entity: Entity| match entity.properties.get("pem") {
        Some(Value::String(pem)) => DevIssuer::from_pem(pem.as_bytes())
            .map_err(|e| anyhow::anyhow!("the fleet's development issuer: {e}")),
        _ => anyhow::bail!("the fleet's development issuer: its record holds no key"),
    };
    for _ in 0..3 {
        match tables.get(SERVER_TABLE, &issuer_key()).await {
            Ok(Some(found)) => return read(found),
            Ok(None) | Err(TableError::TableNotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
        tables.create_table(SERVER_TABLE).await?;
        let key = rcgen::KeyPair::generate().context("making the development issuer's key")?;
        let (pk, rk) = issuer_key();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
        let entity = Entity::new(
            &pk,
            &rk,
            DateTime::from_unix(now.as_secs() as i64, now.subsec_nanos()),
            [("pem", Value::String(key.serialize_pem()))],
        );
        let change = Change {
            key: issuer_key(),
            expected: Expected::Absent,
            write: Some(entity.clone()),
        };
        match tables.commit(SERVER_TABLE, &[change]).await {
            Ok(()) => return read(entity),
            // Another instance made it first, or dropped the table between: read again.
            Err(TableError::Conflict { .. } | TableError::TableNotFound(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    anyhow::bail!("the fleet's development issuer: its record changed three times while read")
}

/// The development issuer of the data directory `data`: its key, made if not there yet.
/// Two processes making it at once agree on one (the first to link its file wins).
fn local_issuer(data: &Path) -> anyhow::Result<DevIssuer> {
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

/// The identity a server takes tokens by: the development `issuer`, and `file`'s issuers,
/// roles and assignments (its `jwks` paths read beside it).
pub fn identity(issuer: &DevIssuer, file: Option<&Path>) -> anyhow::Result<Identity> {
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
    Ok(identity.trusting(issuer.issuer()))
}

/// Keeps the keys of `identity`'s issuers that are fetched (a JWKS URL, an OpenID discovery
/// document) current: fetched now, every hour, and soon after a token names a key an issuer
/// does not have (a rotation), at most once every ten seconds each. A failed fetch keeps the keys there
/// were and is logged.
pub async fn keep_keys(identity: Arc<Identity>) {
    let fetched: Vec<&Issuer> = (identity.issuers().iter())
        .filter(|i| i.source != KeySource::Given)
        .collect();
    if fetched.is_empty() {
        return;
    }
    let client = ifmatch_client::https::client_builder()
        .expect("the system's root certificates")
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a client");
    let mut last: Vec<Option<Instant>> = vec![None; fetched.len()];
    loop {
        for (issuer, last) in fetched.iter().zip(&mut last) {
            let due = match last {
                None => true,
                Some(at) => {
                    at.elapsed() >= REFETCH || (issuer.stale() && at.elapsed() >= AT_MOST_EVERY)
                }
            };
            if !due {
                continue;
            }
            *last = Some(Instant::now());
            match fetch(&client, &issuer.source)
                .await
                .and_then(|keys| issuer.set_keys(keys).map_err(|e| anyhow::anyhow!(e)))
            {
                Ok(()) => tracing::info!(issuer = %issuer.issuer, "signing keys fetched"),
                Err(e) => {
                    tracing::warn!(issuer = %issuer.issuer, error = %e, "signing keys not fetched")
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The key set `source` names.
async fn fetch(client: &reqwest::Client, source: &KeySource) -> anyhow::Result<serde_json::Value> {
    let get = |url: String| async move {
        let answer = client.get(&url).send().await?.error_for_status()?;
        anyhow::Ok(serde_json::from_slice::<serde_json::Value>(
            &answer.bytes().await?,
        )?)
    };
    match source {
        KeySource::Given => anyhow::bail!("keys given, not fetched"),
        KeySource::Jwks(url) => get(url.clone()).await,
        KeySource::Discovery(url) => {
            let document = get(url.clone()).await?;
            let jwks =
                (document["jwks_uri"].as_str()).with_context(|| format!("{url}: no jwks_uri"))?;
            get(jwks.to_owned()).await
        }
    }
}
