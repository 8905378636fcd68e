//! A database's users and their permissions: each user one entity of the table `#users`
//! (partition the database, row the id), each permission one of `#perms` (partition
//! `{db}/{user}`, row the id). Every read of a permission gives it a fresh resource token
//! ([`crate::resource_token`]), for `x-ms-documentdb-expiry-seconds` (an hour by default).

use http::StatusCode;
use ifmatch_table::{Change, Entity, Expected, Tables};
use serde_json::{Map, Value as Json};

use super::answers::{Answered, Done};
use super::{Asked, DATABASES, Front, id_of, key, rid};
use crate::document::{self, json_of};
use crate::failure::{Code, Failure, bad_request, conflict, not_found};
use crate::resource_token::{self, Grant};

const USERS: &str = "#users";

const PERMISSIONS: &str = "#perms";

/// A permission's place: its database, user and id.
type Named<'n> = (&'n str, &'n str, &'n str);

impl<T: Tables> Front<'_, T> {
    pub(super) async fn users(&self, db: &str) -> Answered {
        self.get(DATABASES, "", db).await?.ok_or_else(not_found)?;
        let found = self.scan_all(USERS, Some(db)).await?;
        let users: Vec<Json> = found.iter().map(|u| user_json(db, u)).collect();
        Ok(listed("Users", users))
    }

    pub(super) async fn create_user(&self, db: &str, asked: &Asked<'_>) -> Answered {
        self.get(DATABASES, "", db).await?.ok_or_else(not_found)?;
        let resource = document::resource(asked.body)?;
        let id = id_of(&resource);
        document::check_name(&id)?;
        let entity = self.entity(db, &id, None, &resource);
        let change = Change {
            key: key(db, &id),
            expected: Expected::Absent,
            write: Some(entity.clone()),
        };
        self.commit_resource(USERS, &[change], conflict).await?;
        Ok(Done::of(
            StatusCode::CREATED,
            user_json(db, &entity),
            Some(entity.timestamp),
        ))
    }

    pub(super) async fn user(&self, db: &str, user: &str) -> Answered {
        let entity = self.get(USERS, db, user).await?.ok_or_else(not_found)?;
        let body = user_json(db, &entity);
        Ok(Done::ok(body, entity.timestamp))
    }

    /// Replace User: the same id (a user's permissions are kept under its id; a new id is
    /// refused rather than half applied).
    pub(super) async fn replace_user(&self, db: &str, user: &str, asked: &Asked<'_>) -> Answered {
        let resource = document::resource(asked.body)?;
        if id_of(&resource) != user {
            return Err(bad_request(
                "Renaming a user is not supported by this server: create a user with the new id \
                 and its permissions.",
            ));
        }
        let before = self.get(USERS, db, user).await?.ok_or_else(not_found)?;
        let entity = self.entity(db, user, Some(before.timestamp), &resource);
        let change = Change {
            key: key(db, user),
            expected: Expected::Version(before.timestamp),
            write: Some(entity.clone()),
        };
        self.commit_resource(USERS, &[change], conflict).await?;
        let body = user_json(db, &entity);
        Ok(Done::ok(body, entity.timestamp))
    }

    pub(super) async fn delete_user(&self, db: &str, user: &str) -> Answered {
        let change = Change {
            key: key(db, user),
            expected: Expected::Present,
            write: None,
        };
        self.commit_resource(USERS, &[change], not_found).await?;
        self.drop_permissions(db, user).await?;
        Ok(Done::empty(StatusCode::NO_CONTENT, None))
    }

    /// Removes a deleted database's users and their permissions.
    pub(super) async fn drop_users(&self, db: &str) -> Result<(), Failure> {
        for user in self.scan_all(USERS, Some(db)).await? {
            let change = Change {
                key: key(db, &user.row_key),
                expected: Expected::Anything,
                write: None,
            };
            self.commit_resource(USERS, &[change], not_found).await?;
            self.drop_permissions(db, &user.row_key).await?;
        }
        Ok(())
    }

    async fn drop_permissions(&self, db: &str, user: &str) -> Result<(), Failure> {
        let partition = owner(db, user);
        for permission in self.scan_all(PERMISSIONS, Some(&partition)).await? {
            let change = Change {
                key: key(&partition, &permission.row_key),
                expected: Expected::Anything,
                write: None,
            };
            self.commit_resource(PERMISSIONS, &[change], not_found)
                .await?;
        }
        Ok(())
    }

    pub(super) async fn permissions(&self, db: &str, user: &str, asked: &Asked<'_>) -> Answered {
        self.get(USERS, db, user).await?.ok_or_else(not_found)?;
        let lifetime = resource_token::lifetime(asked.headers)?;
        let found = self.scan_all(PERMISSIONS, Some(&owner(db, user))).await?;
        let permissions = (found.iter())
            .filter(|p| !is_scope(&p.row_key))
            .map(|p| self.permission_json((db, user, &p.row_key), p, lifetime))
            .collect();
        Ok(listed("Permissions", permissions))
    }

    pub(super) async fn permission(&self, named: Named<'_>, asked: &Asked<'_>) -> Answered {
        let lifetime = resource_token::lifetime(asked.headers)?;
        let (db, user, id) = named;
        let entity = (self.get(PERMISSIONS, &owner(db, user), id).await?).ok_or_else(not_found)?;
        let body = self.permission_json(named, &entity, lifetime);
        Ok(Done::ok(body, entity.timestamp))
    }

    /// Create Permission (`id` none: the body's) or Replace Permission: its mode, resource
    /// and partition read and checked; a replaced permission's earlier tokens no longer hold.
    pub(super) async fn write_permission(
        &self,
        (db, user, id): (&str, &str, Option<&str>),
        asked: &Asked<'_>,
    ) -> Answered {
        let lifetime = resource_token::lifetime(asked.headers)?;
        self.get(USERS, db, user).await?.ok_or_else(not_found)?;
        let mut resource = document::resource(asked.body)?;
        let named = id_of(&resource);
        document::check_name(&named)?;
        if id.is_some_and(|id| id != named) {
            return Err(bad_request(
                "Renaming a permission is not supported by this server.",
            ));
        }
        checked_permission(db, &mut resource)?;
        let partition = owner(db, user);
        let before = match id {
            Some(id) => Some(
                self.get(PERMISSIONS, &partition, id)
                    .await?
                    .ok_or_else(not_found)?,
            ),
            None => None,
        };
        let entity = self.entity(
            &partition,
            &named,
            before.as_ref().map(|b| b.timestamp),
            &resource,
        );
        // The permission and the row of its scope, in one commit that expects each as read: a
        // scope another permission of this user holds is refused, 409, as Azure refuses it,
        // and of two racing for one scope the second finds it taken (409 too).
        let scope = scope_of(&resource);
        let held = self.get(PERMISSIONS, &partition, &scope).await?;
        if held.as_ref().is_some_and(|held| !holds(held, &named)) {
            return Err(Failure::new(
                Code::Conflict,
                format!(
                    "User {user} already has a permission for {}: a user has one permission \
                     a resource (and partition).",
                    &scope[1..]
                ),
            ));
        }
        let mut changes = vec![Change {
            key: key(&partition, &named),
            expected: match &before {
                Some(before) => Expected::Version(before.timestamp),
                None => Expected::Absent,
            },
            write: Some(entity.clone()),
        }];
        let earlier = before.as_ref().map(|b| scope_of(&json_of(b)));
        if let Some(earlier) = earlier.filter(|earlier| *earlier != scope) {
            changes.extend(self.release(&partition, &earlier, &named).await?);
        }
        let holder = Map::from_iter([("id".to_owned(), Json::from(named.as_str()))]);
        changes.push(Change {
            key: key(&partition, &scope),
            expected: match &held {
                Some(held) => Expected::Version(held.timestamp),
                None => Expected::Absent,
            },
            write: Some(self.entity(&partition, &scope, None, &holder)),
        });
        self.commit_resource(PERMISSIONS, &changes, conflict)
            .await?;
        let status = match before {
            Some(_) => StatusCode::OK,
            None => StatusCode::CREATED,
        };
        let body = self.permission_json((db, user, &named), &entity, lifetime);
        Ok(Done::of(status, body, Some(entity.timestamp)))
    }

    /// Delete Permission, and the row of its scope with it.
    pub(super) async fn delete_permission(&self, (db, user, id): Named<'_>) -> Answered {
        let partition = owner(db, user);
        let before = (self.get(PERMISSIONS, &partition, id).await?).ok_or_else(not_found)?;
        let mut changes = vec![Change {
            key: key(&partition, id),
            expected: Expected::Version(before.timestamp),
            write: None,
        }];
        let scope = scope_of(&json_of(&before));
        changes.extend(self.release(&partition, &scope, id).await?);
        self.commit_resource(PERMISSIONS, &changes, not_found)
            .await?;
        Ok(Done::empty(StatusCode::NO_CONTENT, None))
    }

    /// The removal of the row of `scope`, if the permission `id` holds it (a permission made
    /// before scopes were kept holds none).
    async fn release(
        &self,
        partition: &str,
        scope: &str,
        id: &str,
    ) -> Result<Option<Change>, Failure> {
        let held = self.get(PERMISSIONS, partition, scope).await?;
        Ok(held.filter(|held| holds(held, id)).map(|held| Change {
            key: key(partition, scope),
            expected: Expected::Version(held.timestamp),
            write: None,
        }))
    }

    /// Whether the permission `grant` came from still stands as it was when its token was
    /// made: 401 once it was deleted or replaced.
    pub(crate) async fn permission_stands(&self, grant: &Grant) -> Result<(), Failure> {
        let found = self
            .get(
                PERMISSIONS,
                &owner(&grant.db, &grant.user),
                &grant.permission,
            )
            .await?;
        match found {
            Some(entity) if document::etag(entity.timestamp) == grant.version => Ok(()),
            _ => Err(Failure::new(
                Code::Unauthorized,
                format!(
                    "The resource token's permission {} of user {} was deleted or replaced: \
                     read the permission again for a token.",
                    grant.permission, grant.user
                ),
            )),
        }
    }

    /// A permission as read: with its system properties and a token for `lifetime` seconds.
    fn permission_json(&self, (db, user, id): Named<'_>, entity: &Entity, lifetime: u64) -> Json {
        let link = format!("dbs/{db}/users/{user}/permissions/{id}");
        let mut json = document::with_system(
            json_of(entity),
            &link,
            &rid(&[db, user, id]),
            entity.timestamp,
        );
        let now = (self.now.duration_since(std::time::UNIX_EPOCH))
            .unwrap_or_default()
            .as_secs();
        let grant = Grant {
            db: db.to_owned(),
            user: user.to_owned(),
            permission: id.to_owned(),
            all: json.get("permissionMode").and_then(Json::as_str) == Some("All"),
            resource: (json.get("resource").and_then(Json::as_str))
                .unwrap_or_default()
                .to_owned(),
            partition: json.get("resourcePartitionKey").cloned(),
            version: document::etag(entity.timestamp),
            expires: now + lifetime,
        };
        let token = resource_token::mint(self.account, &grant);
        json.insert("_token".into(), token.into());
        Json::Object(json)
    }
}

/// The partition of a user's permissions.
fn owner(db: &str, user: &str) -> String {
    format!("{db}/{user}")
}

/// The row of a permission's scope in its user's partition: `/`, its resource's link, and its
/// partition key's values if it names one. Azure gives a user one permission a resource; a
/// permission's id has no `/`, so no permission's row is a scope's.
fn scope_of(permission: &Map<String, Json>) -> String {
    let link = (permission.get("resource").and_then(Json::as_str)).unwrap_or_default();
    match permission.get("resourcePartitionKey") {
        Some(values) => format!("/{link}#{values}"),
        None => format!("/{link}"),
    }
}

/// Whether the row of a scope is held by the permission `id`.
fn holds(scope: &Entity, id: &str) -> bool {
    json_of(scope).get("id").and_then(Json::as_str) == Some(id)
}

fn is_scope(row: &str) -> bool {
    row.starts_with('/')
}

/// A permission's body made canonical, or 400: `permissionMode` `All` or `Read`, `resource` a
/// container's or a document's link in this database, `resourcePartitionKey` a partition key's
/// values (an array) if given.
fn checked_permission(db: &str, resource: &mut Map<String, Json>) -> Result<(), Failure> {
    let mode = match resource.get("permissionMode").and_then(Json::as_str) {
        Some(m) if m.eq_ignore_ascii_case("all") => "All",
        Some(m) if m.eq_ignore_ascii_case("read") => "Read",
        _ => return Err(bad_request("permissionMode is All or Read.")),
    };
    resource.insert("permissionMode".into(), mode.into());
    let link = (resource.get("resource").and_then(Json::as_str))
        .map(|l| l.trim_matches('/').to_owned())
        .unwrap_or_default();
    let segments: Vec<&str> = link.split('/').collect();
    let fits = matches!(
        segments.as_slice(),
        ["dbs", d, "colls", _] | ["dbs", d, "colls", _, "docs", _] if *d == db
    );
    if !fits {
        return Err(bad_request(format!(
            "A permission's resource is a container's or a document's link in database {db} \
             (dbs/{db}/colls/{{container}}[/docs/{{id}}]), not {link:?}."
        )));
    }
    resource.insert("resource".into(), link.into());
    match resource.get("resourcePartitionKey") {
        None | Some(Json::Null) => {
            resource.remove("resourcePartitionKey");
        }
        Some(Json::Array(_)) => {}
        Some(_) => {
            return Err(bad_request(
                "resourcePartitionKey is a partition key's values, as an array.",
            ));
        }
    }
    Ok(())
}

fn user_json(db: &str, entity: &Entity) -> Json {
    let id = &entity.row_key;
    let mut json = document::with_system(
        json_of(entity),
        &format!("dbs/{db}/users/{id}"),
        &rid(&[db, id]),
        entity.timestamp,
    );
    json.insert("_permissions".into(), "permissions/".into());
    Json::Object(json)
}

/// A feed of `kind` (`Users`, `Permissions`).
fn listed(kind: &str, resources: Vec<Json>) -> Done {
    Done::feed("", kind, resources, None)
}
