//! An operation's outcome in a batch or a bulk (`batch.rs`, `bulk.rs`), and the result the
//! answer gives of it, as the SDKs read it.

use ifmatch_table::Entity;
use serde_json::{Map, Value as Json};

use super::documents::document_json_of;
use super::json_of;
use crate::document;
use crate::failure::Failure;

/// One operation's outcome: its status, and the document it wrote or read.
pub(super) struct Outcome {
    pub(super) status: u16,
    pub(super) entity: Option<Entity>,
    /// The JSON `entity` was made of, when the operation wrote it: its result is built from
    /// it, not parsed back from the entity's stored text.
    pub(super) document: Option<Map<String, Json>>,
}

impl Outcome {
    /// An outcome with no document: a failure, a deletion.
    pub(super) fn bare(status: u16) -> Self {
        Self {
            status,
            entity: None,
            document: None,
        }
    }

    /// A document read: `entity` as stored.
    pub(super) fn read(status: u16, entity: &Entity) -> Self {
        Self {
            entity: Some(entity.clone()),
            ..Self::bare(status)
        }
    }
}

/// One operation's result in a batch's answer, as the SDKs read it.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct OperationResult {
    pub(super) status_code: u16,
    request_charge: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    e_tag: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_body: Option<Json>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

impl OperationResult {
    /// A result of `status` alone.
    pub(super) fn status(status: u16) -> Self {
        Self {
            status_code: status,
            request_charge: 1.0,
            e_tag: None,
            resource_body: None,
            message: None,
        }
    }

    /// An operation refused on its own: its status and why.
    pub(super) fn refused(failure: &Failure) -> Self {
        Self {
            message: Some(failure.message.clone()),
            ..Self::status(failure.status())
        }
    }
}

/// One operation's result: its status, and, when `written` stands, the document's tag and
/// body (not the body of a 304).
pub(super) fn result(db: &str, coll: &str, outcome: Outcome, written: bool) -> OperationResult {
    let mut result = OperationResult::status(outcome.status);
    if written && let Some(entity) = &outcome.entity {
        result.e_tag = Some(document::etag(entity.timestamp));
        if outcome.status != 304 {
            let json = outcome.document.unwrap_or_else(|| json_of(entity));
            result.resource_body = Some(document_json_of(db, coll, entity, json));
        }
    }
    result
}
