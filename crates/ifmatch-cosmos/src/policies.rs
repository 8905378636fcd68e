//! What a container's properties ask of every write of its documents.

use ifmatch_table::Entity;

use crate::document::json_fields;
use crate::{ttl, unique};

/// What a container's properties ask of every write of its documents: its unique keys and
/// its time to live.
#[derive(Clone)]
pub(crate) struct Policies {
    pub(crate) unique: unique::Keys,
    pub(crate) ttl: ttl::Default,
    /// How long every version is kept (the all-versions-and-deletes feed), if at all.
    pub(crate) versions: crate::versions::Retention,
    /// Whether the writes are deletes of items past their time to live (the sweep's).
    pub(crate) expiring: bool,
}

impl Policies {
    pub(crate) fn of(container: &Entity) -> Self {
        let properties = json_fields(
            container,
            &[unique::PROPERTY, ttl::PROPERTY, crate::versions::PROPERTY],
        );
        Self {
            unique: unique::declared(&properties).unwrap_or_default(),
            ttl: ttl::declared(&properties).unwrap_or_default(),
            versions: crate::versions::declared(&properties),
            expiring: false,
        }
    }
}
