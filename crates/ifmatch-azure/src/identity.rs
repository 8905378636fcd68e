//! Who a bearer token names and what they may do: the issuers whose tokens are trusted (their
//! signing keys), the roles (Azure's built-in data roles and custom ones) and their
//! assignments to principals at scopes, read from a configuration file; and [`Access`], what
//! one request's token allows. Checking a token is [`crate::token`]'s.
//!
//! The configuration (`ifmatch serve --identity FILE`), JSON:
//!
//! ```json
//! {
//!   "issuers": [{ "issuer": "https://login.microsoftonline.com/{tenant}/v2.0",
//!                 "tenant": "{tenant}", "jwks": "keys.json" }],
//!   "audiences": ["api://my-storage"],
//!   "roles": [{ "name": "Blob Writer", "dataActions": ["Microsoft.Storage/.../blobs/write"] }],
//!   "assignments": [{ "principal": "{object id}", "role": "Storage Blob Data Reader",
//!                     "scope": "/blobServices/default/containers/box" }]
//! }
//! ```

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use crate::roles::{self, RoleDefinition};
use crate::signature::Signatures;

/// The tenant of the development issuer (`ifmatch token`): no Entra tenant has this id.
pub const DEV_TENANT: &str = "00000000-0000-0000-0000-0000000000d1";

/// The development issuer's name (`iss`).
pub fn dev_issuer() -> String {
    format!("https://login.ifmatch.localhost/{DEV_TENANT}/v2.0")
}

/// An issuer whose tokens are trusted: its `iss`, its tenant, its signing keys (a JWKS),
/// given or fetched (and fetched again as they rotate: see [`Issuer::source`]).
#[derive(Clone)]
pub struct Issuer {
    /// Its `iss` claim, exactly.
    pub issuer: String,
    /// The tenant its tokens must name (`tid`), if any.
    pub tenant: Option<String>,
    /// The development issuer: its tokens carry their own role assignments (they are signed
    /// with the server's own key, as trusted as this file).
    pub development: bool,
    /// Where its keys come from.
    pub source: KeySource,
    keys: Arc<RwLock<serde_json::Value>>,
    /// A token named a key it does not have: its keys may have rotated.
    stale: Arc<AtomicBool>,
}

/// Where an issuer's signing keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// Given once (a file, the development issuer's own key).
    Given,
    /// A JWKS document at this URL, fetched at start and again as keys rotate.
    Jwks(String),
    /// An OpenID Connect discovery document at this URL, whose `jwks_uri` names the keys.
    Discovery(String),
}

impl fmt::Debug for Issuer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Issuer")
            .field("issuer", &self.issuer)
            .field("tenant", &self.tenant)
            .field("source", &self.source)
            .field("development", &self.development)
            .finish()
    }
}

impl Issuer {
    /// An issuer with `keys` (a JSON Web Key Set) from `source`.
    pub fn new(
        issuer: impl Into<String>,
        tenant: Option<String>,
        keys: serde_json::Value,
        source: KeySource,
    ) -> Result<Self, String> {
        let issuer = Self {
            issuer: issuer.into(),
            tenant,
            development: false,
            source,
            keys: Arc::default(),
            stale: Arc::default(),
        };
        issuer.set_keys(keys)?;
        Ok(issuer)
    }

    /// The development issuer with the public `keys` (a JSON Web Key Set) of its key: its
    /// tokens carry their own role assignments, so only a key as trusted as the server's own
    /// configuration may be given here (`ifmatch token --jwks` prints a data directory's).
    pub fn development(keys: serde_json::Value) -> Result<Self, String> {
        let tenant = Some(DEV_TENANT.to_owned());
        let mut issuer = Self::new(dev_issuer(), tenant, keys, KeySource::Given)?;
        issuer.development = true;
        Ok(issuer)
    }

    /// Its signing keys from now on (a JSON Web Key Set).
    pub fn set_keys(&self, keys: serde_json::Value) -> Result<(), String> {
        if !keys.get("keys").is_some_and(|k| k.is_array()) {
            return Err(format!(
                "the keys of {}: a JSON Web Key Set ({{\"keys\": [...]}}) is needed",
                self.issuer
            ));
        }
        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = keys;
        self.stale.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// Its key of id `kid`, if it has one (else its keys are marked as wanting a fetch).
    pub fn key(&self, kid: &str) -> Option<serde_json::Value> {
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        let found = (keys["keys"].as_array().into_iter().flatten())
            .find(|key| key["kid"].as_str() == Some(kid))
            .cloned();
        if found.is_none() {
            self.stale.store(true, Ordering::Relaxed);
        }
        found
    }

    /// Whether a token named a key it does not have since its keys were last set.
    pub fn stale(&self) -> bool {
        self.stale.load(Ordering::Relaxed)
    }
}

/// A role assigned to a principal (its object id, `oid`) at a scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    /// The principal's object id.
    #[serde(alias = "principalId")]
    pub principal: String,
    /// The role's name or id.
    #[serde(alias = "roleDefinitionId")]
    pub role: String,
    /// Where it holds (see [`roles::scope`]): `/` for the whole account.
    #[serde(default = "account_scope")]
    pub scope: String,
}

fn account_scope() -> String {
    "/".into()
}

/// The trusted issuers, roles and assignments of a server.
#[derive(Debug, Clone)]
pub struct Identity {
    pub(crate) issuers: Vec<Issuer>,
    /// Audiences taken beside each service's own.
    pub(crate) audiences: Vec<String>,
    roles: Vec<RoleDefinition>,
    assignments: Vec<Assignment>,
    /// What checks a token's signature: the host's cryptography.
    pub(crate) signatures: Option<Arc<dyn Signatures>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    issuers: Vec<IssuerConfig>,
    #[serde(default)]
    audiences: Vec<String>,
    #[serde(default)]
    roles: Vec<RoleDefinition>,
    #[serde(default)]
    assignments: Vec<Assignment>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct IssuerConfig {
    issuer: String,
    #[serde(default)]
    tenant: Option<String>,
    /// A JWKS file.
    #[serde(default)]
    jwks: Option<String>,
    /// A JWKS URL.
    #[serde(default)]
    jwks_uri: Option<String>,
    /// An OpenID Connect discovery URL.
    #[serde(default)]
    discovery: Option<String>,
}

impl Identity {
    /// No issuer, no assignment: every token refused.
    pub fn new() -> Self {
        Self {
            issuers: Vec::new(),
            audiences: Vec::new(),
            roles: roles::built_in(),
            assignments: Vec::new(),
            signatures: native_signatures(),
        }
    }

    /// Reads a configuration (JSON, see the module's text); `load` reads the file a `jwks`
    /// entry names.
    pub fn from_config(
        text: &str,
        load: impl Fn(&str) -> Result<String, String>,
    ) -> Result<Self, String> {
        let config: Config =
            serde_json::from_str(text).map_err(|e| format!("the identity file: {e}"))?;
        let mut identity = Self::new();
        for issuer in config.issuers {
            let no_keys = || serde_json::json!({ "keys": [] });
            let (keys, source) = match (issuer.jwks, issuer.jwks_uri, issuer.discovery) {
                (Some(file), None, None) => {
                    let keys = serde_json::from_str(&load(&file)?)
                        .map_err(|e| format!("the keys of {}: {e}", issuer.issuer))?;
                    (keys, KeySource::Given)
                }
                (None, Some(url), None) => (no_keys(), KeySource::Jwks(url)),
                (None, None, Some(url)) => (no_keys(), KeySource::Discovery(url)),
                _ => {
                    return Err(format!(
                        "issuer {}: one of jwks (a file), jwksUri or discovery (URLs)",
                        issuer.issuer
                    ));
                }
            };
            let issuer = Issuer::new(issuer.issuer, issuer.tenant, keys, source)?;
            identity.issuers.push(issuer);
        }
        identity.audiences = config.audiences;
        for role in config.roles {
            if identity.roles.iter().any(|r| r.is(&role.name)) {
                return Err(format!("role {:?} is defined twice", role.name));
            }
            identity.roles.push(role);
        }
        for assignment in &config.assignments {
            identity.role(&assignment.role)?;
            roles::scope(&assignment.scope).ok_or_else(|| {
                format!(
                    "assignment of {:?}: scope {:?} is not `/...` nor an Azure resource id",
                    assignment.principal, assignment.scope
                )
            })?;
        }
        identity.assignments = config.assignments;
        Ok(identity)
    }

    /// This identity with its tokens' signatures checked by `signatures` (natively,
    /// `crate::signature::NativeSignatures`, feature `tokens`, already is).
    pub fn with_signatures(mut self, signatures: Arc<dyn Signatures>) -> Self {
        self.signatures = Some(signatures);
        self
    }

    /// This identity also trusting `issuer`.
    pub fn trusting(mut self, issuer: Issuer) -> Self {
        self.issuers.push(issuer);
        self
    }

    /// Its issuers.
    pub fn issuers(&self) -> &[Issuer] {
        &self.issuers
    }

    /// The tenant a challenge names: the first issuer's, else the development one.
    pub fn tenant(&self) -> &str {
        (self.issuers.iter())
            .find_map(|i| i.tenant.as_deref())
            .unwrap_or(DEV_TENANT)
    }

    fn role(&self, name: &str) -> Result<&RoleDefinition, String> {
        // A role definition id may be given as Azure's full resource id.
        let short = name.rsplit('/').next().unwrap_or(name);
        (self.roles.iter())
            .find(|r| r.is(name) || r.is(short))
            .ok_or_else(|| format!("no role is named {name:?}"))
    }

    /// What `principal` may do in `account`: its assignments from the configuration, and
    /// `carried` (a development token's own), those of unknown roles or scopes dropped.
    pub fn access(&self, principal: &str, account: &str, carried: &[Assignment]) -> Access {
        let mut grants = Vec::new();
        let configured = self.assignments.iter().filter(|a| a.principal == principal);
        for assignment in configured.chain(carried) {
            let (Ok(role), Some((named, scope))) =
                (self.role(&assignment.role), roles::scope(&assignment.scope))
            else {
                continue;
            };
            if named.is_none_or(|named| named.eq_ignore_ascii_case(account)) {
                grants.push((role.clone(), scope));
            }
        }
        Access {
            principal: principal.to_owned(),
            tenant: String::new(),
            carried: carried.to_vec(),
            grants,
        }
    }

    /// What `principal` may do in `account` now, without a token of theirs at hand (a user
    /// delegation SAS they signed): the file's assignments, and `carried`, those their
    /// development token carried when it got the key (which the service keeps).
    pub fn delegating_access(
        &self,
        principal: &str,
        account: &str,
        carried: &[Assignment],
    ) -> Access {
        self.access(principal, account, carried)
    }
}

/// The signatures a native build checks (ring); none otherwise, until the host gives
/// its own ([`Identity::with_signatures`]).
fn native_signatures() -> Option<Arc<dyn Signatures>> {
    #[cfg(feature = "tokens")]
    return Some(Arc::new(crate::signature::NativeSignatures));
    #[cfg(not(feature = "tokens"))]
    None
}

impl Default for Identity {
    fn default() -> Self {
        Self::new()
    }
}

/// What a request's bearer token allows: its principal's roles at their scopes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// The principal's object id.
    pub principal: String,
    /// The tenant its token named (`tid`), if it came with a token.
    pub tenant: String,
    /// The assignments its development token carried (none for another issuer's: its
    /// principal's are the identity file's).
    pub carried: Vec<Assignment>,
    grants: Vec<(RoleDefinition, String)>,
}

impl Access {
    /// What a principal holding only `role` at `scope` in an account may do (the built-in
    /// roles): for checks of what each operation needs.
    pub fn holding(role: &str, scope: &str) -> Self {
        let carried = [Assignment {
            principal: "p".into(),
            role: role.into(),
            scope: scope.into(),
        }];
        Identity::new().access("p", "account", &carried)
    }

    /// Whether a role assigned at a scope covering `resource` permits one of `actions`.
    pub fn allows(&self, actions: &[&str], resource: &str) -> bool {
        self.grants.iter().any(|(role, scope)| {
            roles::covers(scope, resource) && actions.iter().any(|a| role.permits(a))
        })
    }

    /// Whether a role assigned at any scope permits one of `actions` (Cosmos DB's account read,
    /// which a principal with any assignment may make).
    pub fn allows_somewhere(&self, actions: &[&str]) -> bool {
        (self.grants.iter()).any(|(role, _)| actions.iter().any(|a| role.permits(a)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CommonCode;

    const READER: &str = "Storage Blob Data Reader";

    #[test]
    fn a_configuration_is_read_and_its_mistakes_named() {
        let load = |_: &str| Ok(r#"{"keys": []}"#.to_owned());
        let text = r#"{
            "issuers": [{"issuer": "https://sts.example/t/", "tenant": "t", "jwks": "k.json"}],
            "roles": [{"name": "Writer", "dataActions": ["Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write"]}],
            "assignments": [
                {"principal": "p", "role": "Storage Blob Data Reader", "scope": "/blobServices/default/containers/box"},
                {"principal": "p", "role": "Writer", "scope": "/subscriptions/s/resourceGroups/g/providers/Microsoft.Storage/storageAccounts/other"}
            ]
        }"#;
        let identity = Identity::from_config(text, load).unwrap();
        assert_eq!(identity.tenant(), "t");
        let access = identity.access("p", "devstoreaccount1", &[]);
        let read = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/read";
        let write = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write";
        assert!(access.allows(&[read], "/blobServices/default/containers/box/blobs/a"));
        assert!(!access.allows(&[read], "/blobServices/default/containers/other/blobs/a"));
        // The writer role is assigned in another account only.
        assert!(!access.allows(&[write], "/blobServices/default/containers/box/blobs/a"));
        assert!((identity.access("p", "other", &[])).allows(&[write], "/blobServices/default/x"));
        assert!(
            !identity
                .access("q", "devstoreaccount1", &[])
                .allows(&[read], "/")
        );
        let refused = access.check(&[write], "/blobServices/default/containers/box");
        assert_eq!(
            refused.unwrap_err().code,
            CommonCode::AuthorizationPermissionMismatch
        );
        for (bad, says) in [
            (
                r#"{"assignments": [{"principal": "p", "role": "Nobody"}]}"#,
                "no role",
            ),
            (
                r#"{"assignments": [{"principal": "p", "role": "Storage Blob Data Reader", "scope": "box"}]}"#,
                "scope",
            ),
            (
                r#"{"roles": [{"name": "storage blob data reader"}]}"#,
                "twice",
            ),
            (r#"{"issuer": []}"#, "unknown field"),
            (r#"{"issuers": [{"issuer": "x"}]}"#, "one of jwks"),
        ] {
            let error = Identity::from_config(bad, load).unwrap_err();
            assert!(error.contains(says), "{error}");
        }
        let carried = [Assignment {
            principal: "d".into(),
            role: READER.into(),
            scope: "/".into(),
        }];
        assert!(
            Identity::new()
                .access("d", "a", &carried)
                .allows(&[read], "/x")
        );
    }
}
