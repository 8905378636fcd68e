//! Get and Set Blob Service Properties: an account's `<StorageServiceProperties>`, kept whole
//! in a record of their own ([`crate::settings::service_key`]) as Set Service Properties merges
//! them (an element a request leaves out keeps its setting). What the front reads of them is
//! [`crate::settings`]'s. And Get User Delegation Key ([`ifmatch_azure::delegation`]).

use std::time::Duration;

use http::StatusCode;
use http::header::HeaderMap;
use ifmatch_azure::Env;

use super::answers::{answer, xml_answer};
use super::failure::Answered;
use super::failure::Failure;
use super::state::Front;
use super::swap::Step;
use crate::body::Incoming;
use crate::delegators::{self, Delegator};
use crate::error_code::ErrorCode;
use crate::record::Record;
use crate::settings::{self, Settings};
use crate::store::{Key, Objects, PutMode, Records};

/// The largest Set Blob Service Properties body read (Azure's CORS rules, logging and metrics
/// settings are a few KiB).
const MAX_PROPERTIES_BODY: usize = 64 << 10;

/// What Get Blob Service Properties answers for an account that never set any.
const DEFAULT: &str = "<?xml version=\"1.0\" encoding=\"utf-8\"?><StorageServiceProperties>\
    <IsVersioningEnabled>false</IsVersioningEnabled></StorageServiceProperties>";

/// How long an instance trusts what it read of an account's settings: a change made through
/// another instance of a fleet holds on this one within this time (one made through this one,
/// at once).
const TRUSTED: Duration = Duration::from_secs(1);

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Get User Delegation Key: `<KeyInfo>`'s `<Start>` (optional) and `<Expiry>`, for the
    /// principal of the request's bearer token (the only credential it takes).
    pub(super) async fn user_delegation_key(
        &self,
        account: &ifmatch_azure::Account,
        credential: &crate::auth::Credential,
        body: impl Incoming,
        headers: &HeaderMap,
    ) -> Answered<O> {
        let crate::auth::Credential::Token(access) = credential else {
            return Err(Failure::with_detail(
                ErrorCode::AuthenticationFailed,
                "Get User Delegation Key takes a bearer token only.",
            ));
        };
        let xml = crate::body::read_at_most(body, 4 << 10)
            .await
            .ok_or(ErrorCode::InvalidXmlDocument)?;
        let text = std::str::from_utf8(&xml).map_err(|_| ErrorCode::InvalidXmlDocument)?;
        let (start, expiry) = key_info(text).ok_or_else(|| {
            Failure::with_detail(
                ErrorCode::InvalidXmlDocument,
                "The body is <KeyInfo> with an <Expiry> (and an optional <Start>).",
            )
        })?;
        let version = (headers.get(ifmatch_azure::MS_VERSION))
            .and_then(|v| v.to_str().ok())
            .unwrap_or("2025-11-05");
        let now = self.env.now();
        let key = ifmatch_azure::delegation::issue(
            account,
            access,
            (start.as_deref(), &expiry),
            version,
            now,
        )?;
        if !access.carried.is_empty() {
            let until = ifmatch_azure::auth::iso8601(&key.expiry).unwrap_or_default();
            self.keep_delegator(account, access, until).await?;
        }
        Ok(xml_answer(HeaderMap::new(), key.xml()))
    }

    /// Keeps the roles `access`'s development token carried for the user delegation SAS its
    /// principal signs with a key that holds until `until`, for every instance to read.
    async fn keep_delegator(
        &self,
        account: &ifmatch_azure::Account,
        access: &ifmatch_azure::identity::Access,
        until: i64,
    ) -> super::failure::Result<()> {
        let key = self.delegators_key(account);
        let now = self.env.now();
        let delegator = Delegator {
            roles: access.carried.clone(),
            until,
        };
        let seconds = ifmatch_azure::auth::unix(now);
        self.swap(&key, &HeaderMap::new(), |current| {
            let kept = current.map(|r| &r.delegators).cloned().unwrap_or_default();
            let Some(delegators) =
                delegators::keeping(&kept, &access.principal, delegator.clone(), seconds)
            else {
                return Ok(Step::Keep);
            };
            let etag = ifmatch_core::strong_etag(format!("{delegators:?}").as_bytes());
            Ok(match current {
                Some(current) => {
                    let mut record = current.clone();
                    record.delegators = delegators;
                    record.etag = etag;
                    Step::update(record, current)
                }
                None => {
                    let mut record = Record::container(etag, now);
                    record.delegators = delegators;
                    Step::Put(Box::new(record), PutMode::Create)
                }
            })
        })
        .await?;
        Ok(())
    }

    /// The roles the development principal a user delegation SAS in `uri` names carried when
    /// it got its key, if it is such a SAS (none otherwise).
    ///
    /// The delegators' record is read, in a future boxed apart, only for such a SAS: every
    /// request asks, and the future of each holds this one's.
    pub(super) async fn delegator(
        &self,
        account: &ifmatch_azure::Account,
        uri: &http::Uri,
    ) -> super::failure::Result<Vec<ifmatch_azure::identity::Assignment>> {
        let principal = (uri.query().into_iter())
            .flat_map(|query| form_urlencoded::parse(query.as_bytes()))
            .find_map(|(name, value)| (name == "skoid").then_some(value));
        let Some(principal) = principal else {
            return Ok(Vec::new());
        };
        let record = Box::pin(self.records.get(&self.delegators_key(account))).await?;
        let now = ifmatch_azure::auth::unix(self.env.now());
        Ok(record.map_or_else(Vec::new, |r| {
            delegators::roles_of(&r.delegators, &principal, now)
        }))
    }

    /// The key of `account`'s delegators.
    fn delegators_key(&self, account: &ifmatch_azure::Account) -> Key {
        Key::Container(self.accounts.stored(account, delegators::DELEGATORS))
    }

    /// Get Blob Service Properties.
    pub(super) async fn service_properties(&self, account: &ifmatch_azure::Account) -> Answered<O> {
        let key = self.service_key(account);
        let record = self.records.get(&key).await?;
        let xml = record.and_then(|r| r.service.clone());
        Ok(xml_answer(
            HeaderMap::new(),
            xml.unwrap_or_else(|| DEFAULT.to_owned()),
        ))
    }

    /// Set Blob Service Properties: 202.
    pub(super) async fn set_service_properties(
        &self,
        account: &ifmatch_azure::Account,
        body: impl Incoming,
        headers: &HeaderMap,
    ) -> Answered<O> {
        let xml = crate::body::read_at_most(body, MAX_PROPERTIES_BODY)
            .await
            .ok_or_else(|| {
                Failure::too_large("A Set Blob Service Properties body is at most 64 KiB.")
            })?;
        let text = std::str::from_utf8(&xml).map_err(|_| ErrorCode::InvalidXmlDocument)?;
        let key = self.service_key(account);
        let now = self.env.now();
        self.swap(&key, headers, |current| {
            let old = current.and_then(|r| r.service.as_deref());
            let merged = ifmatch_azure::service_properties::merge(old, text)
                .map_err(|why| Failure::with_detail(ErrorCode::InvalidXmlDocument, why))?;
            Settings::of(&merged)
                .map_err(|why| Failure::with_detail(ErrorCode::InvalidXmlDocument, why))?;
            let etag = ifmatch_core::strong_etag(merged.as_bytes());
            Ok(match current {
                Some(current) => {
                    let mut record = current.clone();
                    record.service = Some(merged);
                    record.etag = etag;
                    Step::update(record, current)
                }
                None => {
                    let mut record = Record::container(etag, now);
                    record.service = Some(merged);
                    Step::Put(Box::new(record), PutMode::Create)
                }
            })
        })
        .await?;
        if let Key::Container(name) = &key {
            self.settings.forget(name);
        }
        // A feed's container is there to read from the moment it is kept, as in Azure.
        let merged = self.settings(&key).await?;
        if merged.change_feed {
            let feed = self.accounts.stored(account, crate::change_feed::FEED);
            self.create_own(&feed).await?;
        }
        Ok(answer(StatusCode::ACCEPTED, HeaderMap::new()))
    }

    /// The key of `account`'s Blob service properties.
    fn service_key(&self, account: &ifmatch_azure::Account) -> Key {
        settings::service_key(&self.accounts.stored(account, settings::SERVICE))
    }

    /// What the account that owns the blob or container `key` asks of the front.
    pub(super) async fn settings(&self, key: &Key) -> super::failure::Result<Settings> {
        let service = settings::service_key(key.container());
        let Key::Container(name) = &service else {
            unreachable!("a service record is a container's")
        };
        let now = self.env.now();
        let known = self
            .settings
            .0
            .lock()
            .expect("not poisoned")
            .get(name)
            .copied();
        if let Some((settings, read)) = known
            && now.duration_since(read).is_ok_and(|age| age < TRUSTED)
        {
            return Ok(settings);
        }
        let record = self.records.get(&service).await?;
        let xml = record.as_ref().and_then(|r| r.service.as_deref());
        // Kept only once they were read whole (Set refuses what does not read).
        let settings = xml
            .map_or(Ok(Settings::default()), Settings::of)
            .unwrap_or_default();
        (self.settings.0.lock().expect("not poisoned")).insert(name.clone(), (settings, now));
        Ok(settings)
    }
}

/// `<KeyInfo>`'s `<Start>` and `<Expiry>` texts, if it is one with an `<Expiry>`.
fn key_info(xml: &str) -> Option<(Option<String>, String)> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let (mut path, mut start, mut expiry) = (Vec::new(), None, None);
    loop {
        match reader.read_event().ok()? {
            Event::Start(tag) => path.push(tag.name().as_ref().to_vec()),
            Event::End(_) => {
                path.pop();
            }
            Event::Text(text) => {
                let text = text.decode().ok()?.trim().to_owned();
                match path.as_slice() {
                    [root, name]
                        if root.as_slice() == b"KeyInfo" && name.as_slice() == b"Start" =>
                    {
                        start = Some(text)
                    }
                    [root, name]
                        if root.as_slice() == b"KeyInfo" && name.as_slice() == b"Expiry" =>
                    {
                        expiry = Some(text)
                    }
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Some((start, expiry?))
}
