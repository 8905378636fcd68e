//! Who is asking the Queue service, and may they: Shared Key and Shared Key Lite (the blob
//! service's strings-to-sign, which the Queue service shares), account SAS covering queues
//! (`ss` with `q`) and queue SAS (`sp` of `r`, `a`, `u`, `p` over one queue). What every
//! signature shares is `ifmatch_azure::auth`'s; what differs is here.
//!
//! There are no public queues: a request without credentials is refused unless the operator
//! chose anonymous access for the whole server.

use std::time::SystemTime;

use ifmatch_azure::Account;
use ifmatch_azure::auth::{
    Denied, Needs, QueryPairs, ResourceTypes, Signed, StoredPolicy, account_sas, anonymous_refused,
    check_sas_window, credentials, failed, storage_string, verify_sas,
};

use crate::operation::Operation;

/// What a request's credentials allow.
pub type Credential = ifmatch_azure::auth::Credential<Grant>;

/// What a valid shared access signature grants.
pub type Grant = ifmatch_azure::auth::Grant<Scope>;

/// What a Queue service SAS reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// An account SAS: the resource types it covers.
    Account(ResourceTypes),
    /// A queue SAS: one queue (its name) and its messages.
    Queue(String),
}

/// Reads a request's credentials for `account`; `request.container` is the queue it
/// addresses (a queue SAS signs it).
pub fn authenticate(
    account: &Account,
    request: Signed<'_>,
    policy: Option<&StoredPolicy>,
    now: SystemTime,
) -> Result<Credential, Denied> {
    let strings = |lite| storage_string(account, request, lite);
    let sas = |query: &QueryPairs| {
        let completed = match policy {
            Some(policy) if query.get("ss").is_none() => Some(query.with_policy(policy)?),
            _ => None,
        };
        let effective = completed.as_ref().unwrap_or(query);
        check_sas_window(effective, request.client, now)?;
        grant(account, query, effective, request.container)
    };
    credentials(account, request, now, strings, sas)
}

/// What a shared access signature grants, once its signature is checked: `query` as signed,
/// `effective` completed by the stored access policy it names, if any.
fn grant(
    account: &Account,
    query: &QueryPairs,
    effective: &QueryPairs,
    queue: &str,
) -> Result<Grant, Denied> {
    let field = |name: &str| query.get(name).unwrap_or_default();
    let permissions = effective.get("sp").unwrap_or_default();
    let (text, scope) = if query.get("ss").is_some() {
        let (text, types) = account_sas(account, query, 'q')?;
        (text, Scope::Account(types))
    } else {
        // A queue SAS names its queue by the path it is used on: the resource it signs.
        let resource = field("sr");
        if !resource.is_empty() && resource != "q" {
            return Err(failed(format!(
                "signed resource (sr) {resource:?}: a queue SAS signs a queue"
            )));
        }
        let fields = [
            field("sp"),
            field("st"),
            field("se"),
            format!("/queue/{}/{queue}", account.name()),
            field("si"),
            field("sip"),
            field("spr"),
            field("sv"),
        ];
        (fields.join("\n"), Scope::Queue(queue.to_owned()))
    };
    verify_sas(account, &text, query)?;
    Ok(Grant::new(permissions, scope))
}

/// The level of the service an operation works at, as an account SAS's `srt` names them.
enum Level {
    Service,
    Queue,
    Message,
}

/// What `operation` needs of a SAS: its permissions, the level it works at, and whether a
/// queue SAS may do it at all.
fn needs(operation: &Operation) -> (Needs<'static>, Level, bool) {
    use Operation as O;
    match operation {
        O::ListQueues(_) => (Needs::AnyOf("l"), Level::Service, false),
        O::ServiceProperties | O::ServiceStats => (Needs::AnyOf("r"), Level::Service, false),
        O::CreateQueue => (Needs::AnyOf("cw"), Level::Queue, false),
        O::DeleteQueue => (Needs::AnyOf("d"), Level::Queue, false),
        O::GetQueueMetadata | O::GetQueueAcl => (Needs::AnyOf("r"), Level::Queue, true),
        O::SetQueueMetadata | O::SetQueueAcl => (Needs::AnyOf("w"), Level::Queue, false),
        O::PutMessage(_) => (Needs::AnyOf("a"), Level::Message, true),
        O::PeekMessages { .. } => (Needs::AnyOf("r"), Level::Message, true),
        O::GetMessages { .. } | O::DeleteMessage { .. } => {
            (Needs::AnyOf("p"), Level::Message, true)
        }
        O::UpdateMessage { .. } => (Needs::AllOf("u"), Level::Message, true),
        O::ClearMessages => (Needs::AnyOf("dp"), Level::Message, true),
    }
}

/// Azure's names for what the Queue service's operations do ([`ifmatch_azure::storage_actions`]).
macro_rules! queue_actions {
    ($($action:literal),+) => { ifmatch_azure::storage_actions!("queueServices": $($action),+) };
}

/// The actions (any one of them) a role must permit for `operation`, as Azure's reference
/// names them for each operation authorized with Entra ID.
fn actions(operation: &Operation) -> &'static [&'static str] {
    use Operation as O;
    match operation {
        O::ListQueues(_) | O::GetQueueMetadata | O::GetQueueAcl => queue_actions!("queues/read"),
        O::ServiceProperties | O::ServiceStats => queue_actions!("read"),
        O::CreateQueue | O::SetQueueMetadata | O::SetQueueAcl => queue_actions!("queues/write"),
        O::DeleteQueue => queue_actions!("queues/delete"),
        O::PutMessage(_) => queue_actions!("queues/messages/add/action", "queues/messages/write"),
        O::PeekMessages { .. } => queue_actions!("queues/messages/read"),
        O::GetMessages { .. } => queue_actions!("queues/messages/process/action"),
        O::DeleteMessage { .. } => {
            queue_actions!("queues/messages/process/action", "queues/messages/delete")
        }
        O::UpdateMessage { .. } => queue_actions!("queues/messages/write"),
        O::ClearMessages => queue_actions!("queues/messages/delete"),
    }
}

/// Whether `credential` allows `operation` on `queue` (empty for the service's).
pub fn authorize(
    credential: &Credential,
    operation: &Operation,
    queue: &str,
) -> Result<(), Denied> {
    let grant = match credential {
        Credential::Key => return Ok(()),
        Credential::Anonymous => return Err(anonymous_refused("queues are never public")),
        Credential::Token(access) => {
            let resource = match queue {
                "" => "/queueServices/default".to_owned(),
                queue => format!("/queueServices/default/queues/{queue}"),
            };
            return access.check(actions(operation), &resource);
        }
        Credential::Sas(grant) => grant,
    };
    let (needs, level, queue_sas) = needs(operation);
    let in_scope = match &grant.scope {
        Scope::Account(types) => match level {
            Level::Service => types.service,
            Level::Queue => types.container,
            Level::Message => types.object,
        },
        Scope::Queue(name) => queue_sas && name == queue,
    };
    grant.allows(in_scope, needs)
}

#[cfg(test)]
mod tests {
    use http::Method;

    use super::*;
    use crate::operation::Target;

    #[test]
    fn each_operation_is_judged_by_its_action_one_role_allowed_and_one_refused() {
        const READER: &str = "Storage Queue Data Reader";
        const CONTRIBUTOR: &str = "Storage Queue Data Contributor";
        const SENDER: &str = "Storage Queue Data Message Sender";
        const PROCESSOR: &str = "Storage Queue Data Message Processor";
        const ACCOUNT: &str = "Storage Account Contributor";
        const BLOBS: &str = "Storage Blob Data Owner";
        let cases = [
            (Method::GET, "/?comp=list", READER, SENDER),
            (
                Method::GET,
                "/?restype=service&comp=properties",
                ACCOUNT,
                CONTRIBUTOR,
            ),
            (
                Method::GET,
                "/?restype=service&comp=stats",
                ACCOUNT,
                CONTRIBUTOR,
            ),
            (Method::PUT, "/jobs", CONTRIBUTOR, READER),
            (Method::DELETE, "/jobs", CONTRIBUTOR, READER),
            (Method::GET, "/jobs?comp=metadata", READER, BLOBS),
            (Method::PUT, "/jobs?comp=metadata", CONTRIBUTOR, READER),
            (Method::GET, "/jobs?comp=acl", READER, PROCESSOR),
            (Method::PUT, "/jobs?comp=acl", CONTRIBUTOR, READER),
            (Method::POST, "/jobs/messages", SENDER, READER),
            (Method::GET, "/jobs/messages", PROCESSOR, SENDER),
            (Method::GET, "/jobs/messages?peekonly=true", READER, SENDER),
            (Method::DELETE, "/jobs/messages", CONTRIBUTOR, PROCESSOR),
            (
                Method::PUT,
                "/jobs/messages/m?popreceipt=r&visibilitytimeout=0",
                CONTRIBUTOR,
                PROCESSOR,
            ),
            (
                Method::DELETE,
                "/jobs/messages/m?popreceipt=r",
                PROCESSOR,
                SENDER,
            ),
        ];
        let token = |role: &str| {
            Credential::Token(Box::new(ifmatch_azure::identity::Access::holding(
                role, "/",
            )))
        };
        let mut seen = std::collections::BTreeSet::new();
        for (method, uri, allowed, refused) in cases {
            let parsed: http::Uri = uri.parse().unwrap();
            let target = Target::parse(&method, parsed.path(), parsed.query()).unwrap();
            seen.insert(format!("{:?}", std::mem::discriminant(&target.operation)));
            let judge = |role| authorize(&token(role), &target.operation, &target.queue);
            assert_eq!(judge(allowed), Ok(()), "{method} {uri}: {allowed}");
            let denied = judge(refused).unwrap_err();
            assert_eq!(
                denied.code,
                ifmatch_azure::CommonCode::AuthorizationPermissionMismatch,
                "{method} {uri}"
            );
        }
        // Every operation of the dialect (the enum's variants) is in the table.
        assert_eq!(seen.len(), 15, "{seen:?}");
    }
}
