//! What a request's path names: the account, a feed (databases, containers, documents,
//! partition key ranges) or one resource, and what a master-key signature covers of it (its
//! resource type and link).

/// A resource or a feed of them, by the names in the path (decoded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// `/`: the database account.
    Account,
    /// `/dbs`.
    Databases,
    /// `/dbs/{db}`.
    Database(String),
    /// `/dbs/{db}/colls`.
    Containers(String),
    /// `/dbs/{db}/colls/{coll}`.
    Container(String, String),
    /// `/dbs/{db}/colls/{coll}/docs`.
    Documents(String, String),
    /// `/dbs/{db}/colls/{coll}/docs/{id}`.
    Document(String, String, String),
    /// `/dbs/{db}/colls/{coll}/pkranges`.
    Ranges(String, String),
    /// `/dbs/{db}/users`.
    Users(String),
    /// `/dbs/{db}/users/{user}`.
    User(String, String),
    /// `/dbs/{db}/users/{user}/permissions`.
    Permissions(String, String),
    /// `/dbs/{db}/users/{user}/permissions/{id}`.
    Permission(String, String, String),
    /// `/dbs/{db}/colls/{coll}/sprocs` (or `triggers`, `udfs`): a container's scripts.
    Scripts(String, String, Scripts),
    /// `/dbs/{db}/colls/{coll}/sprocs/{id}` (or a trigger, a user-defined function).
    Script(String, String, Scripts, String),
    /// `/dbs/{db}/colls/{coll}/conflicts`.
    Conflicts(String, String),
    /// `/dbs/{db}/colls/{coll}/conflicts/{id}`.
    Conflict(String, String, String),
    /// `/offers`: provisioned throughput, a database's or a container's.
    Offers,
    /// `/offers/{id}`.
    Offer(String),
}

/// The kinds of a container's scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scripts {
    /// Stored procedures (`sprocs`).
    Procedures,
    /// Pre- and post-triggers (`triggers`).
    Triggers,
    /// User-defined functions (`udfs`).
    Functions,
}

impl Scripts {
    /// The kind a path segment names.
    pub fn of_segment(segment: &str) -> Option<Self> {
        match segment {
            "sprocs" => Some(Self::Procedures),
            "triggers" => Some(Self::Triggers),
            "udfs" => Some(Self::Functions),
            _ => None,
        }
    }

    /// Its path segment, which is also the resource type a signature covers.
    pub fn segment(self) -> &'static str {
        match self {
            Self::Procedures => "sprocs",
            Self::Triggers => "triggers",
            Self::Functions => "udfs",
        }
    }
}

/// Why a path names nothing this server serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unknown {
    /// Not valid UTF-8 once decoded.
    Encoding,
    /// A resource kind Cosmos has that this server does not serve (stored procedures,
    /// triggers, ...), or no kind at all.
    Kind(String),
}

impl Address {
    /// The address of `path` (percent-encoded, as it came).
    pub fn parse(path: &str) -> Result<Self, Unknown> {
        let path = path.trim_matches('/');
        let mut names = Vec::new();
        if !path.is_empty() {
            for segment in path.split('/') {
                let decoded = percent_encoding::percent_decode_str(segment)
                    .decode_utf8()
                    .map_err(|_| Unknown::Encoding)?;
                names.push(decoded.into_owned());
            }
        }
        let kind = |i: usize| names.get(i).map(String::as_str);
        let address = match (names.len(), kind(0), kind(2), kind(4)) {
            (0, ..) => Self::Account,
            (1, Some("offers"), ..) => Self::Offers,
            (2, Some("offers"), ..) => Self::Offer(names[1].clone()),
            (1, Some("dbs"), ..) => Self::Databases,
            (2, Some("dbs"), ..) => Self::Database(names[1].clone()),
            (3, Some("dbs"), Some("colls"), _) => Self::Containers(names[1].clone()),
            (4, Some("dbs"), Some("colls"), _) => {
                Self::Container(names[1].clone(), names[3].clone())
            }
            (5, Some("dbs"), Some("colls"), Some("docs")) => {
                Self::Documents(names[1].clone(), names[3].clone())
            }
            (6, Some("dbs"), Some("colls"), Some("docs")) => {
                Self::Document(names[1].clone(), names[3].clone(), names[5].clone())
            }
            (5, Some("dbs"), Some("colls"), Some("pkranges")) => {
                Self::Ranges(names[1].clone(), names[3].clone())
            }
            (5, Some("dbs"), Some("colls"), Some("conflicts")) => {
                Self::Conflicts(names[1].clone(), names[3].clone())
            }
            (6, Some("dbs"), Some("colls"), Some("conflicts")) => {
                Self::Conflict(names[1].clone(), names[3].clone(), names[5].clone())
            }
            (5, Some("dbs"), Some("colls"), Some(kind)) if Scripts::of_segment(kind).is_some() => {
                let kind = Scripts::of_segment(kind).unwrap_or(Scripts::Procedures);
                Self::Scripts(names[1].clone(), names[3].clone(), kind)
            }
            (6, Some("dbs"), Some("colls"), Some(kind)) if Scripts::of_segment(kind).is_some() => {
                let kind = Scripts::of_segment(kind).unwrap_or(Scripts::Procedures);
                Self::Script(names[1].clone(), names[3].clone(), kind, names[5].clone())
            }
            (3, Some("dbs"), Some("users"), _) => Self::Users(names[1].clone()),
            (4, Some("dbs"), Some("users"), _) => Self::User(names[1].clone(), names[3].clone()),
            (5, Some("dbs"), Some("users"), Some("permissions")) => {
                Self::Permissions(names[1].clone(), names[3].clone())
            }
            (6, Some("dbs"), Some("users"), Some("permissions")) => {
                Self::Permission(names[1].clone(), names[3].clone(), names[5].clone())
            }
            _ => return Err(Unknown::Kind(path.to_owned())),
        };
        Ok(address)
    }

    /// The database and container whose documents it names, if it names documents (a stored
    /// procedure runs on them).
    pub fn documents_of(&self) -> Option<(&str, &str)> {
        match self {
            Self::Documents(db, coll)
            | Self::Document(db, coll, _)
            | Self::Script(db, coll, Scripts::Procedures, _) => Some((db, coll)),
            _ => None,
        }
    }

    /// The resource type and link a master-key signature covers: a feed is signed as its
    /// kind under its parent's link, a resource as its kind under its own.
    pub fn signed(&self) -> (&'static str, String) {
        match self {
            Self::Account => ("", String::new()),
            Self::Databases => ("dbs", String::new()),
            Self::Database(db) => ("dbs", format!("dbs/{db}")),
            Self::Containers(db) => ("colls", format!("dbs/{db}")),
            Self::Container(db, coll) => ("colls", format!("dbs/{db}/colls/{coll}")),
            Self::Documents(db, coll) => ("docs", format!("dbs/{db}/colls/{coll}")),
            Self::Document(db, coll, id) => ("docs", format!("dbs/{db}/colls/{coll}/docs/{id}")),
            Self::Ranges(db, coll) => ("pkranges", format!("dbs/{db}/colls/{coll}")),
            Self::Conflicts(db, coll) => ("conflicts", format!("dbs/{db}/colls/{coll}")),
            Self::Conflict(db, coll, id) => {
                ("conflicts", format!("dbs/{db}/colls/{coll}/conflicts/{id}"))
            }
            Self::Scripts(db, coll, kind) => (kind.segment(), format!("dbs/{db}/colls/{coll}")),
            Self::Script(db, coll, kind, id) => (
                kind.segment(),
                format!("dbs/{db}/colls/{coll}/{}/{id}", kind.segment()),
            ),
            Self::Users(db) => ("users", format!("dbs/{db}")),
            Self::User(db, user) => ("users", format!("dbs/{db}/users/{user}")),
            Self::Permissions(db, user) => ("permissions", format!("dbs/{db}/users/{user}")),
            Self::Permission(db, user, id) => (
                "permissions",
                format!("dbs/{db}/users/{user}/permissions/{id}"),
            ),
            // An offer is named by its resource id, which is signed in lowercase.
            Self::Offers => ("offers", String::new()),
            Self::Offer(id) => ("offers", id.to_lowercase()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_feeds_and_resources_and_what_is_signed() {
        let doc = Address::parse("/dbs/shop/colls/carts/docs/a%20b/").unwrap();
        assert_eq!(
            doc,
            Address::Document("shop".into(), "carts".into(), "a b".into())
        );
        assert_eq!(
            doc.signed(),
            ("docs", "dbs/shop/colls/carts/docs/a b".into())
        );
        assert_eq!(Address::parse("/").unwrap(), Address::Account);
        // What a path signs: its kind of resource and the link it names.
        for (path, kind, link) in [
            ("dbs/shop/colls/carts/docs", "docs", "dbs/shop/colls/carts"),
            ("/dbs", "dbs", ""),
            (
                "/dbs/shop/users/u/permissions/p",
                "permissions",
                "dbs/shop/users/u/permissions/p",
            ),
            ("/dbs/shop/users", "users", "dbs/shop"),
            (
                "/dbs/shop/colls/c/sprocs/bulk",
                "sprocs",
                "dbs/shop/colls/c/sprocs/bulk",
            ),
            ("/dbs/shop/colls/c/udfs", "udfs", "dbs/shop/colls/c"),
            (
                "/dbs/shop/colls/c/conflicts",
                "conflicts",
                "dbs/shop/colls/c",
            ),
        ] {
            let signed = Address::parse(path).unwrap().signed();
            assert_eq!(signed, (kind, link.to_owned()), "{path}");
        }
        assert!(matches!(
            Address::parse("/dbs/shop/colls/c/attachments"),
            Err(Unknown::Kind(_))
        ));
        assert_eq!(Address::parse("/dbs/%ff"), Err(Unknown::Encoding));
        let offer = Address::parse("/offers/AbC-1_x/").unwrap();
        assert_eq!(offer.signed(), ("offers", "abc-1_x".into()));
        assert_eq!(
            Address::parse("/offers").unwrap().signed(),
            ("offers", String::new())
        );
    }
}
