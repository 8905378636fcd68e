//! Whose bearer tokens the Worker takes, judged by the same code as the native server's
//! (`ifmatch_azure::token`), their signatures checked by WebCrypto (`signatures.rs`):
//!
//! - the development issuer whose public keys the `DEV_ISSUER_JWKS` secret (or var) holds:
//!   `ifmatch token --data DIR --jwks` prints them, and `ifmatch token --data DIR` mints
//!   tokens the Worker then takes, each carrying its own roles;
//! - the issuers, roles and assignments of the `IDENTITY` secret: the identity file of
//!   `ifmatch serve --identity`, where an issuer's `jwks` names another secret or var that
//!   holds its key set, and `jwksUri` / `discovery` name URLs the Worker fetches.
//!
//! Kept per isolate, and read again when the secrets change. Before a request with credentials
//! is judged ([`ready`]), fetched keys are fetched (at the isolate's first such request, every
//! hour after, and soon after a token named a key its issuer does not have, a rotation, at
//! most every ten seconds), then the signature of the token it carries is checked.

use std::sync::{Arc, LazyLock, Mutex};

use ifmatch_azure::identity::{Identity, Issuer, KeySource};
use serde_json::Value as Json;
use worker::{Env, Fetch, Url};

use crate::signatures::WebCrypto;

/// How often fetched keys are fetched again, rotated or not, in milliseconds.
const REFETCH: u64 = 3_600_000;

/// The least time between two fetches of one issuer's keys, in milliseconds.
const AT_MOST_EVERY: u64 = 10_000;

/// The identity of this isolate, with the text it was read from and when each issuer's keys
/// were last fetched.
struct Kept {
    config: (Option<String>, Option<String>),
    identity: Arc<Identity>,
    fetched: Vec<Option<u64>>,
}

static KEPT: Mutex<Option<Kept>> = Mutex::new(None);

/// The signatures this isolate checked.
static WEBCRYPTO: LazyLock<Arc<WebCrypto>> = LazyLock::new(Arc::default);

/// A secret, or else a var, of this name.
fn setting(env: &Env, name: &str) -> Option<String> {
    (env.secret(name).ok())
        .or_else(|| env.var(name).ok())
        .map(|v| v.to_string())
}

/// The identity the Worker takes tokens by, if it is given one (neither secret: none, and
/// every token is refused).
pub fn identity(env: &Env) -> worker::Result<Option<Arc<Identity>>> {
    let config = (setting(env, "IDENTITY"), setting(env, "DEV_ISSUER_JWKS"));
    if config == (None, None) {
        return Ok(None);
    }
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(kept) = kept.as_ref().filter(|k| k.config == config) {
        return Ok(Some(kept.identity.clone()));
    }
    let identity = Arc::new(read(env, &config).map_err(worker::Error::RustError)?);
    *kept = Some(Kept {
        config,
        fetched: vec![None; identity.issuers().len()],
        identity: identity.clone(),
    });
    Ok(Some(identity))
}

fn read(env: &Env, (file, dev): &(Option<String>, Option<String>)) -> Result<Identity, String> {
    let identity = match file {
        Some(text) => Identity::from_config(text, |name| {
            setting(env, name).ok_or_else(|| format!("no secret or var {name} holds its keys"))
        })
        .map_err(|e| format!("the IDENTITY secret: {e}"))?,
        None => Identity::new(),
    };
    let identity = identity.with_signatures(WEBCRYPTO.clone());
    match dev {
        Some(keys) => {
            let keys = serde_json::from_str(keys).map_err(|e| format!("DEV_ISSUER_JWKS: {e}"))?;
            let issuer = Issuer::development(keys).map_err(|e| format!("DEV_ISSUER_JWKS: {e}"))?;
            Ok(identity.trusting(issuer))
        }
        None => Ok(identity),
    }
}

/// Readies `identity` for a request whose `Authorization` header is `authorization`: the keys
/// that are due fetched, the signature of the token it carries checked.
pub async fn ready(identity: &Identity, authorization: &str) {
    keep_keys(identity).await;
    WEBCRYPTO.check_ahead(identity, authorization).await;
}

/// Fetches the keys of `identity`'s issuers given by URL that are due (see the module's
/// text). A failed fetch keeps the keys there were and is logged.
async fn keep_keys(identity: &Identity) {
    let now = worker::Date::now().as_millis();
    let due: Vec<usize> = {
        let kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
        let Some(kept) = kept.as_ref() else { return };
        (identity.issuers().iter().zip(&kept.fetched).enumerate())
            .filter(|(_, (issuer, last))| {
                issuer.source != KeySource::Given
                    && last.is_none_or(|at| {
                        let since = now.saturating_sub(at);
                        since >= REFETCH || (issuer.stale() && since >= AT_MOST_EVERY)
                    })
            })
            .map(|(i, _)| i)
            .collect()
    };
    for i in due {
        let issuer = &identity.issuers()[i];
        if let Some(kept) = KEPT.lock().unwrap_or_else(|e| e.into_inner()).as_mut()
            && let Some(last) = kept.fetched.get_mut(i)
        {
            *last = Some(now);
        }
        match fetch(&issuer.source)
            .await
            .and_then(|keys| issuer.set_keys(keys))
        {
            Ok(()) => worker::console_log!("the signing keys of {} fetched", issuer.issuer),
            Err(e) => {
                worker::console_warn!("the signing keys of {} not fetched: {e}", issuer.issuer)
            }
        }
    }
}

/// The key set `source` names.
async fn fetch(source: &KeySource) -> Result<Json, String> {
    async fn get(url: &str) -> Result<Json, String> {
        let url = Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
        let mut answer =
            (Fetch::Url(url.clone()).send().await).map_err(|e| format!("{url}: {e}"))?;
        if answer.status_code() != 200 {
            return Err(format!("{url}: status {}", answer.status_code()));
        }
        answer.json().await.map_err(|e| format!("{url}: {e}"))
    }
    match source {
        KeySource::Given => Err("keys given, not fetched".into()),
        KeySource::Jwks(url) => get(url).await,
        KeySource::Discovery(url) => {
            let document = get(url).await?;
            let jwks =
                (document["jwks_uri"].as_str()).ok_or_else(|| format!("{url}: no jwks_uri"))?;
            get(jwks).await
        }
    }
}
