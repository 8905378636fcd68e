//! Admission: which account, container and blob a request addresses, what it asks, and
//! whether its credentials (or the container's public access) let it.

use std::time::SystemTime;

use super::failure::{Failure, Result};
use super::state::Front;
use crate::auth;
use crate::auth::Credential;
use crate::error_code::ErrorCode;
use crate::operation::{Operation, Target};
use crate::record::PublicAccess;
use crate::store::{Key, Objects, Records};
use ifmatch_azure::OperationName;
use ifmatch_azure::auth::Signed;
use ifmatch_azure::host;
use ifmatch_azure::{Client, Env};

/// The hosts a reverse proxy in front says the client named (`X-Forwarded-Host`, each proxy's
/// in turn), which reach this server as its own.
pub(super) fn forwarded_hosts(parts: &http::request::Parts) -> impl Iterator<Item = &str> {
    (parts.headers.get_all("x-forwarded-host").iter())
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .filter(|host| !host.is_empty())
}

/// The account's root URL as the request from `client` named it (List Containers names it).
pub(super) fn endpoint(
    parts: &http::request::Parts,
    client: Client,
    account: &ifmatch_azure::Account,
    style: ifmatch_azure::Style,
) -> String {
    format!("{}/", style.root(parts, client.https, "", account))
}

/// A request its credentials admit: what it addresses, and the keys of its records.
pub(super) struct Admitted<'a> {
    pub(super) target: Target,
    pub(super) account: &'a ifmatch_azure::Account,
    /// How the request named the account (for the root URL List Containers names).
    pub(super) style: ifmatch_azure::Style,
    /// Its container's record, under the name the container is stored by.
    pub(super) container: Key,
    pub(super) blob: Key,
    /// What its credentials are (a copy's source may be read with them).
    pub(super) credential: Credential,
}

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Reads what a request addresses (its account, container and blob, its operation) and
    /// admits it if its credentials allow that operation there.
    pub(super) async fn admit(
        &self,
        parts: &http::request::Parts,
        client: Client,
        now: SystemTime,
        operation: &mut Option<OperationName>,
    ) -> Result<Admitted<'_>> {
        let (method, uri, headers) = (&parts.method, &parts.uri, &parts.headers);
        let (account, path, style) = self.accounts.locate("blob", host(parts), uri.path())?;
        let target = Target::parse(method, path, uri.query())?;
        *operation = Some(OperationName(target.operation.name()));
        let signed = Signed::of(parts, client, &target.container, &target.blob);
        let delegator = self.delegator(account, uri).await?;
        let credential = auth::authenticate(account, signed, &delegator, now)?;
        let stored = self.accounts.stored(account, &target.container);
        let blob = Key::Blob(stored.clone(), target.record_name());
        let container = Key::Container(stored);
        // Anonymous, admitted by the server's choice or the container's public access; or else
        // by its credentials (asked only then: a refusal's message is written when made).
        let public = credential == Credential::Anonymous
            && (self.anonymous || self.public(&container, &target.operation).await?);
        if !public {
            auth::authorize(
                &credential,
                &target.operation,
                &target.container,
                &target.blob,
            )?;
        }
        // After the credentials (a stranger learns nothing of what is served), before any
        // record is read: a condition the operation would not evaluate is never dropped.
        if let Some(name) = crate::precondition::unserved(&target.operation, headers) {
            return Err(Failure::with_detail(
                ErrorCode::UnsupportedHeader,
                format!(
                    "{name} is not supported by this server on {}; the request was not applied. \
                     Header: {name}",
                    target.operation.name()
                ),
            ));
        }
        Ok(Admitted {
            target,
            account,
            style,
            container,
            blob,
            credential,
        })
    }

    /// Whether a container's public access level lets anyone do `operation`: read blobs at
    /// `blob` level, and also list them and read the container's properties at `container`.
    pub(super) async fn public(&self, container: &Key, operation: &Operation) -> Result<bool> {
        let level = match self.records.get(container).await? {
            Some(record) => record.public_access,
            None => None,
        };
        Ok(matches!(
            (level, operation),
            (Some(_), Operation::GetBlob)
                | (
                    Some(PublicAccess::Container),
                    Operation::ListBlobs(_) | Operation::GetContainerProperties
                )
        ))
    }
}
