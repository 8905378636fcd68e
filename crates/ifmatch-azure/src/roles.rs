//! Azure's role-based access for data: role definitions (the built-in data roles of Storage
//! and Cosmos DB, and custom roles) as lists of permitted actions, assignments of a role to a
//! principal at a scope, and what a principal's assignments allow.
//!
//! An action is Azure's name for what an operation does (`Microsoft.Storage/storageAccounts/
//! blobServices/containers/blobs/read`); each dialect names the actions of its operations
//! (`ifmatch_blob::auth`, the Queue and Table services, the Cosmos endpoint). A role permits an
//! action when one of its `actions` or `dataActions` matches it (`*` matches any run of
//! characters, case aside) and none of its `notActions` or `notDataActions` does. A scope is
//! a path below the account: `/` the account, `/blobServices/default/containers/{c}`,
//! `/queueServices/default/queues/{q}`, `/tableServices/default/tables/{t}`, `/dbs/{d}` and
//! `/dbs/{d}/colls/{c}`; a full Azure resource id is read as its part below the account.

use serde::Deserialize;

/// The actions of a Storage service's operation, as Azure's reference names them (a role that
/// permits any one of them permits the operation), each under
/// `Microsoft.Storage/storageAccounts/{service}/`: `storage_actions!("queueServices":
/// "queues/read")`, a `&'static [&'static str]`.
#[macro_export]
macro_rules! storage_actions {
    ($service:literal: $($action:literal),+ $(,)?) => {
        &[$(concat!("Microsoft.Storage/storageAccounts/", $service, "/", $action)),+]
    };
}

/// A role: what it permits, by Azure's action names.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleDefinition {
    /// Its name (`Storage Blob Data Reader`).
    #[serde(alias = "roleName")]
    pub name: String,
    /// Its id (a GUID for Azure's own; anything unique for a custom role).
    #[serde(default)]
    pub id: String,
    /// Control-plane actions it permits (containers, queues, tables).
    #[serde(default)]
    pub actions: Vec<String>,
    /// Actions taken out of `actions`.
    #[serde(default)]
    pub not_actions: Vec<String>,
    /// Data actions it permits (blobs, messages, entities, items).
    #[serde(default)]
    pub data_actions: Vec<String>,
    /// Data actions taken out of `data_actions`.
    #[serde(default)]
    pub not_data_actions: Vec<String>,
}

impl RoleDefinition {
    /// Whether this role permits `action`: a data action by its `dataActions`, any other by
    /// its `actions` (as in Azure, `actions: ["*"]` grants no data).
    pub fn permits(&self, action: &str) -> bool {
        let any = |patterns: &[String]| patterns.iter().any(|p| matches(p, action));
        match is_data(action) {
            true => any(&self.data_actions) && !any(&self.not_data_actions),
            false => any(&self.actions) && !any(&self.not_actions),
        }
    }

    /// Whether this role is named `name`, by its name (case aside) or its id.
    pub fn is(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name) || (!self.id.is_empty() && self.id == name)
    }
}

/// Whether `pattern` (Azure's form: `*` matches any run of characters) matches `action`, case
/// aside.
pub fn matches(pattern: &str, action: &str) -> bool {
    let (pattern, action) = (pattern.to_ascii_lowercase(), action.to_ascii_lowercase());
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = action.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Whether `action` is a data action: what is in blobs, messages and entities, and every
/// action of Cosmos DB's data plane.
pub fn is_data(action: &str) -> bool {
    let action = action.to_ascii_lowercase();
    action.starts_with("microsoft.documentdb/")
        || ["/blobs/", "/messages/", "/entities/"]
            .iter()
            .any(|part| action.contains(part))
}

const STORAGE: &str = "Microsoft.Storage/storageAccounts/";
const COSMOS: &str = "Microsoft.DocumentDB/databaseAccounts/";

const CONTAINERS: &str = "blobServices/containers/";
const BLOBS: &str = "blobServices/containers/blobs/";
const DELEGATION: &str = "blobServices/generateUserDelegationKey/action";
const QUEUES: &str = "queueServices/queues/";
const MESSAGES: &str = "queueServices/queues/messages/";
const TABLES: &str = "tableServices/tables/";
const ENTITIES: &str = "tableServices/tables/entities/";
const ITEMS: &str = "sqlDatabases/containers/";

/// A built-in role as written below: its name, its id, and its actions and data actions, each
/// a resource's path and what is done to it (`""` and the whole action for one of no
/// resource), below the account ([`STORAGE`], or [`COSMOS`] for Cosmos DB's roles).
type BuiltIn = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static [(&'static str, &'static str)],
);

/// Azure's built-in data roles of Storage (blobs, queues, tables) and Cosmos DB, as its
/// documentation lists their permissions.
const BUILT_IN: &[BuiltIn] = &[
    (
        "Storage Blob Data Reader",
        "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1",
        &[(CONTAINERS, "read"), ("", DELEGATION)],
        &[(BLOBS, "read")],
    ),
    (
        "Storage Blob Data Contributor",
        "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
        &[
            (CONTAINERS, "delete"),
            (CONTAINERS, "read"),
            (CONTAINERS, "write"),
            ("", DELEGATION),
        ],
        &[
            (BLOBS, "delete"),
            (BLOBS, "read"),
            (BLOBS, "write"),
            (BLOBS, "move/action"),
            (BLOBS, "add/action"),
        ],
    ),
    (
        "Storage Blob Data Owner",
        "b7e6dc6d-f1e8-4753-8033-0f276bb0955b",
        &[(CONTAINERS, "*"), ("", DELEGATION)],
        &[(BLOBS, "*")],
    ),
    // A control-plane role: the account's settings and containers, no data.
    (
        "Storage Account Contributor",
        "17d1049b-9a84-46fb-8f53-869881c3d3ab",
        &[("", "*")],
        &[],
    ),
    (
        "Storage Queue Data Reader",
        "19e7f393-937e-4f77-808e-94535e297925",
        &[(QUEUES, "read")],
        &[(MESSAGES, "read")],
    ),
    (
        "Storage Queue Data Contributor",
        "974c5e8b-45b9-4653-ba55-5f855dd0fb88",
        &[(QUEUES, "delete"), (QUEUES, "read"), (QUEUES, "write")],
        &[
            (MESSAGES, "delete"),
            (MESSAGES, "read"),
            (MESSAGES, "write"),
            (MESSAGES, "process/action"),
            (MESSAGES, "add/action"),
        ],
    ),
    (
        "Storage Queue Data Message Processor",
        "8a0f0c08-91a1-4084-bc3d-661d67233fed",
        &[],
        &[(MESSAGES, "read"), (MESSAGES, "process/action")],
    ),
    (
        "Storage Queue Data Message Sender",
        "c6a89b2d-59bc-44d0-9896-0f6e12d7b80a",
        &[],
        &[(MESSAGES, "add/action")],
    ),
    (
        "Storage Table Data Reader",
        "76199698-9eea-4c19-bc75-cec21354c6b6",
        &[(TABLES, "read")],
        &[(ENTITIES, "read")],
    ),
    (
        "Storage Table Data Contributor",
        "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3",
        &[(TABLES, "read"), (TABLES, "write"), (TABLES, "delete")],
        &[
            (ENTITIES, "read"),
            (ENTITIES, "write"),
            (ENTITIES, "delete"),
            (ENTITIES, "add/action"),
            (ENTITIES, "update/action"),
        ],
    ),
    (
        "Cosmos DB Built-in Data Reader",
        "00000000-0000-0000-0000-000000000001",
        &[],
        &[
            ("", "readMetadata"),
            (ITEMS, "executeQuery"),
            (ITEMS, "readChangeFeed"),
            (ITEMS, "items/read"),
        ],
    ),
    (
        "Cosmos DB Built-in Data Contributor",
        "00000000-0000-0000-0000-000000000002",
        &[],
        &[("", "readMetadata"), (ITEMS, "*"), (ITEMS, "items/*")],
    ),
];

/// Azure's built-in data roles of Storage (blobs, queues, tables) and Cosmos DB, as its
/// documentation lists their permissions.
pub fn built_in() -> Vec<RoleDefinition> {
    let role = |&(name, id, actions, data): &BuiltIn| {
        let prefix = if name.starts_with("Cosmos") {
            COSMOS
        } else {
            STORAGE
        };
        let full = |list: &[(&str, &str)]| {
            (list.iter())
                .map(|(resource, action)| format!("{prefix}{resource}{action}"))
                .collect()
        };
        RoleDefinition {
            name: name.to_owned(),
            id: id.to_owned(),
            actions: full(actions),
            not_actions: Vec::new(),
            data_actions: full(data),
            not_data_actions: Vec::new(),
        }
    };
    BUILT_IN.iter().map(role).collect()
}

/// A scope as a path below the account (`/` the account), and the account a full resource id
/// names, if it names one. `None` for a scope of no form Azure gives.
pub fn scope(text: &str) -> Option<(Option<String>, String)> {
    let lower = text.to_ascii_lowercase();
    for marker in ["/storageaccounts/", "/databaseaccounts/"] {
        if let Some(at) = lower.find(marker) {
            let rest = &text[at + marker.len()..];
            let (account, below) = rest.split_once('/').unwrap_or((rest, ""));
            return Some((Some(account.to_owned()), normal(below)));
        }
    }
    text.starts_with('/').then(|| (None, normal(text)))
}

/// `/` followed by the path's segments, without a trailing `/`.
fn normal(path: &str) -> String {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    format!("/{}", segments.join("/"))
}

/// Whether an assignment at `scope` (normal, from [`scope`]) covers `resource`, a request's
/// path below the account.
pub fn covers(scope: &str, resource: &str) -> bool {
    scope == "/"
        || resource == scope
        || (resource.starts_with(scope) && resource.as_bytes().get(scope.len()) == Some(&b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_as_azure_reads_them() {
        assert!(matches("a/b/*", "a/b/c/d"));
        assert!(matches("A/B/READ", "a/b/read"));
        assert!(matches("*", "anything"));
        assert!(matches("a/*/read", "a/x/y/read"));
        assert!(!matches("a/*/read", "a/x/write"));
        assert!(!matches("a/b/read", "a/b/readx"));
        assert!(!matches("a/b", "a/b/c"));
    }

    #[test]
    fn the_built_in_roles_permit_what_their_names_say() {
        let roles = built_in();
        let role = |name: &str| roles.iter().find(|r| r.is(name)).unwrap().clone();
        let read = format!("{STORAGE}blobServices/containers/blobs/read");
        let write = format!("{STORAGE}blobServices/containers/blobs/write");
        let tags = format!("{STORAGE}blobServices/containers/blobs/tags/write");
        assert!(role("Storage Blob Data Reader").permits(&read));
        assert!(!role("Storage Blob Data Reader").permits(&write));
        assert!(role("storage blob data contributor").permits(&write));
        assert!(!role("Storage Blob Data Contributor").permits(&tags));
        assert!(role("b7e6dc6d-f1e8-4753-8033-0f276bb0955b").permits(&tags));
        let item = format!("{COSMOS}sqlDatabases/containers/items/create");
        assert!(role("Cosmos DB Built-in Data Contributor").permits(&item));
        assert!(!role("Cosmos DB Built-in Data Reader").permits(&item));
        let custom = RoleDefinition {
            name: "all but delete".into(),
            id: String::new(),
            actions: vec![],
            not_actions: vec![],
            data_actions: vec![format!("{STORAGE}blobServices/containers/blobs/*")],
            not_data_actions: vec![format!("{STORAGE}blobServices/containers/blobs/delete")],
        };
        assert!(custom.permits(&write));
        assert!(!custom.permits(&format!("{STORAGE}blobServices/containers/blobs/delete")));
        // Every action, and no data.
        let account = role("Storage Account Contributor");
        assert!(account.permits(&format!("{STORAGE}blobServices/write")));
        assert!(!account.permits(&read));
    }

    #[test]
    fn scopes_are_read_below_the_account() {
        assert_eq!(scope("/"), Some((None, "/".into())));
        assert_eq!(
            scope("/blobServices/default/containers/box/"),
            Some((None, "/blobServices/default/containers/box".into()))
        );
        let id = "/subscriptions/s/resourceGroups/g/providers/Microsoft.Storage/storageAccounts/acct/blobServices/default/containers/box";
        assert_eq!(
            scope(id),
            Some((
                Some("acct".into()),
                "/blobServices/default/containers/box".into()
            ))
        );
        assert_eq!(scope("box"), None);
        let box_ = "/blobServices/default/containers/box";
        assert!(covers("/", box_));
        assert!(covers(box_, &format!("{box_}/blobs/a")));
        assert!(covers(box_, box_));
        assert!(!covers(box_, "/blobServices/default/containers/boxes"));
    }
}
