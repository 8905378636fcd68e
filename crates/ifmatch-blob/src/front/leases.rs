//! Lease Blob and Lease Container.

use super::call::Call;
use super::failure::Answered;
use super::state::Front;
use crate::error_code::ErrorCode;
use crate::lease::{LeaseAction, LeaseId};
use crate::precondition;
use http::StatusCode;
use http::header::HeaderMap;

use super::answers::{answer, validator_headers};
use super::swap::Step;
use crate::record::Record;
use crate::store::{Key, Objects, Records};
use ifmatch_azure::Env;

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Lease Blob and Lease Container: one transition of the lease state machine, committed with
    /// a compare-and-swap. The record's ETag and Last-Modified do not change.
    pub(super) async fn lease(&self, call: Call<'_>) -> Answered<O> {
        let Call {
            key, headers, now, ..
        } = call;
        let action =
            LeaseAction::from_headers(headers, || LeaseId::from_uuid(self.env.random_uuid()))?;
        let (operation, missing) = match key {
            Key::Container(_) => (
                precondition::Operation::Container,
                ErrorCode::ContainerNotFound,
            ),
            Key::Blob(..) => (precondition::Operation::Write, ErrorCode::BlobNotFound),
        };
        let mut status = StatusCode::OK;
        let mut lease_headers = HeaderMap::new();
        let swapped = self
            .swap_existing(key, headers, (operation, missing), |current| {
                precondition::evaluate(operation, headers, Some(&current.validators()))?;
                if matches!(key, Key::Blob(..)) {
                    crate::tags::gate(headers, Some(&current.tags))?;
                }
                let transition = current.lease.apply(&action, now)?;
                (status, lease_headers) = (transition.status, transition.headers());
                let record = Record {
                    lease: transition.lease,
                    ..current.clone()
                };
                Ok(Step::update(record, current))
            })
            .await?;
        let mut out = validator_headers(swapped.written.as_ref().expect("a lease writes"));
        out.extend(lease_headers);
        Ok(answer(status, out))
    }
}
