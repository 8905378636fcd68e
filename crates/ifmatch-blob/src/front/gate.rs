//! The one gate of every operation on a record (or on its absence): the lease, then the
//! conditions, in the order the Blob service checks them. Each handler decides what it asks (which
//! conditions apply, read or write access); this decides whether it may, step by step.

use std::time::SystemTime;

use crate::container_protection::{Change, Protection};
use crate::lease::{Access, Lease, LeaseId, Scope, lease_id_from_headers};
use crate::precondition;
use http::HeaderMap;
use ifmatch_core::precondition::Outcome;

use super::failure::Result;
use crate::record::Record;
use crate::store::Key;

/// What got through the gate.
pub(super) struct Passed {
    /// The lease the record keeps after the operation.
    pub(super) lease: Lease,
    /// What the conditions decided: a read may be answered 304 (`NotModified`), a range
    /// ignored (`IgnoreRange`); otherwise `Proceed`.
    pub(super) outcome: Outcome,
}

/// What a request brings to the gate: its conditional headers, its `x-ms-lease-id`, the
/// time it is judged at, and its container's own protection.
#[derive(Clone, Copy)]
pub(super) struct Asking<'a> {
    pub(super) headers: &'a HeaderMap,
    pub(super) lease_id: Option<LeaseId>,
    pub(super) now: SystemTime,
    guard: Option<Guard<'a>>,
}

/// A container's own protection ([`crate::container_protection`]) and what the request's
/// operation would do to a blob of it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Guard<'a> {
    protection: &'a Protection,
    change: Change,
}

/// A container's own protection as one request read it, and the change it would make.
pub(super) struct Protected {
    pub(super) protection: Box<Protection>,
    pub(super) change: Change,
}

impl Protected {
    /// What the gate judges by.
    pub(super) fn guard(&self) -> Guard<'_> {
        Guard {
            protection: &self.protection,
            change: self.change,
        }
    }
}

impl<'a> Asking<'a> {
    /// What a request with `headers` brings, judged at `now`: 400 when its lease id is not one.
    pub(super) fn of(headers: &'a HeaderMap, now: SystemTime) -> Result<Self> {
        let lease_id = lease_id_from_headers(headers)?;
        Ok(Self {
            headers,
            lease_id,
            now,
            guard: None,
        })
    }

    /// The same, judged by `guard` too.
    pub(super) fn guarded(self, guard: Option<Guard<'a>>) -> Self {
        Self { guard, ..self }
    }

    /// The first step of the gate alone, for an operation no condition applies to: the lease
    /// of `current` (available when there is none) allows `access` with the request's lease
    /// id. The lease the record keeps.
    pub(super) fn lease(
        self,
        scope: Scope,
        access: Access,
        current: Option<&Record>,
    ) -> Result<Lease> {
        let (lease_id, now) = (self.lease_id, self.now);
        Ok(match current {
            Some(record) => record.lease.authorize(scope, access, lease_id, now)?,
            None => Lease::Available.authorize(scope, access, lease_id, now)?,
        })
    }

    /// Lets the request through to `current` (`None`: the record does not exist, its lease is
    /// available and it has no validators) when:
    /// 1. the lease allows `access` with the request's lease id: a container's record for
    ///    [`precondition::Operation::Container`], a blob's otherwise; then
    /// 2. for a write of a blob, no legal hold nor retention policy protects it, its own
    ///    ([`crate::immutability`]) nor its container's ([`crate::container_protection`]);
    ///    then
    /// 3. the conditional headers hold against the record's validators, as the dialect
    ///    evaluates them for `conditions`, and a blob's `x-ms-if-tags` against its tags.
    ///
    /// A failure is the first step's error code (a lease error comes before a failed
    /// condition).
    pub(super) fn gate(
        self,
        conditions: precondition::Operation,
        access: Access,
        current: Option<&Record>,
    ) -> Result<Passed> {
        let scope = match conditions {
            precondition::Operation::Container => Scope::Container,
            _ => Scope::Blob,
        };
        let lease = self.lease(scope, access, current)?;
        // A blob under a legal hold or a retention policy is changed or deleted by no one.
        if let (Scope::Blob, Access::Write, Some(record)) = (scope, access, current) {
            let now = crate::record::unix_seconds(self.now);
            let refused = crate::immutability::refusal(record.legal_hold, record.immutability, now)
                .or_else(|| {
                    let guard = self.guard?;
                    guard
                        .protection
                        .refusal(record.protected_as(), guard.change, now)
                });
            if let Some(code) = refused {
                return Err(code.into());
            }
        }
        let validators = current.map(Record::validators);
        let outcome = precondition::evaluate(conditions, self.headers, validators.as_ref())?;
        if scope == Scope::Blob {
            crate::tags::gate(self.headers, current.map(|r| &r.tags))?;
        }
        Ok(Passed { lease, outcome })
    }

    /// [`gate`](Self::gate) for a write that replaces the blob under `key` whole (Put Blob,
    /// Put Block List), over `current` as the blob it replaces (none where only its name is
    /// held): the lease the new blob keeps.
    pub(super) fn replace(self, key: &Key, current: Option<&Record>) -> Result<Lease> {
        let visible = existing(key, current);
        Ok(self
            .gate(precondition::Operation::Put, Access::Write, visible)?
            .lease)
    }
}

/// The record of a blob that exists: one with blocks staged and never committed is none yet,
/// nor is a deleted snapshot kept for its retention.
pub(super) fn committed(record: Option<std::sync::Arc<Record>>) -> Option<std::sync::Arc<Record>> {
    record.filter(|r| r.content.is_some() && r.deleted.is_none())
}

/// The record under `key` if what it describes exists: a blob record with staged blocks and
/// no content is a blob that does not exist yet, and a deleted one kept is gone.
pub(super) fn existing<'r>(key: &Key, record: Option<&'r Record>) -> Option<&'r Record> {
    record
        .filter(|r| matches!(key, Key::Container(_)) || r.content.is_some() && r.deleted.is_none())
}
