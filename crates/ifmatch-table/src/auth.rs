//! Who is asking the Table service, and may they: Shared Key and Shared Key Lite with the
//! Table service's own strings-to-sign, account SAS covering tables (`ss` with `t`), and table
//! SAS (`tn`, with the partition and row key range `spk`, `srk`, `epk`, `erk`). The accounts,
//! their keys and what every signature shares (the HMAC, the time window, the protocol, the
//! client's address) are the blob front's ([`ifmatch_blob::auth`]); what differs is here.
//!
//! A request is read as the blob front reads it ([`Signed`], its container and blob left
//! empty).
//!
//! There is no anonymous access to tables (Azure has no public tables): a request without
//! credentials is refused unless the operator chose anonymous access for the whole server.

use std::time::SystemTime;

use http::{HeaderMap, Method};
use ifmatch_azure::auth::{
    Denied, Needs, QueryPairs, ResourceTypes, Signed, account_sas, anonymous_refused,
    check_sas_window, credentials, failed, verify_sas,
};
use ifmatch_azure::{Account, storage_actions};

/// What a request's credentials allow, with the Table service's
/// [`Grant`].
pub type Credential = ifmatch_azure::auth::Credential<Grant>;

/// What a valid shared access signature grants: its permissions over a table [`Scope`].
pub type Grant = ifmatch_azure::auth::Grant<Scope>;

/// What a Table service SAS reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// An account SAS: the resource types it covers.
    Account(ResourceTypes),
    /// A table SAS: one table's entities, within a key range.
    Table {
        /// The table, lowercased (`tn`).
        name: String,
        /// The keys it reaches.
        range: KeyRange,
    },
}

/// The entities a table SAS reaches: from (`spk`, `srk`) to (`epk`, `erk`), both included; a
/// missing row key means the partition's first (or last) row, a missing partition no bound.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyRange {
    start: Option<(String, Option<String>)>,
    end: Option<(String, Option<String>)>,
}

impl KeyRange {
    /// Whether the range reaches every entity.
    pub fn is_all(&self) -> bool {
        self.start.is_none() && self.end.is_none()
    }

    /// Whether the entity (`pk`, `rk`) is in the range.
    pub fn contains(&self, pk: &str, rk: &str) -> bool {
        let after_start = match &self.start {
            None => true,
            Some((spk, None)) => pk >= spk.as_str(),
            Some((spk, Some(srk))) => (pk, rk) >= (spk.as_str(), srk.as_str()),
        };
        after_start && !self.ends_before(pk, rk)
    }

    /// Whether the range ends before (`pk`, `rk`): no key from there on is in it.
    pub fn ends_before(&self, pk: &str, rk: &str) -> bool {
        match &self.end {
            None => false,
            Some((epk, None)) => pk > epk.as_str(),
            Some((epk, Some(erk))) => (pk, rk) > (epk.as_str(), erk.as_str()),
        }
    }

    /// The first key the range may hold, for a scan to start at.
    pub fn first(&self) -> Option<(&str, &str)> {
        (self.start.as_ref()).map(|(pk, rk)| (pk.as_str(), rk.as_deref().unwrap_or("")))
    }
}

/// What an operation is, for authorization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation<'a> {
    /// Query Tables.
    QueryTables,
    /// Create Table.
    CreateTable,
    /// Delete Table.
    DeleteTable(&'a str),
    /// Query Entities, or Get Entity.
    Read(&'a str),
    /// Insert Entity.
    Insert(&'a str),
    /// Update or Merge Entity (with `If-Match`).
    Update(&'a str),
    /// Insert Or Replace, Insert Or Merge (no `If-Match`).
    Upsert(&'a str),
    /// Delete Entity.
    Delete(&'a str),
    /// An entity group transaction: each of its operations is authorized on its own.
    Batch,
    /// Anything else: left for the front to refuse (only the account key gets that far).
    Other,
}

impl<'a> Operation<'a> {
    /// The operation `method` asks of `path` (below the account).
    pub fn of(method: &Method, path: &'a str, headers: &HeaderMap) -> Self {
        let path = path.strip_prefix('/').unwrap_or(path);
        let (name, keys) = match path.split_once('(') {
            Some((name, rest)) => (name, rest.strip_suffix(')')),
            None => (path, Some("")),
        };
        let Some(keys) = keys else {
            return Self::Other;
        };
        let conditional = headers.contains_key(http::header::IF_MATCH);
        match (method.as_str(), name, keys.is_empty()) {
            ("POST", "$batch", true) => Self::Batch,
            ("GET", "Tables", true) => Self::QueryTables,
            ("POST", "Tables", true) => Self::CreateTable,
            ("GET", "Tables", false) => Self::QueryTables,
            ("DELETE", "Tables", false) => {
                let quoted = keys.strip_prefix('\'').and_then(|k| k.strip_suffix('\''));
                quoted.map_or(Self::Other, Self::DeleteTable)
            }
            (_, "Tables", _) => Self::Other,
            ("GET", table, _) => Self::Read(table),
            ("POST", table, true) => Self::Insert(table),
            ("PUT" | "MERGE" | "PATCH", table, false) if conditional => Self::Update(table),
            ("PUT" | "MERGE" | "PATCH", table, false) => Self::Upsert(table),
            ("DELETE", table, false) => Self::Delete(table),
            _ => Self::Other,
        }
    }

    /// Azure's name of the operation `method` asks, for metrics and logs.
    pub fn name(self, method: &Method) -> &'static str {
        let merge = matches!(method.as_str(), "MERGE" | "PATCH");
        match self {
            Self::QueryTables => "QueryTables",
            Self::CreateTable => "CreateTable",
            Self::DeleteTable(_) => "DeleteTable",
            Self::Read(_) => "QueryEntities",
            Self::Insert(_) => "InsertEntity",
            Self::Update(_) if merge => "MergeEntity",
            Self::Update(_) => "UpdateEntity",
            Self::Upsert(_) if merge => "InsertOrMergeEntity",
            Self::Upsert(_) => "InsertOrReplaceEntity",
            Self::Delete(_) => "DeleteEntity",
            Self::Batch => "EntityGroupTransaction",
            Self::Other => "Unknown",
        }
    }

    /// The actions a role must permit for it, as Azure's reference names them: one of each
    /// list.
    fn actions(self) -> &'static [&'static [&'static str]] {
        const READ_TABLES: &[&str] = storage_actions!("tableServices": "tables/read");
        const WRITE_TABLES: &[&str] = storage_actions!("tableServices": "tables/write");
        const DELETE_TABLES: &[&str] = storage_actions!("tableServices": "tables/delete");
        const READ: &[&str] = storage_actions!("tableServices": "tables/entities/read");
        const ADD: &[&str] = storage_actions!("tableServices": "tables/entities/add/action");
        const UPDATE: &[&str] = storage_actions!("tableServices": "tables/entities/update/action");
        const DELETE: &[&str] = storage_actions!("tableServices": "tables/entities/delete");
        match self {
            Self::QueryTables => &[READ_TABLES],
            Self::CreateTable => &[WRITE_TABLES],
            Self::DeleteTable(_) => &[DELETE_TABLES],
            Self::Read(_) => &[READ],
            Self::Insert(_) => &[ADD],
            Self::Update(_) => &[UPDATE],
            Self::Upsert(_) => &[ADD, UPDATE],
            Self::Delete(_) => &[DELETE],
            // Never reached by a token (the envelope passes, its operations are judged).
            Self::Batch | Self::Other => &[&[]],
        }
    }

    /// The permissions it needs (all of them), what kind of resource it acts on, and the
    /// table it names.
    fn needs(self) -> (&'static str, Kind, Option<&'a str>) {
        match self {
            Self::QueryTables => ("l", Kind::Service, None),
            Self::CreateTable => ("c", Kind::Container, None),
            Self::DeleteTable(t) => ("d", Kind::Container, Some(t)),
            Self::Read(t) => ("r", Kind::Object, Some(t)),
            Self::Insert(t) => ("a", Kind::Object, Some(t)),
            Self::Update(t) => ("u", Kind::Object, Some(t)),
            Self::Upsert(t) => ("au", Kind::Object, Some(t)),
            Self::Delete(t) => ("d", Kind::Object, Some(t)),
            Self::Batch => ("", Kind::Object, None),
            Self::Other => ("", Kind::Service, None),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Service,
    Container,
    Object,
}

/// Reads a request's credentials for `account`: a Shared Key or Shared Key Lite
/// `Authorization` (the Table service's strings-to-sign), a SAS in the query, or none. A
/// credential that is present and wrong is an error, never anonymous.
pub fn authenticate(
    account: &Account,
    request: Signed<'_>,
    now: SystemTime,
) -> Result<Credential, Denied> {
    let strings = |lite| string_to_sign(account, request, lite);
    let sas = |query: &QueryPairs| {
        check_sas_window(query, request.client, now)?;
        grant(account, query)
    };
    credentials(account, request, now, strings, sas)
}

/// The Table service's Shared Key string-to-sign (`VERB`, `Content-MD5`, `Content-Type`, the
/// date, the resource), or Shared Key Lite's (the date, the resource). The date is
/// `x-ms-date`'s when there is one, else `Date`'s.
pub fn string_to_sign(account: &Account, request: Signed<'_>, lite: bool) -> String {
    let value = |name| ifmatch_azure::auth::signed_field(request.headers, name);
    let mut resource = format!("/{}{}", account.name(), request.uri.path());
    if let Some(comp) = QueryPairs::of(request.uri).get("comp") {
        resource.push_str("?comp=");
        resource.push_str(&comp);
    }
    // The date signed is the one whose skew is checked: `x-ms-date` when there is one, else
    // `Date`. (A string signed over `Date` beside an unsigned `x-ms-date` would let an old
    // request pass with a fresh `x-ms-date`.)
    let date = match value(ifmatch_azure::X_MS_DATE) {
        "" => value(http::header::DATE),
        date => date,
    };
    if lite {
        format!("{date}\n{resource}")
    } else {
        let method = request.method.as_str();
        let (md5, kind) = (
            value(ifmatch_azure::CONTENT_MD5),
            value(http::header::CONTENT_TYPE),
        );
        format!("{method}\n{md5}\n{kind}\n{date}\n{resource}")
    }
}

/// What a shared access signature grants, once its signature is checked (its time window,
/// protocol and address are checked before).
fn grant(account: &Account, query: &QueryPairs) -> Result<Grant, Denied> {
    let field = |name: &str| query.get(name).unwrap_or_default();
    let permissions = field("sp");
    let (text, scope) = if query.get("ss").is_some() {
        let (text, types) = account_sas(account, query, 't')?;
        (text, Scope::Account(types))
    } else {
        let name = field("tn").to_ascii_lowercase();
        if name.is_empty() {
            return Err(failed(
                "a table SAS names its table (tn); an account SAS its services (ss)",
            ));
        }
        let fields = [
            permissions.clone(),
            field("st"),
            field("se"),
            format!("/table/{}/{name}", account.name()),
            field("si"),
            field("sip"),
            field("spr"),
            field("sv"),
            field("spk"),
            field("srk"),
            field("epk"),
            field("erk"),
        ];
        let bound = |pk: &str, rk: &str| {
            let pk = query.get(pk)?;
            Some((pk, query.get(rk)))
        };
        let range = KeyRange {
            start: bound("spk", "srk"),
            end: bound("epk", "erk"),
        };
        (fields.join("\n"), Scope::Table { name, range })
    };
    verify_sas(account, &text, query)?;
    Ok(Grant::new(permissions, scope))
}

/// Whether `credential` allows `operation`; with a table SAS, the key range the front must
/// keep the operation to (every entity it reads or writes within it).
pub fn authorize<'c>(
    credential: &'c Credential,
    operation: Operation<'_>,
) -> Result<Option<&'c KeyRange>, Denied> {
    let grant = match credential {
        Credential::Key => return Ok(None),
        Credential::Anonymous => return Err(anonymous_refused("tables are never public")),
        // The envelope: each operation inside is authorized as it is read.
        Credential::Sas(_) | Credential::Token(_) if operation == Operation::Batch => {
            return Ok(None);
        }
        Credential::Token(access) => {
            let (_, _, table) = operation.needs();
            let resource = match table {
                Some(table) => format!("/tableServices/default/tables/{table}"),
                None => "/tableServices/default".to_owned(),
            };
            for actions in operation.actions() {
                access.check(actions, &resource)?;
            }
            return Ok(None);
        }
        Credential::Sas(grant) => grant,
    };
    let (needs, kind, table) = operation.needs();
    let (in_scope, range) = match &grant.scope {
        Scope::Account(types) => {
            let covered = match kind {
                // Query Tables lists tables: the service, or the tables' own level.
                Kind::Service => types.service || types.container,
                Kind::Container => types.container,
                Kind::Object => types.object,
            };
            (covered, None)
        }
        Scope::Table { name, range } => {
            let same = table.is_some_and(|t| t.eq_ignore_ascii_case(name));
            (same && kind == Kind::Object, Some(range))
        }
    };
    let in_scope = in_scope && operation != Operation::Other;
    grant.allows(in_scope, Needs::AllOf(needs))?;
    Ok(range.filter(|r| !r.is_all()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ifmatch_azure::CommonCode;

    #[test]
    fn each_operation_is_judged_by_its_action_one_role_allowed_and_one_refused() {
        const READER: &str = "Storage Table Data Reader";
        const CONTRIBUTOR: &str = "Storage Table Data Contributor";
        const BLOBS: &str = "Storage Blob Data Owner";
        let mut conditional = HeaderMap::new();
        conditional.insert(http::header::IF_MATCH, "*".parse().unwrap());
        let none = HeaderMap::new();
        let cases = [
            ("GET", "/Tables", &none, READER, BLOBS),
            ("POST", "/Tables", &none, CONTRIBUTOR, READER),
            ("DELETE", "/Tables('people')", &none, CONTRIBUTOR, READER),
            ("GET", "/people()", &none, READER, BLOBS),
            ("POST", "/people", &none, CONTRIBUTOR, READER),
            (
                "PUT",
                "/people(PartitionKey='a',RowKey='b')",
                &conditional,
                CONTRIBUTOR,
                READER,
            ),
            (
                "MERGE",
                "/people(PartitionKey='a',RowKey='b')",
                &none,
                CONTRIBUTOR,
                READER,
            ),
            (
                "DELETE",
                "/people(PartitionKey='a',RowKey='b')",
                &none,
                CONTRIBUTOR,
                READER,
            ),
        ];
        let token = |role: &str| {
            Credential::Token(Box::new(ifmatch_azure::identity::Access::holding(
                role,
                "/tableServices/default/tables/people",
            )))
        };
        for (method, path, headers, allowed, refused) in cases {
            let operation = Operation::of(&method.parse().unwrap(), path, headers);
            // Listing and creating tables act on the service: a role at one table's scope
            // does not reach them.
            let at_service = matches!(operation, Operation::QueryTables | Operation::CreateTable);
            let judged = authorize(&token(allowed), operation).map(|_| ());
            match at_service {
                true => assert!(judged.is_err(), "{method} {path}: {allowed} at one table"),
                false => assert_eq!(judged, Ok(()), "{method} {path}: {allowed}"),
            }
            let denied = authorize(&token(refused), operation).unwrap_err();
            assert_eq!(
                denied.code,
                CommonCode::AuthorizationPermissionMismatch,
                "{method} {path}"
            );
        }
        // The envelope of a batch passes; each of its operations is judged as it is read.
        assert_eq!(authorize(&token(READER), Operation::Batch), Ok(None));
    }

    #[test]
    fn operations_by_method_and_path() {
        let none = HeaderMap::new();
        let mut conditional = HeaderMap::new();
        conditional.insert(http::header::IF_MATCH, "*".parse().unwrap());
        let of =
            |method: &str, path, headers| Operation::of(&method.parse().unwrap(), path, headers);
        assert_eq!(of("GET", "/Tables", &none), Operation::QueryTables);
        assert_eq!(of("POST", "/Tables", &none), Operation::CreateTable);
        assert_eq!(
            of("DELETE", "/Tables('people')", &none),
            Operation::DeleteTable("people")
        );
        assert_eq!(of("GET", "/people()", &none), Operation::Read("people"));
        assert_eq!(
            of("GET", "/people(PartitionKey='a',RowKey='b')", &none),
            Operation::Read("people")
        );
        assert_eq!(of("POST", "/people", &none), Operation::Insert("people"));
        let one = "/people(PartitionKey='a',RowKey='b')";
        assert_eq!(of("PUT", one, &conditional), Operation::Update("people"));
        assert_eq!(of("MERGE", one, &none), Operation::Upsert("people"));
        assert_eq!(of("DELETE", one, &conditional), Operation::Delete("people"));
        assert_eq!(of("PUT", "/Tables", &none), Operation::Other);
        assert_eq!(of("GET", "/people(", &none), Operation::Other);
    }

    #[test]
    fn what_each_grant_covers() {
        let grant =
            |permissions: &str, scope| Credential::Sas(Box::new(Grant::new(permissions, scope)));
        let allowed = |credential: &Credential, operation| {
            authorize(credential, operation)
                .map(|range| range.cloned())
                .map_err(|d| d.code)
        };
        let range = KeyRange {
            start: Some(("a".into(), None)),
            end: Some(("b".into(), Some("5".into()))),
        };
        let table = Scope::Table {
            name: "people".into(),
            range: range.clone(),
        };
        let sas = grant("rau", table);
        assert_eq!(
            allowed(&sas, Operation::Read("People")),
            Ok(Some(range.clone()))
        );
        assert_eq!(allowed(&sas, Operation::Upsert("people")), Ok(Some(range)));
        assert_eq!(
            allowed(&sas, Operation::Delete("people")),
            Err(CommonCode::AuthorizationPermissionMismatch)
        );
        assert_eq!(
            allowed(&sas, Operation::Read("others")),
            Err(CommonCode::AuthorizationResourceTypeMismatch)
        );
        assert_eq!(
            allowed(&sas, Operation::CreateTable),
            Err(CommonCode::AuthorizationResourceTypeMismatch),
            "a table SAS creates no table"
        );
        let only_add = grant(
            "a",
            Scope::Table {
                name: "people".into(),
                range: KeyRange::default(),
            },
        );
        assert_eq!(
            allowed(&only_add, Operation::Upsert("people")),
            Err(CommonCode::AuthorizationPermissionMismatch),
            "insert or replace needs add and update"
        );
        assert_eq!(allowed(&only_add, Operation::Insert("people")), Ok(None));
        let account = grant(
            "rlc",
            Scope::Account(ResourceTypes {
                service: false,
                container: true,
                object: false,
            }),
        );
        assert_eq!(allowed(&account, Operation::CreateTable), Ok(None));
        assert_eq!(allowed(&account, Operation::QueryTables), Ok(None));
        assert_eq!(
            allowed(&account, Operation::Read("people")),
            Err(CommonCode::AuthorizationResourceTypeMismatch)
        );
        assert_eq!(
            allowed(&Credential::Anonymous, Operation::Read("people")),
            Err(CommonCode::AuthenticationFailed)
        );
    }

    #[test]
    fn key_ranges() {
        let range = KeyRange {
            start: Some(("b".into(), Some("2".into()))),
            end: Some(("d".into(), None)),
        };
        for (pk, rk, inside) in [
            ("a", "9", false),
            ("b", "1", false),
            ("b", "2", true),
            ("c", "", true),
            ("d", "zzz", true),
            ("e", "", false),
        ] {
            assert_eq!(range.contains(pk, rk), inside, "{pk} {rk}");
        }
        assert_eq!(range.first(), Some(("b", "2")));
        assert!(range.ends_before("d\0", ""));
        assert!(KeyRange::default().is_all());
    }
}
