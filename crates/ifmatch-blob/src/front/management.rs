//! The management API's container operations ([`crate::management`]): a container's own
//! retention policy and legal holds, each change one compare-and-swap of the container's
//! record, and what a change of a blob answers to them ([`Front::protection_for`]).
//!
//! Credentials: a bearer token for the management audience, over HTTPS, whose principal holds
//! the operation's action at the container; or none when the operator chose anonymous access.
//! Account keys and shared access signatures reach no management operation (as in Azure).

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{HeaderMap, Method, StatusCode};
use ifmatch_azure::Client;
use ifmatch_azure::Env;
use ifmatch_azure::identity::Access;
use serde_json::Value;

use super::admission::Admitted;
use super::answers::Answer;
use super::gate::Protected;
use super::state::Front;
use super::swap::Step;
use crate::body::{Incoming, ResponseBody};
use crate::container_protection::{Change, MAX_EXTENSIONS, Policy, Protection};
use crate::error_code::ErrorCode;
use crate::management::{self, ArmCode, ArmError, Resource, Route};
use crate::operation::Operation;
use crate::precondition;
use crate::record::Record;
use crate::store::{Key, Objects, Records};

type Managed = Result<(Value, Option<String>), ArmError>;

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// The container's own protection, read for a request that would change a blob of it
    /// (a `PUT` or `DELETE` naming a blob, which the gate judges as a write): `None` for any
    /// other, or a container that has none. Staging a block, a lease, index tags and a blob's
    /// own protection are never refused by it: they cost no read of the container (a chunked
    /// upload's every block would).
    pub(super) async fn protection_for(
        &self,
        admitted: &Admitted<'_>,
        method: &Method,
    ) -> super::failure::Result<Option<Protected>> {
        match protected_change(admitted, method) {
            // Boxed only here: most requests read nothing of their container.
            Some(change) => Box::pin(self.container_protection(admitted, change)).await,
            None => Ok(None),
        }
    }

    async fn container_protection(
        &self,
        admitted: &Admitted<'_>,
        change: Change,
    ) -> super::failure::Result<Option<Protected>> {
        let container = self.records.get(&admitted.container).await?;
        let protection = container.and_then(|c| c.protection.clone());
        Ok((protection.filter(|p| !p.is_empty()))
            .map(|protection| Protected { protection, change }))
    }

    /// A management request ([`Route`]): its JSON answer, or its JSON error.
    pub(super) async fn manage(
        &self,
        parts: &http::request::Parts,
        client: Client,
        body: impl Incoming,
        route: Route,
    ) -> Answer<O::Reader> {
        let managed = match self.managed(parts, client, body, route).await {
            Ok(managed) => managed,
            Err(error) => {
                let mut answer = json_answer(error.code.status(), error.body());
                if let Ok(code) = HeaderValue::from_str(error.code.as_str()) {
                    answer.headers_mut().insert("x-ms-error-code", code);
                }
                return answer;
            }
        };
        let (value, etag) = managed;
        let mut answer = json_answer(StatusCode::OK, value.to_string().into_bytes());
        if let Some(etag) = etag.and_then(|e| HeaderValue::try_from(e).ok()) {
            answer.headers_mut().insert(header::ETAG, etag);
        }
        answer
    }

    async fn managed(
        &self,
        parts: &http::request::Parts,
        client: Client,
        body: impl Incoming,
        route: Route,
    ) -> Managed {
        let account = (self.accounts.get(&route.account)).ok_or_else(|| {
            ArmError::new(
                ArmCode::ResourceNotFound,
                format!(
                    "The storage account {:?} is not served here.",
                    route.account
                ),
            )
        })?;
        let (container, resource) = route.target?;
        let action = resource.action(&parts.method)?;
        let scope = format!("/blobServices/default/containers/{container}");
        let access = self.management_access(parts, client, account)?;
        if let Some(access) = &access
            && !access.allows(&[&action], &scope)
        {
            return Err(ArmError::new(
                ArmCode::AuthorizationFailed,
                format!(
                    "The client '{}' does not have authorization to perform action \
                     '{action}' over scope '{scope}' of account {:?}.",
                    access.principal,
                    account.name()
                ),
            ));
        }
        let key = Key::Container(self.accounts.stored(account, &container));
        let container_id = route.container_id;
        let if_match = (parts.headers.get(header::IF_MATCH))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = read_body(body).await?;
        match (resource, &parts.method) {
            (Resource::Container, _) => {
                let record = self.managed_container(&key).await?;
                Ok((container_json(&container_id, &container, &record), None))
            }
            (Resource::Policy, &Method::GET) => {
                let record = self.managed_container(&key).await?;
                let policy = record.protection.as_ref().and_then(|p| p.policy.as_ref());
                matches(if_match.as_deref(), policy)?;
                Ok(policy_answer(&container_id, policy))
            }
            (Resource::SetLegalHold | Resource::ClearLegalHold, _) => {
                let tags = management::tags_asked(&body)?;
                // Who set a hold: the token's principal and tenant (none without one).
                let who = access.map(|a| (a.principal, a.tenant)).unwrap_or_default();
                let now = crate::record::unix_seconds(self.env.now());
                let set = resource == Resource::SetLegalHold;
                let protection = self
                    .change_protection(&key, |protection| match set {
                        true => protection
                            .hold(tags.clone(), now, (&who.0, &who.1))
                            .map_err(|why| ArmError::new(ArmCode::InvalidParameter, why)),
                        false => {
                            protection.release(&tags);
                            Ok(())
                        }
                    })
                    .await?;
                Ok((management::hold_json(&protection), None))
            }
            (_, method) => {
                let asked = match (resource, method) {
                    (Resource::Policy, &Method::PUT) | (Resource::Extend, _) => {
                        Some(management::policy_asked(&body)?)
                    }
                    _ => None,
                };
                let etag = self.fresh_policy_etag();
                let if_match = if_match.as_deref();
                let protection = self
                    .change_protection(&key, |protection| {
                        let current = protection.policy.as_ref();
                        let asked = (resource, method, asked);
                        protection.policy = next_policy(asked, current, if_match, &etag)?;
                        Ok(())
                    })
                    .await?;
                Ok(policy_answer(&container_id, protection.policy.as_ref()))
            }
        }
    }

    /// The container record under `key`, or the management API's 404.
    async fn managed_container(&self, key: &Key) -> Result<std::sync::Arc<Record>, ArmError> {
        match self.records.get(key).await {
            Ok(Some(record)) => Ok(record),
            Ok(None) => Err(ArmCode::ContainerNotFound.into()),
            Err(e) => Err(ArmError::new(ArmCode::ServiceUnavailable, e.to_string())),
        }
    }

    /// Changes the protection of the container under `key` by `change`, as one
    /// compare-and-swap of its record: the protection written.
    async fn change_protection(
        &self,
        key: &Key,
        mut change: impl FnMut(&mut Protection) -> Result<(), ArmError>,
    ) -> Result<Protection, ArmError> {
        let mut refused = None;
        let mut written = Protection::default();
        let none = HeaderMap::new();
        let missing = (
            precondition::Operation::Container,
            ErrorCode::ContainerNotFound,
        );
        let swapped = self
            .swap_existing(key, &none, missing, |current| {
                let mut protection = current.protection.as_deref().cloned().unwrap_or_default();
                if let Err(error) = change(&mut protection) {
                    refused = Some(error);
                    return Ok(Step::Keep);
                }
                let mut record = current.clone();
                written = protection.clone();
                record.protection = Some(Box::new(protection)).filter(|p| !p.is_empty());
                Ok(Step::update(record, current))
            })
            .await;
        if let Some(error) = refused {
            return Err(error);
        }
        match swapped {
            Ok(_) => Ok(written),
            Err(failure) if failure.code == ErrorCode::ContainerNotFound => {
                Err(ArmCode::ContainerNotFound.into())
            }
            Err(failure) => Err(ArmError::new(
                ArmCode::ServiceUnavailable,
                failure
                    .detail
                    .unwrap_or_else(|| failure.code.message().into()),
            )),
        }
    }

    /// What the request's bearer token allows; `None` without one where the operator chose
    /// anonymous access.
    fn management_access(
        &self,
        parts: &http::request::Parts,
        client: Client,
        account: &ifmatch_azure::Account,
    ) -> Result<Option<Access>, ArmError> {
        let Some(value) = parts.headers.get(header::AUTHORIZATION) else {
            return match self.anonymous {
                true => Ok(None),
                false => Err(ArmCode::AuthenticationFailed.into()),
            };
        };
        let token = (value.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| {
                ArmError::new(
                    ArmCode::AuthenticationFailed,
                    "The management API takes a bearer token (Authorization: Bearer), not an \
                     account key nor a shared access signature.",
                )
            })?;
        let invalid = |why: String| ArmError::new(ArmCode::InvalidAuthenticationToken, why);
        let identity = (account.identity())
            .ok_or_else(|| invalid("bearer tokens are not taken by this server".into()))?;
        if !client.https {
            return Err(invalid(
                "a bearer token is taken over HTTPS only (ifmatch serve --https)".into(),
            ));
        }
        let audiences = management::AUDIENCES.map(str::to_owned);
        let now = self.env.now();
        ifmatch_azure::auth::token_access(identity, account, token.trim(), &audiences, now)
            .map(Some)
            .map_err(invalid)
    }

    /// A new entity tag for a policy.
    fn fresh_policy_etag(&self) -> String {
        let uuid = self.env.random_uuid();
        format!("\"{:016x}\"", uuid.as_u64_pair().0)
    }
}

/// The policy's answer and its entity tag.
fn policy_answer(container_id: &str, policy: Option<&Policy>) -> (Value, Option<String>) {
    let json = management::policy_json(container_id, policy);
    (json, policy.map(|p| p.etag.clone()))
}

/// The policy a create or update (`PUT`), a delete, a lock or an extension (what was asked,
/// read from its body for the first and the last) leaves in place of `current`, under
/// `if_match`, with `etag` if it makes one; or why not.
fn next_policy(
    (resource, method, asked): (Resource, &Method, Option<management::PolicyAsked>),
    current: Option<&Policy>,
    if_match: Option<&str>,
    etag: &str,
) -> Result<Option<Policy>, ArmError> {
    let locked = |why: &str| ArmError::new(ArmCode::ContainerImmutabilityPolicyLocked, why);
    Ok(match (resource, method, asked) {
        (Resource::Policy, &Method::PUT, Some(asked)) => {
            matches(if_match, current)?;
            if current.is_some_and(|p| p.locked) {
                return Err(locked(
                    "A locked policy is only extended (POST .../extend).",
                ));
            }
            Some(Policy {
                days: asked.days,
                locked: false,
                appends: asked.appends.unwrap_or(false),
                extensions: 0,
                etag: etag.to_owned(),
            })
        }
        (Resource::Policy, _, _) => {
            if required_match(if_match, current)?.locked {
                return Err(locked("A locked policy is never deleted."));
            }
            None
        }
        (Resource::Lock, _, _) => {
            let policy = required_match(if_match, current)?;
            if policy.locked {
                return Err(ArmError::new(
                    ArmCode::OperationNotAllowed,
                    "The policy is locked already.",
                ));
            }
            Some(Policy {
                locked: true,
                etag: etag.to_owned(),
                ..policy.clone()
            })
        }
        (_, _, Some(asked)) => Some(extended(
            required_match(if_match, current)?,
            asked,
            etag.to_owned(),
        )?),
        _ => return Err(ArmCode::MethodNotAllowed.into()),
    })
}

/// `Ok` when `if_match` (if any) names `policy`'s entity tag, or is `*` and there is one.
fn matches(if_match: Option<&str>, policy: Option<&Policy>) -> Result<(), ArmError> {
    let fits = match (if_match.map(str::trim), policy) {
        (None, _) => true,
        (Some("*"), policy) => policy.is_some(),
        (Some(tag), Some(policy)) => tag == policy.etag,
        (Some(_), None) => false,
    };
    match fits {
        true => Ok(()),
        false => Err(ArmCode::ContainerImmutabilityPolicyFailure.into()),
    }
}

/// The policy `if_match` names: it must be given, and match.
fn required_match<'p>(
    if_match: Option<&str>,
    policy: Option<&'p Policy>,
) -> Result<&'p Policy, ArmError> {
    if if_match.is_none() {
        return Err(ArmError::new(
            ArmCode::InvalidParameter,
            "If-Match (the policy's etag) is required to delete, lock or extend it.",
        ));
    }
    matches(if_match, policy)?;
    policy.ok_or_else(|| ArmCode::ContainerImmutabilityPolicyFailure.into())
}

/// A locked `policy` extended as `asked`: never shortened, its appends unchanged, at most
/// [`MAX_EXTENSIONS`] times.
fn extended(
    policy: &Policy,
    asked: management::PolicyAsked,
    etag: String,
) -> Result<Policy, ArmError> {
    let not_allowed = |why: &str| ArmError::new(ArmCode::OperationNotAllowed, why);
    if !policy.locked {
        return Err(not_allowed(
            "An unlocked policy is changed by create or update (PUT), not extended.",
        ));
    }
    if policy.extensions >= MAX_EXTENSIONS {
        return Err(not_allowed(&format!(
            "A locked policy is extended at most {MAX_EXTENSIONS} times."
        )));
    }
    if asked.days < policy.days {
        return Err(ArmError::new(
            ArmCode::InvalidParameter,
            format!(
                "A locked policy is only extended: {} days is less than its {}.",
                asked.days, policy.days
            ),
        ));
    }
    if asked.appends.is_some_and(|a| a != policy.appends) {
        return Err(ArmError::new(
            ArmCode::InvalidParameter,
            "allowProtectedAppendWrites is not changed by an extension.",
        ));
    }
    Ok(Policy {
        days: asked.days,
        extensions: policy.extensions + 1,
        etag,
        ..policy.clone()
    })
}

/// A container's resource, as the management API answers it.
fn container_json(id: &str, name: &str, record: &Record) -> Value {
    let protection = record.protection.as_deref().cloned().unwrap_or_default();
    let mut properties = management::container_protection_json(id, &protection);
    let public = match record.public_access {
        Some(crate::record::PublicAccess::Container) => "Container",
        Some(crate::record::PublicAccess::Blob) => "Blob",
        None => "None",
    };
    properties["publicAccess"] = public.into();
    properties["metadata"] = serde_json::json!(record.metadata);
    properties["deleted"] = false.into();
    properties["lastModifiedTime"] = ifmatch_azure::iso8601::write_seconds(
        i64::try_from(record.last_modified).unwrap_or(i64::MAX),
        0,
    )
    .into();
    serde_json::json!({
        "id": id,
        "name": name,
        "type": "Microsoft.Storage/storageAccounts/blobServices/containers",
        "etag": record.etag.to_header_value().to_str().unwrap_or_default(),
        "properties": properties,
    })
}

/// A management body, up to 64 KiB.
async fn read_body(body: impl Incoming) -> Result<Bytes, ArmError> {
    let read = crate::body::read_at_most(body, 64 << 10).await;
    read.ok_or_else(|| {
        let detail = "The request body could not be read, or is over 64 KiB.";
        ArmError::new(ArmCode::InvalidRequestContent, detail)
    })
}

fn json_answer<R>(status: StatusCode, body: Vec<u8>) -> Answer<R> {
    let mut answer = super::answers::answer(status, HeaderMap::new());
    answer.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    *answer.body_mut() = ResponseBody::full(body);
    answer
}

/// What a request changes of a blob that its container's protection may refuse: `None` for a
/// request that changes no blob, or a change no protection refuses.
fn protected_change(admitted: &Admitted<'_>, method: &Method) -> Option<Change> {
    let changes = method == Method::PUT || method == Method::DELETE;
    if !changes || admitted.target.blob.is_empty() {
        return None;
    }
    match admitted.target.operation {
        Operation::PutBlock(_)
        | Operation::LeaseBlob
        | Operation::SetBlobTags
        | Operation::SetImmutabilityPolicy
        | Operation::DeleteImmutabilityPolicy
        | Operation::SetLegalHold
        | Operation::UndeleteBlob
        | Operation::AbortCopyBlob(_) => None,
        Operation::DeleteBlob => Some(Change::Delete),
        Operation::AppendBlock => Some(Change::Append),
        _ => Some(Change::Other),
    }
}
