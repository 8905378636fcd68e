//! Set and Delete Immutability Policy, Set Legal Hold ([`crate::immutability`]), and what a
//! blob's answers say of them.
//!
//! Each is a compare-and-swap of the blob's record (its ETag and Last-Modified unchanged), then
//! a bump of its container's generation, so that a container delete that looked for protected
//! blobs before this one was protected fails its own compare-and-swap and looks again: no
//! container delete takes a protected blob with it.

use http::StatusCode;
use http::header::{HeaderMap, HeaderValue};
use ifmatch_azure::Env;
use ifmatch_azure::swap::Attempts;
use ifmatch_core::date::date_header_value;

use super::answers::answer;
use super::call::Call;
use super::failure::Answered;
use super::failure::Result;
use super::state::Front;
use super::swap::Step;
use crate::container_protection::Protection;
use crate::error_code::ErrorCode;
use crate::immutability::{self, Policy};
use crate::lease::{Access, Scope};
use crate::precondition;
use crate::record::Record;
use crate::store::{Key, Objects, PutMode, Records};

/// What to change of a blob's protection.
enum Change {
    Policy(Policy),
    NoPolicy,
    Hold(bool),
}

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Set Immutability Policy: 200 with the policy's date and mode.
    pub(super) async fn set_immutability_policy(&self, call: Call<'_>) -> Answered<O> {
        let now = crate::record::unix_seconds(call.now);
        let policy = Policy::from_headers(call.headers, now)?;
        self.protect(call, Change::Policy(policy)).await
    }

    /// Delete Immutability Policy: 200; a locked policy that is still in force stays (409).
    pub(super) async fn delete_immutability_policy(&self, call: Call<'_>) -> Answered<O> {
        self.protect(call, Change::NoPolicy).await
    }

    /// Set Legal Hold: 200 with `x-ms-legal-hold`.
    pub(super) async fn set_legal_hold(&self, call: Call<'_>) -> Answered<O> {
        let hold = immutability::legal_hold(call.headers)?;
        self.protect(call, Change::Hold(hold)).await
    }

    async fn protect(&self, call: Call<'_>, change: Change) -> Answered<O> {
        let Call {
            key, headers, now, ..
        } = call;
        let ask = call.ask()?;
        let seconds = crate::record::unix_seconds(now);
        let missing = (precondition::Operation::Write, ErrorCode::BlobNotFound);
        let swapped = self
            .swap_existing(key, headers, missing, |current| {
                ask.lease(Scope::Blob, Access::Read, Some(current))?;
                precondition::evaluate(
                    precondition::Operation::Write,
                    headers,
                    Some(&current.validators()),
                )?;
                let mut record = current.clone();
                match change {
                    Change::Policy(policy) => {
                        if !policy.may_replace(current.immutability) {
                            return Err(ErrorCode::BlobImmutableDueToPolicy.into());
                        }
                        record.immutability = Some(policy);
                    }
                    Change::NoPolicy => {
                        let locked = current
                            .immutability
                            .filter(|p| p.locked && p.until > seconds);
                        if locked.is_some() {
                            return Err(ErrorCode::BlobImmutableDueToPolicy.into());
                        }
                        record.immutability = None;
                    }
                    Change::Hold(hold) => record.legal_hold = hold,
                }
                Ok(Step::update(record, current))
            })
            .await?;
        self.touch_container(key.container()).await?;
        let mut out = HeaderMap::new();
        if let Some(record) = &swapped.written {
            match change {
                Change::Hold(_) => insert_hold(record, &mut out),
                Change::Policy(_) | Change::NoPolicy => insert_policy(record, &mut out),
            }
        }
        Ok(answer(StatusCode::OK, out))
    }

    /// Bumps the generation of the container `container` (stored name): see the module's note.
    async fn touch_container(&self, container: &str) -> Result<()> {
        let key = Key::Container(container.to_owned());
        let mut attempts = Attempts::default();
        while attempts.another() {
            let current = self.container_record(container).await?;
            let mut touched = Record::clone(&current);
            touched.generation = current.generation + 1;
            let mode = PutMode::Update(current.generation);
            match self.records.put(&key, &touched, mode).await {
                Ok(()) => return Ok(()),
                Err(e) if self.lost_race(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Err(ErrorCode::ServerBusy.into())
    }

    /// Why the stored container `container`, with its own `protection`, may not be deleted,
    /// if it may not: that protection (a locked policy, a hold), or a blob that its own or the
    /// container's protection keeps.
    pub(super) async fn protected_blob(
        &self,
        container: &str,
        protection: Option<&Protection>,
    ) -> Result<Option<ErrorCode>> {
        if let Some(code) = protection.and_then(Protection::container_refusal) {
            return Ok(Some(code));
        }
        let now = crate::record::unix_seconds(self.env.now());
        let mut pages = super::pages::BlobPages::new(container);
        while let Some(page) = pages.next(&self.records).await? {
            let refused = page.iter().find_map(|(_, record)| {
                immutability::refusal(record.legal_hold, record.immutability, now).or_else(|| {
                    let delete = crate::container_protection::Change::Delete;
                    protection?.refusal(record.protected_as(), delete, now)
                })
            });
            if refused.is_some() {
                return Ok(refused);
            }
        }
        Ok(None)
    }
}

/// A blob's protection on its answers: its policy's date and mode, its legal hold.
pub(super) fn insert_protection(record: &Record, out: &mut HeaderMap) {
    insert_policy(record, out);
    if record.legal_hold {
        insert_hold(record, out);
    }
}

fn insert_policy(record: &Record, out: &mut HeaderMap) {
    if let Some(policy) = record.immutability {
        let until = std::time::UNIX_EPOCH + std::time::Duration::from_secs(policy.until);
        out.insert(immutability::UNTIL, date_header_value(until.into()));
        out.insert(immutability::MODE, HeaderValue::from_static(policy.mode()));
    }
}

fn insert_hold(record: &Record, out: &mut HeaderMap) {
    let hold = if record.legal_hold { "true" } else { "false" };
    out.insert(immutability::LEGAL_HOLD, HeaderValue::from_static(hold));
}
