//! Who may do what with the blob service: Shared Key and Shared Key Lite requests and the
//! blob service's shared access signatures (account and service SAS), checked as Azure's blob
//! service checks them. What every Azure service shares (the `Authorization` header, the SAS
//! window, HMAC) is `ifmatch_azure::auth`'s.

use std::time::SystemTime;

use ifmatch_azure::auth::{
    Denied, Needs, QueryPairs, ResourceTypes, Signed, account_sas, anonymous_refused, check_window,
    credentials, denied, failed, storage_string, verify_sas,
};
use ifmatch_azure::identity::{Access, Assignment};
use ifmatch_azure::{Account, CommonCode};

use crate::operation::Operation;

/// What a request's credentials allow, as the blob service reads a SAS.
pub type Credential = ifmatch_azure::auth::Credential<Grant>;

/// What a valid blob service SAS grants.
pub type Grant = ifmatch_azure::auth::Grant<Scope>;

/// What a blob service SAS reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// An account SAS: the resource types it covers.
    Account(ResourceTypes),
    /// A service SAS for one container and everything in it.
    Container(String),
    /// A service SAS for one blob.
    Blob(String, String),
    /// A user delegation SAS: what it reaches, and what its delegating principal may do now
    /// (the signature allows no more than both).
    Delegated(Box<Scope>, Access),
}

/// Reads a request's credentials for `account`: a Shared Key or Shared Key Lite
/// `Authorization`, a SAS in the query, or none. A credential that is present and wrong is
/// an error, never anonymous. `delegator` is what the service kept of the roles of the
/// principal a user delegation SAS names ([`crate::delegators`]).
pub fn authenticate(
    account: &Account,
    request: Signed<'_>,
    delegator: &[Assignment],
    now: SystemTime,
) -> Result<Credential, Denied> {
    let strings = |lite| storage_string(account, request, lite);
    let sas = |query: &QueryPairs| sas(account, request, (query, delegator), now);
    credentials(account, request, now, strings, sas)
}

/// Whether `credential` allows `operation` on `container` / `blob` (empty for container
/// operations).
pub fn authorize(
    credential: &Credential,
    operation: &Operation,
    container: &str,
    blob: &str,
) -> Result<(), Denied> {
    if *operation == Operation::GetUserDelegationKey && !matches!(credential, Credential::Token(_))
    {
        return Err(failed("Get User Delegation Key takes a bearer token only"));
    }
    let grant = match credential {
        Credential::Key => return Ok(()),
        Credential::Anonymous => {
            return Err(anonymous_refused(
                "anonymous access is allowed only to public containers",
            ));
        }
        Credential::Token(access) => {
            return access.check(actions(operation), &resource(container, blob));
        }
        // A container's access policy is the account owner's alone, as in Azure.
        Credential::Sas(_)
            if matches!(
                operation,
                Operation::GetContainerAcl | Operation::SetContainerAcl
            ) =>
        {
            return Err(denied(
                CommonCode::AuthorizationPermissionMismatch,
                "a container's access policy is read and set with the account key only",
            ));
        }
        Credential::Sas(grant) => grant,
    };
    let (needs, kind) = needed(operation);
    let mut scope = &grant.scope;
    if let Scope::Delegated(inner, access) = scope {
        access.check(actions(operation), &resource(container, blob))?;
        scope = inner;
    }
    let in_scope = match scope {
        Scope::Account(types) => match kind {
            Kind::Service => types.service,
            Kind::Container => types.container,
            Kind::Object => types.object,
        },
        Scope::Container(c) => c == container && kind != Kind::Service && !creates(operation),
        Scope::Blob(c, b) => c == container && b == blob && kind == Kind::Object,
        Scope::Delegated(..) => false,
    };
    grant.allows(in_scope, Needs::AnyOf(needs))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Service,
    Container,
    Object,
}

/// Whether `operation` creates or deletes a container: only an account SAS may.
fn creates(operation: &Operation) -> bool {
    matches!(
        operation,
        Operation::CreateContainer | Operation::DeleteContainer
    )
}

/// The permissions (any one of them) an operation needs, and the resource type it acts on.
fn needed(operation: &Operation) -> (&'static str, Kind) {
    match operation {
        Operation::ListContainers(_) => ("l", Kind::Service),
        Operation::CreateContainer => ("cw", Kind::Container),
        Operation::DeleteContainer => ("d", Kind::Container),
        Operation::GetContainerProperties => ("r", Kind::Container),
        // Never reached with a SAS (see `authorize`).
        Operation::GetContainerAcl | Operation::SetContainerAcl => ("", Kind::Container),
        Operation::ListBlobs(_) => ("l", Kind::Container),
        Operation::FindBlobsByTags(_) => ("f", Kind::Container),
        Operation::FindBlobsInAccount(_) => ("f", Kind::Service),
        Operation::GetBlobServiceProperties => ("r", Kind::Service),
        // Never reached with a SAS (see `authorize`).
        Operation::GetUserDelegationKey => ("", Kind::Service),
        Operation::SetBlobServiceProperties => ("w", Kind::Service),
        Operation::LeaseContainer => ("wd", Kind::Container),
        Operation::RestoreContainer => ("w", Kind::Container),
        // Each subrequest is checked with its own credentials; the envelope needs one that
        // may delete.
        Operation::SubmitBatch => ("d", Kind::Container),
        Operation::GetContainerMetadata => ("r", Kind::Container),
        Operation::SetContainerMetadata => ("w", Kind::Container),
        Operation::GetBlobMetadata => ("r", Kind::Object),
        Operation::SetBlobMetadata | Operation::SetBlobProperties => ("w", Kind::Object),
        Operation::GetBlobTags | Operation::SetBlobTags => ("t", Kind::Object),
        Operation::PutBlob => ("cw", Kind::Object),
        Operation::GetBlob => ("r", Kind::Object),
        Operation::DeleteBlob => ("d", Kind::Object),
        Operation::LeaseBlob => ("w", Kind::Object),
        Operation::PutBlock(_) | Operation::PutBlockList => ("cw", Kind::Object),
        Operation::GetBlockList(_) => ("r", Kind::Object),
        Operation::AbortCopyBlob(_) | Operation::SealBlob => ("w", Kind::Object),
        Operation::SnapshotBlob => ("cw", Kind::Object),
        Operation::UndeleteBlob => ("w", Kind::Object),
        // Azure's `i`: set and delete immutability policies, set legal holds.
        Operation::SetImmutabilityPolicy
        | Operation::DeleteImmutabilityPolicy
        | Operation::SetLegalHold => ("i", Kind::Object),
        Operation::AppendBlock => ("aw", Kind::Object),
        Operation::PutPage | Operation::IncrementalCopy => ("w", Kind::Object),
        Operation::GetPageRanges(_) => ("r", Kind::Object),
    }
}

/// Azure's names for what the blob service's operations do ([`ifmatch_azure::storage_actions`]).
macro_rules! blob_actions {
    ($($action:literal),+) => { ifmatch_azure::storage_actions!("blobServices": $($action),+) };
}

/// The actions (any one of them) a role must permit for `operation`, as Azure's reference
/// names them for each operation authorized with Entra ID.
fn actions(operation: &Operation) -> &'static [&'static str] {
    match operation {
        Operation::ListContainers(_)
        | Operation::GetContainerProperties
        | Operation::GetContainerMetadata => blob_actions!("containers/read"),
        Operation::CreateContainer
        | Operation::SetContainerMetadata
        | Operation::LeaseContainer
        | Operation::RestoreContainer => blob_actions!("containers/write"),
        Operation::DeleteContainer => blob_actions!("containers/delete"),
        Operation::GetContainerAcl => blob_actions!("containers/getAcl/action"),
        Operation::SetContainerAcl => blob_actions!("containers/setAcl/action"),
        Operation::GetBlobServiceProperties => blob_actions!("read"),
        Operation::GetUserDelegationKey => blob_actions!("generateUserDelegationKey/action"),
        Operation::SetBlobServiceProperties => blob_actions!("write"),
        Operation::FindBlobsByTags(_) | Operation::FindBlobsInAccount(_) => {
            blob_actions!("containers/blobs/filter/action")
        }
        Operation::ListBlobs(_)
        | Operation::GetBlob
        | Operation::GetBlobMetadata
        | Operation::GetBlockList(_)
        | Operation::GetPageRanges(_) => blob_actions!("containers/blobs/read"),
        Operation::GetBlobTags => blob_actions!("containers/blobs/tags/read"),
        Operation::SetBlobTags => blob_actions!("containers/blobs/tags/write"),
        Operation::PutBlob
        | Operation::PutBlock(_)
        | Operation::PutBlockList
        | Operation::SnapshotBlob
        | Operation::AppendBlock => {
            blob_actions!("containers/blobs/write", "containers/blobs/add/action")
        }
        Operation::SetBlobMetadata
        | Operation::SetBlobProperties
        | Operation::LeaseBlob
        | Operation::AbortCopyBlob(_)
        | Operation::SealBlob
        | Operation::UndeleteBlob
        | Operation::PutPage
        | Operation::IncrementalCopy => blob_actions!("containers/blobs/write"),
        // Each subrequest is judged by its own operation.
        Operation::SubmitBatch | Operation::DeleteBlob => {
            blob_actions!("containers/blobs/delete")
        }
        Operation::SetImmutabilityPolicy
        | Operation::DeleteImmutabilityPolicy
        | Operation::SetLegalHold => {
            blob_actions!("containers/blobs/immutableStorage/runAsSuperUser/action")
        }
    }
}

/// Where an operation on `container` / `blob` acts, as a role assignment's scope reads it.
fn resource(container: &str, blob: &str) -> String {
    match (container, blob) {
        ("", _) => "/blobServices/default".into(),
        (container, "") => format!("/blobServices/default/containers/{container}"),
        (container, blob) => format!("/blobServices/default/containers/{container}/blobs/{blob}"),
    }
}

/// The strings-to-sign a user delegation SAS may have been signed as, one a layout of its
/// version: the delegation's fields (`skoid` to `skv`), then from 2020-02-10 `saoid`, `suoid`,
/// `scid`, then the delegated user's (`skdutid`, `sduoid`), then from the newest the signed
/// request headers and parameters (`srh`, `srq`, refused when not empty). The signature says
/// which it is.
fn delegation_texts(query: &QueryPairs, canonical: &str) -> Vec<String> {
    let field = |name: &str| query.get(name).unwrap_or_default();
    let fields = |names: &[&str]| names.iter().map(|n| field(n)).collect::<Vec<_>>();
    let head = [fields(&["sp", "st", "se"]), vec![canonical.to_owned()]].concat();
    let key = fields(&["skoid", "sktid", "skt", "ske", "sks", "skv"]);
    let users = fields(&["saoid", "suoid", "scid"]);
    let delegated = fields(&["skdutid", "sduoid"]);
    let mut tail = fields(&["sip", "spr", "sv", "sr", "snapshot"]);
    if field("sv").as_str() >= "2020-12-06" {
        tail.push(field("ses"));
    }
    let response = fields(&["rscc", "rscd", "rsce", "rscl", "rsct"]);
    let signed = vec![String::new(), String::new()];
    let layouts = [
        [head.clone(), key.clone(), tail.clone(), response.clone()].concat(),
        [
            head.clone(),
            key.clone(),
            users.clone(),
            tail.clone(),
            response.clone(),
        ]
        .concat(),
        [
            head.clone(),
            key.clone(),
            users.clone(),
            delegated.clone(),
            tail.clone(),
            response.clone(),
        ]
        .concat(),
        [head, key, users, delegated, tail, signed, response].concat(),
    ];
    layouts.iter().map(|fields| fields.join("\n")).collect()
}

/// Verifies a shared access signature and reads what it grants.
fn sas(
    account: &Account,
    request: Signed<'_>,
    (query, delegator): (&QueryPairs, &[Assignment]),
    now: SystemTime,
) -> Result<Grant, Denied> {
    let field = |name: &str| query.get(name).unwrap_or_default();
    let version = check_window(query, request.client, now)?;
    let delegated = query.get("skoid").is_some();
    let ip = field("sip");
    let permissions = field("sp");
    let signed_from_2020 = version.as_str() >= "2020-12-06";
    let (text, scope) = if query.get("ss").is_some() {
        if delegated {
            return Err(failed(
                "an account SAS is signed with the account key, not a user delegation key",
            ));
        }
        let (text, types) = account_sas(account, query, 'b')?;
        (text, Scope::Account(types))
    } else {
        let resource = field("sr");
        let (container, blob) = (request.container.to_owned(), request.blob.to_owned());
        let (canonical, scope) = match resource.as_str() {
            "c" => (
                format!("/blob/{}/{container}", account.name()),
                Scope::Container(container.clone()),
            ),
            "b" => (
                format!("/blob/{}/{container}/{blob}", account.name()),
                Scope::Blob(container.clone(), blob.clone()),
            ),
            other => {
                return Err(failed(format!(
                    "signed resource (sr) {other:?}: `b` or `c` is supported"
                )));
            }
        };
        if delegated {
            let texts = delegation_texts(query, &canonical);
            let signed = (texts.as_slice(), delegator);
            let access = ifmatch_azure::delegation::check(account, query, signed, now)?;
            return Ok(Grant::new(
                permissions,
                Scope::Delegated(Box::new(scope), access),
            ));
        }
        let mut fields = vec![
            permissions.clone(),
            field("st"),
            field("se"),
            canonical,
            field("si"),
            ip.clone(),
            field("spr"),
            version.clone(),
        ];
        if version.as_str() >= "2018-11-09" {
            fields.push(resource.clone());
            fields.push(field("sst"));
        }
        if signed_from_2020 {
            fields.push(field("ses"));
        }
        for name in ["rscc", "rscd", "rsce", "rscl", "rsct"] {
            fields.push(field(name));
        }
        (fields.join("\n"), scope)
    };
    verify_sas(account, &text, query)?;
    Ok(Grant::new(permissions, scope))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::{HeaderMap, Method, Uri};

    use super::*;

    #[test]
    fn what_each_grant_covers() {
        let grant =
            |permissions: &str, scope| Credential::Sas(Box::new(Grant::new(permissions, scope)));
        let allowed = |credential: &Credential, operation: Operation, container, blob| {
            authorize(credential, &operation, container, blob).map_err(|d| d.code)
        };
        let container_sas = grant("rwdl", Scope::Container("box".into()));
        assert_eq!(
            allowed(&container_sas, Operation::DeleteBlob, "box", "a"),
            Ok(())
        );
        assert_eq!(
            allowed(&container_sas, Operation::DeleteBlob, "other", "a"),
            Err(CommonCode::AuthorizationResourceTypeMismatch)
        );
        assert_eq!(
            allowed(&container_sas, Operation::DeleteContainer, "box", ""),
            Err(CommonCode::AuthorizationResourceTypeMismatch),
            "only an account SAS deletes a container"
        );
        assert_eq!(
            allowed(&container_sas, Operation::SetContainerAcl, "box", ""),
            Err(CommonCode::AuthorizationPermissionMismatch),
            "the access policy is the key's alone"
        );
        let blob_sas = grant("r", Scope::Blob("box".into(), "a".into()));
        assert_eq!(allowed(&blob_sas, Operation::GetBlob, "box", "a"), Ok(()));
        assert!(allowed(&blob_sas, Operation::GetBlob, "box", "b").is_err());
        assert_eq!(
            allowed(&blob_sas, Operation::PutBlob, "box", "a"),
            Err(CommonCode::AuthorizationPermissionMismatch)
        );
        let account_sas = grant(
            "rl",
            Scope::Account(ResourceTypes {
                service: false,
                container: true,
                object: false,
            }),
        );
        assert_eq!(
            allowed(
                &account_sas,
                Operation::ListBlobs(Box::default()),
                "box",
                ""
            ),
            Ok(())
        );
        assert_eq!(
            allowed(&account_sas, Operation::GetBlob, "box", "a"),
            Err(CommonCode::AuthorizationResourceTypeMismatch),
            "srt without o"
        );
        assert_eq!(
            allowed(&Credential::Anonymous, Operation::GetBlob, "box", "a"),
            Err(CommonCode::AuthenticationFailed)
        );
        assert_eq!(
            allowed(&Credential::Key, Operation::SetContainerAcl, "box", ""),
            Ok(())
        );
    }

    #[test]
    fn each_operation_is_judged_by_its_action_one_role_allowed_and_one_refused() {
        const READER: &str = "Storage Blob Data Reader";
        const CONTRIBUTOR: &str = "Storage Blob Data Contributor";
        const OWNER: &str = "Storage Blob Data Owner";
        const ACCOUNT: &str = "Storage Account Contributor";
        const QUEUES: &str = "Storage Queue Data Contributor";
        #[rustfmt::skip]
        let cases = [
            (Method::GET, "/?comp=list", READER, QUEUES),
            (Method::GET, "/?restype=service&comp=properties", ACCOUNT, OWNER),
            (Method::PUT, "/?restype=service&comp=properties", ACCOUNT, OWNER),
            (Method::GET, "/?comp=blobs&where=a%3D'1'", OWNER, CONTRIBUTOR),
            (Method::POST, "/?restype=service&comp=userdelegationkey", READER, QUEUES),
            (Method::PUT, "/box?restype=container", CONTRIBUTOR, READER),
            (Method::DELETE, "/box?restype=container", CONTRIBUTOR, READER),
            (Method::GET, "/box?restype=container", READER, QUEUES),
            (Method::GET, "/box?restype=container&comp=metadata", READER, QUEUES),
            (Method::PUT, "/box?restype=container&comp=metadata", CONTRIBUTOR, READER),
            (Method::GET, "/box?restype=container&comp=acl", OWNER, CONTRIBUTOR),
            (Method::PUT, "/box?restype=container&comp=acl", OWNER, CONTRIBUTOR),
            (Method::PUT, "/box?restype=container&comp=lease", CONTRIBUTOR, READER),
            (Method::PUT, "/box?restype=container&comp=undelete", CONTRIBUTOR, READER),
            (Method::GET, "/box?restype=container&comp=list", READER, QUEUES),
            (Method::GET, "/box?restype=container&comp=blobs&where=a%3D'1'", OWNER, CONTRIBUTOR),
            (Method::POST, "/box?restype=container&comp=batch", CONTRIBUTOR, READER),
            (Method::GET, "/box/a", READER, QUEUES),
            (Method::HEAD, "/box/a", READER, ACCOUNT),
            (Method::PUT, "/box/a", CONTRIBUTOR, READER),
            (Method::DELETE, "/box/a", CONTRIBUTOR, READER),
            (Method::GET, "/box/a?comp=metadata", READER, QUEUES),
            (Method::PUT, "/box/a?comp=metadata", CONTRIBUTOR, READER),
            (Method::PUT, "/box/a?comp=properties", CONTRIBUTOR, READER),
            (Method::GET, "/box/a?comp=tags", OWNER, CONTRIBUTOR),
            (Method::PUT, "/box/a?comp=tags", OWNER, CONTRIBUTOR),
            (Method::PUT, "/box/a?comp=lease", CONTRIBUTOR, READER),
            (Method::PUT, "/box/a?comp=block&blockid=AAAA", CONTRIBUTOR, READER),
            (Method::PUT, "/box/a?comp=blocklist", CONTRIBUTOR, READER),
            (Method::GET, "/box/a?comp=blocklist", READER, QUEUES),
            (Method::PUT, "/box/a?comp=copy&copyid=x", CONTRIBUTOR, READER),
            (Method::PUT, "/box/a?comp=seal", CONTRIBUTOR, READER),
            (Method::PUT, "/box/a?comp=snapshot", CONTRIBUTOR, READER),
            (Method::PUT, "/box/a?comp=undelete", CONTRIBUTOR, READER),
            (Method::PUT, "/box/a?comp=immutabilityPolicies", OWNER, CONTRIBUTOR),
            (Method::DELETE, "/box/a?comp=immutabilityPolicies", OWNER, CONTRIBUTOR),
            (Method::PUT, "/box/a?comp=legalhold", OWNER, CONTRIBUTOR),
            (Method::PUT, "/box/a?comp=appendblock", CONTRIBUTOR, READER),
            (Method::PUT, "/box/a?comp=page", CONTRIBUTOR, READER),
            (Method::PUT, "/box/a?comp=incrementalcopy", CONTRIBUTOR, READER),
            (Method::GET, "/box/a?comp=pagelist", READER, QUEUES),
        ];
        let token = |role: &str| {
            Credential::Token(Box::new(ifmatch_azure::identity::Access::holding(
                role, "/",
            )))
        };
        let mut seen = std::collections::BTreeSet::new();
        for (method, uri, allowed, refused) in cases {
            let parsed: http::Uri = uri.parse().unwrap();
            let target =
                crate::operation::Target::parse(&method, parsed.path(), parsed.query()).unwrap();
            seen.insert(format!("{:?}", std::mem::discriminant(&target.operation)));
            let judge = |role| {
                authorize(
                    &token(role),
                    &target.operation,
                    &target.container,
                    &target.blob,
                )
            };
            assert_eq!(judge(allowed), Ok(()), "{method} {uri}: {allowed}");
            let denied = judge(refused).unwrap_err();
            assert_eq!(
                denied.code,
                CommonCode::AuthorizationPermissionMismatch,
                "{method} {uri}"
            );
        }
        // Every operation of the dialect (the enum's variants) is in the table.
        assert_eq!(seen.len(), 40, "{seen:?}");
    }

    #[test]
    fn sas_forms_this_server_does_not_take_are_refused_saying_so() {
        let account = ifmatch_azure::Accounts::default();
        let account = account.iter().next().unwrap();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_334_400);
        let headers = HeaderMap::new();
        let attempt = |query: &str| {
            let uri: Uri = format!("/devstoreaccount1/box/a?{query}").parse().unwrap();
            let signed = Signed {
                method: &Method::GET,
                uri: &uri,
                headers: &headers,
                client: ifmatch_azure::Client::default(),
                container: "box",
                blob: "a",
            };
            authenticate(account, signed, &[], now)
                .map(|_| ())
                .map_err(|d| d.detail)
        };
        let common = "sv=2025-01-05&sr=b&sp=r&se=2026-11-23T00:00:00Z&sig=AAAA";
        let delegation = attempt(&format!("{common}&skoid=x&sktid=y")).unwrap_err();
        assert!(delegation.contains("user delegation"), "{delegation}");
        let stored = attempt(&format!("{common}&si=policy")).unwrap_err();
        assert!(stored.contains("stored access policies"), "{stored}");
        let early = attempt(&format!("{common}&st=2026-11-22T09:00:00Z")).unwrap_err();
        assert!(
            early.contains("not valid in the specified time frame"),
            "{early}"
        );
        let old = attempt("sv=2014-02-14&sr=b&sp=r&se=2026-11-23T00:00:00Z&sig=AAAA").unwrap_err();
        assert!(old.contains("2015-04-05"), "{old}");
        let forged = attempt(common).unwrap_err();
        assert!(forged.contains("does not match"), "{forged}");
    }
}
