//! The part of Azure's management API (ARM, `Microsoft.Storage`) that the blob service's own
//! protection needs: a container, its time-based retention policy (create or update, read,
//! delete, lock, extend) and its legal holds (set, clear), as `azure-mgmt-storage` and
//! `@azure/arm-storage` call them. Served on the blob endpoint under ARM's paths
//! (`/subscriptions/{s}/resourceGroups/{g}/providers/Microsoft.Storage/storageAccounts/{a}/...`),
//! whatever the subscription and group; the rules are [`crate::container_protection`]'s.

use serde_json::{Value, json};

use crate::container_protection::{Policy, Protection};

/// The audiences of management tokens.
pub const AUDIENCES: [&str; 2] = [
    "https://management.azure.com",
    "https://management.core.windows.net",
];

/// The actions management operations need, below `Microsoft.Storage/storageAccounts/`.
const CONTAINERS: &str = "Microsoft.Storage/storageAccounts/blobServices/containers";

ifmatch_azure::error_codes! {
    /// An error code of the management API, answered as `{"error": {"code", "message"}}`.
    #[non_exhaustive]
    pub enum ArmCode {
    /// A resource type or action this server does not serve.
    InvalidResourceType = NOT_FOUND, "The resource type is not served here: this server's management API serves a blob container, its immutability policy and its legal holds.";
    /// A method the resource does not take.
    MethodNotAllowed = METHOD_NOT_ALLOWED, "The HTTP method is not allowed on this resource.";
    /// An account this server does not serve.
    ResourceNotFound = NOT_FOUND, "The storage account was not found.";
    /// A container that does not exist.
    ContainerNotFound = NOT_FOUND, "The specified container does not exist.";
    /// No credentials, or credentials of a kind the management API does not take.
    AuthenticationFailed = UNAUTHORIZED, "Authentication failed: send a bearer token for https://management.azure.com.";
    /// A token that does not verify.
    InvalidAuthenticationToken = UNAUTHORIZED, "The access token is invalid.";
    /// A token whose principal may not do this.
    AuthorizationFailed = FORBIDDEN, "The client does not have authorization to perform this action over this scope.";
    /// A body that is not the JSON the operation takes.
    InvalidRequestContent = BAD_REQUEST, "The request content was invalid and could not be deserialized.";
    /// A value out of its range, or a setting this server does not serve.
    InvalidParameter = BAD_REQUEST, "A parameter of the request is not valid.";
    /// `If-Match` not the policy's entity tag.
    ContainerImmutabilityPolicyFailure = PRECONDITION_FAILED, "Operation not allowed on immutability policy with incorrect etag.";
    /// A change of a locked policy other than its extension.
    ContainerImmutabilityPolicyLocked = CONFLICT, "The requested operation is not allowed as the container has a locked immutability policy.";
    /// An operation the policy's state does not allow (extending an unlocked policy, a sixth
    /// extension, locking no policy).
    OperationNotAllowed = CONFLICT, "Operation not allowed on immutability policy with current state.";
    /// The store did not answer, or lost every race: retry.
    ServiceUnavailable = SERVICE_UNAVAILABLE, "The server is busy: retry.";
    }
}

/// A management error: its code, and what to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArmError {
    /// The code.
    pub code: ArmCode,
    /// The message.
    pub message: String,
}

impl ArmError {
    /// `code` saying `message`.
    pub fn new(code: ArmCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The error body.
    pub fn body(&self) -> Vec<u8> {
        let body = json!({"error": {"code": self.code.as_str(), "message": self.message}});
        body.to_string().into_bytes()
    }
}

impl From<ArmCode> for ArmError {
    fn from(code: ArmCode) -> Self {
        Self::new(code, code.message())
    }
}

/// What a management path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// The container itself (read).
    Container,
    /// Its immutability policy (read, create or update, delete).
    Policy,
    /// `.../immutabilityPolicies/default/lock`.
    Lock,
    /// `.../immutabilityPolicies/default/extend`.
    Extend,
    /// `.../setLegalHold`.
    SetLegalHold,
    /// `.../clearLegalHold`.
    ClearLegalHold,
}

/// A management request's target: the account, the container and what of it, and the
/// container's resource id (its path, as the request named it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The storage account.
    pub account: String,
    /// The container, or `Err` with why the path names nothing served.
    pub target: Result<(String, Resource), ArmError>,
    /// The path up to the container: its resource `id`.
    pub container_id: String,
}

impl Route {
    /// The management request `path` and `query` name, if it is one: ARM's path to a storage
    /// account (the subscription and the group any) with an `api-version` (which every
    /// management call carries, and no blob operation).
    pub fn parse(path: &str, query: Option<&str>) -> Option<Self> {
        let versioned =
            (query.unwrap_or("").split('&')).any(|pair| pair.starts_with("api-version="));
        if !versioned {
            return None;
        }
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let is = |i: usize, word: &str| {
            segments
                .get(i)
                .is_some_and(|s| s.eq_ignore_ascii_case(word))
        };
        let fixed = [
            (0, "subscriptions"),
            (2, "resourceGroups"),
            (4, "providers"),
            (5, "Microsoft.Storage"),
            (6, "storageAccounts"),
        ];
        if segments.len() < 8 || !fixed.iter().all(|(i, word)| is(*i, word)) {
            return None;
        }
        let account = segments[7].to_owned();
        let unserved = || Err(ArmError::from(ArmCode::InvalidResourceType));
        let rest = &segments[8..];
        let target = match rest {
            [services, default, containers, container, what @ ..]
                if services.eq_ignore_ascii_case("blobServices")
                    && default.eq_ignore_ascii_case("default")
                    && containers.eq_ignore_ascii_case("containers") =>
            {
                let word = |w: &str, s: &&str| s.eq_ignore_ascii_case(w);
                let resource = match what {
                    [] => Some(Resource::Container),
                    [p, d] if word("immutabilityPolicies", p) && word("default", d) => {
                        Some(Resource::Policy)
                    }
                    [p, d, a] if word("immutabilityPolicies", p) && word("default", d) => {
                        match () {
                            _ if word("lock", a) => Some(Resource::Lock),
                            _ if word("extend", a) => Some(Resource::Extend),
                            _ => None,
                        }
                    }
                    [a] if word("setLegalHold", a) => Some(Resource::SetLegalHold),
                    [a] if word("clearLegalHold", a) => Some(Resource::ClearLegalHold),
                    _ => None,
                };
                match resource {
                    Some(resource) => Ok(((*container).to_owned(), resource)),
                    None => unserved(),
                }
            }
            _ => unserved(),
        };
        let container_id = format!("/{}", segments[..segments.len().min(12)].join("/"));
        Some(Self {
            account,
            target,
            container_id,
        })
    }
}

impl Resource {
    /// The action `method` on this resource needs, or 405.
    pub fn action(self, method: &http::Method) -> Result<String, ArmError> {
        use http::Method;
        let policies = format!("{CONTAINERS}/immutabilityPolicies");
        let action = match (self, method) {
            (Self::Container, &Method::GET) => format!("{CONTAINERS}/read"),
            (Self::Policy, &Method::GET) => format!("{policies}/read"),
            (Self::Policy, &Method::PUT) => format!("{policies}/write"),
            (Self::Policy, &Method::DELETE) => format!("{policies}/delete"),
            (Self::Lock, &Method::POST) => format!("{policies}/lock/action"),
            (Self::Extend, &Method::POST) => format!("{policies}/extend/action"),
            (Self::SetLegalHold, &Method::POST) => format!("{CONTAINERS}/setLegalHold/action"),
            (Self::ClearLegalHold, &Method::POST) => format!("{CONTAINERS}/clearLegalHold/action"),
            _ => return Err(ArmCode::MethodNotAllowed.into()),
        };
        Ok(action)
    }
}

/// What a policy's create, update or extension asks: its days and whether append blobs take
/// new blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyAsked {
    /// The retention, in days.
    pub days: u32,
    /// `allowProtectedAppendWrites`, if given.
    pub appends: Option<bool>,
}

fn content(body: &[u8]) -> Result<Value, ArmError> {
    serde_json::from_slice(body).map_err(|e| {
        ArmError::new(
            ArmCode::InvalidRequestContent,
            format!("The request content is not JSON: {e}"),
        )
    })
}

fn invalid(message: impl Into<String>) -> ArmError {
    ArmError::new(ArmCode::InvalidParameter, message)
}

/// Refuses `allowProtectedAppendWritesAll: true` (block blobs taking new blocks under a
/// policy or a hold), which this server does not serve, rather than drop it.
fn no_appends_to_block_blobs(settings: &Value) -> Result<(), ArmError> {
    match settings.get("allowProtectedAppendWritesAll") {
        Some(Value::Bool(true)) => Err(invalid(
            "allowProtectedAppendWritesAll is not supported by this server (append blobs take \
             new blocks with allowProtectedAppendWrites); nothing was changed",
        )),
        _ => Ok(()),
    }
}

/// Reads an ImmutabilityPolicy body (`{"properties": {...}}`).
pub fn policy_asked(body: &[u8]) -> Result<PolicyAsked, ArmError> {
    let value = content(body)?;
    let properties = value.get("properties").unwrap_or(&Value::Null);
    no_appends_to_block_blobs(properties)?;
    let days = (properties.get("immutabilityPeriodSinceCreationInDays"))
        .and_then(Value::as_i64)
        .ok_or_else(|| invalid("properties.immutabilityPeriodSinceCreationInDays is required"))?;
    let days = crate::container_protection::days(days).map_err(invalid)?;
    let appends = match properties.get("allowProtectedAppendWrites") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => return Err(invalid("allowProtectedAppendWrites is true or false")),
    };
    Ok(PolicyAsked { days, appends })
}

/// Reads a LegalHold body (`{"tags": [...]}`): the tags, lowercase.
pub fn tags_asked(body: &[u8]) -> Result<Vec<String>, ArmError> {
    let value = content(body)?;
    no_appends_to_block_blobs(&value)?;
    let tags: Vec<String> = (value.get("tags").and_then(Value::as_array))
        .ok_or_else(|| invalid("tags is a list of strings"))?
        .iter()
        .map(|t| t.as_str().map(str::to_owned))
        .collect::<Option<_>>()
        .ok_or_else(|| invalid("tags is a list of strings"))?;
    crate::container_protection::tags(&tags).map_err(invalid)
}

/// The ImmutabilityPolicy resource of a container whose resource id is `container_id`: its
/// policy, or one of no days (no policy).
pub fn policy_json(container_id: &str, policy: Option<&Policy>) -> Value {
    let (days, state, appends, etag) = match policy {
        Some(p) => (p.days, state(p), p.appends, p.etag.as_str()),
        None => (0, "Unlocked", false, "\"0\""),
    };
    json!({
        "id": format!("{container_id}/immutabilityPolicies/default"),
        "name": "default",
        "type": "Microsoft.Storage/storageAccounts/blobServices/containers/immutabilityPolicies",
        "etag": etag,
        "properties": {
            "immutabilityPeriodSinceCreationInDays": days,
            "state": state,
            "allowProtectedAppendWrites": appends,
        },
    })
}

fn state(policy: &Policy) -> &'static str {
    if policy.locked { "Locked" } else { "Unlocked" }
}

/// The LegalHold answer: whether any hold is set, and their tags.
pub fn hold_json(protection: &Protection) -> Value {
    let tags: Vec<&str> = protection.holds.iter().map(|h| h.tag.as_str()).collect();
    json!({"hasLegalHold": !tags.is_empty(), "tags": tags})
}

/// What a container's resource says of its protection (its `properties`' part).
pub fn container_protection_json(container_id: &str, protection: &Protection) -> Value {
    let holds: Vec<Value> = (protection.holds.iter())
        .map(|h| {
            let at = i64::try_from(h.at).unwrap_or(i64::MAX);
            json!({
                "tag": h.tag,
                "timestamp": ifmatch_azure::iso8601::write_seconds(at, 0),
                "objectIdentifier": h.principal,
                "tenantId": h.tenant,
            })
        })
        .collect();
    let mut out = json!({
        "hasImmutabilityPolicy": protection.policy.is_some(),
        "hasLegalHold": !holds.is_empty(),
        "legalHold": {"hasLegalHold": !holds.is_empty(), "tags": holds},
    });
    if let Some(policy) = &protection.policy {
        let resource = policy_json(container_id, Some(policy));
        out["immutabilityPolicy"] = json!({
            "etag": policy.etag,
            "properties": resource["properties"],
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str =
        "/subscriptions/s/resourceGroups/g/providers/Microsoft.Storage/storageAccounts/acct";

    #[test]
    fn management_paths_name_a_container_and_what_of_it() {
        let route = |rest: &str| {
            Route::parse(&format!("{BASE}{rest}"), Some("api-version=2023-05-01")).unwrap()
        };
        let c = "/blobServices/default/containers/box";
        let r = route(&format!("{c}/immutabilityPolicies/default/lock"));
        assert_eq!(r.account, "acct");
        assert_eq!(r.target, Ok(("box".into(), Resource::Lock)));
        assert_eq!(r.container_id, format!("{BASE}{c}"));
        assert_eq!(route(c).target, Ok(("box".into(), Resource::Container)));
        assert_eq!(
            route(&format!("{c}/setLegalHold")).target,
            Ok(("box".into(), Resource::SetLegalHold))
        );
        let unserved = Err(ArmError::from(ArmCode::InvalidResourceType));
        assert_eq!(route("/listKeys").target, unserved);
        assert_eq!(
            route(&format!("{c}/immutabilityPolicies/other")).target,
            unserved
        );
        let versioned = Some("api-version=2023-05-01");
        assert_eq!(Route::parse("/acct/box/blob", versioned), None);
        assert_eq!(
            Route::parse("/subscriptions/s/resourceGroups/g", versioned),
            None
        );
        assert_eq!(
            Route::parse(BASE, Some("comp=list")),
            None,
            "a blob of its own"
        );
    }

    #[test]
    fn bodies_are_read_with_their_limits() {
        let asked = |days: i64| {
            policy_asked(
                format!(r#"{{"properties":{{"immutabilityPeriodSinceCreationInDays":{days}}}}}"#)
                    .as_bytes(),
            )
        };
        assert_eq!(asked(1).unwrap().days, 1);
        assert_eq!(asked(0).unwrap_err().code, ArmCode::InvalidParameter);
        assert_eq!(asked(146_001).unwrap_err().code, ArmCode::InvalidParameter);
        let all = br#"{"properties":{"immutabilityPeriodSinceCreationInDays":1,"allowProtectedAppendWritesAll":true}}"#;
        assert_eq!(
            policy_asked(all).unwrap_err().code,
            ArmCode::InvalidParameter
        );
        assert_eq!(
            policy_asked(b"{").unwrap_err().code,
            ArmCode::InvalidRequestContent
        );
        assert_eq!(tags_asked(br#"{"tags":["Case1"]}"#).unwrap(), vec!["case1"]);
        assert_eq!(
            tags_asked(br#"{"tags":[1]}"#).unwrap_err().code,
            ArmCode::InvalidParameter
        );
    }
}
