//! Provisioned throughput: offers, a container's own or a database's shared by its containers,
//! each one entity of the table `#offers` (partition `""`, row the offer's id, which its
//! resource's link names). Given when a container or database is made
//! (`x-ms-offer-throughput`, or `x-ms-cosmos-offer-autopilot-settings` for autoscale), read and
//! queried (`/offers`: the SDKs' `get_throughput` / `readOffer` query it by the resource's
//! `_self`) and replaced (`replace_throughput`) as Azure's are, within Azure's limits. A
//! container made with none in a database with none gets Azure's least, 400 RU/s.
//! [`crate::throughput`] holds a container's requests to it when asked to.

use ifmatch_table::{Change, Entity, Expected, Tables};
use serde_json::{Map, Value as Json, json};

use super::answers::{Answered, Done};
use super::{Asked, Front};
use crate::document::{self, json_of};
use crate::failure::{Failure, bad_request, not_found};
use crate::throughput::Budgets;

const OFFERS: &str = "#offers";

/// The least manual throughput Azure provisions, RU/s, and its step.
pub(crate) const MIN_MANUAL: u64 = 400;

/// The least autoscale maximum Azure takes, RU/s, and its step.
pub(crate) const MIN_AUTOSCALE: u64 = 1000;

/// The most throughput an offer takes here, RU/s (Azure's default limit without a support
/// request).
pub(crate) const MAX_THROUGHPUT: u64 = 1_000_000;

/// What an offer provisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Throughput {
    /// A fixed number of RU/s.
    Manual(u64),
    /// Scaled between a tenth of the maximum and the maximum, as used.
    Autoscale(u64),
}

impl Throughput {
    /// The most RU/s it serves in a second.
    pub(crate) fn most(self) -> u64 {
        match self {
            Self::Manual(n) | Self::Autoscale(n) => n,
        }
    }

    /// An offer's `content` provisioning this, the most ever provisioned to it being `ever`.
    fn content(self, ever: u64) -> Json {
        let minimum = json!({ "maxThroughputEverProvisioned": ever });
        match self {
            Self::Manual(n) => json!({
                "offerThroughput": n,
                "offerIsRUPerMinuteThroughputEnabled": false,
                "offerMinimumThroughputParameters": minimum,
            }),
            Self::Autoscale(max) => json!({
                "offerThroughput": max / 10,
                "offerIsRUPerMinuteThroughputEnabled": false,
                "offerAutopilotSettings": { "maxThroughput": max },
                "offerMinimumThroughputParameters": minimum,
            }),
        }
    }

    /// Whether this may replace an offer that was once provisioned `ever` RU/s: Azure keeps a
    /// resource at no less than a hundredth of the most it ever had (rounded up to 100 RU/s),
    /// an autoscale maximum at no less than a tenth (rounded up to 1,000).
    fn within_minimum(self, ever: u64) -> Result<Self, Failure> {
        let (least, unit) = match self {
            Self::Manual(_) => (MIN_MANUAL.max(ever.div_ceil(100)), 100),
            Self::Autoscale(_) => (MIN_AUTOSCALE.max(ever.div_ceil(10)), 1000),
        };
        let least = least.next_multiple_of(unit);
        match self.most() < least {
            true => Err(bad_request(format!(
                "The throughput is {}: this resource was once provisioned {ever} RU/s, so it is \
                 provisioned at least {least}.",
                self.most()
            ))),
            false => Ok(self),
        }
    }

    /// What an offer's `content` provisions, within Azure's limits.
    fn of_content(content: &Json) -> Result<Self, Failure> {
        match content.get("offerAutopilotSettings") {
            Some(settings) => autoscale(settings.get("maxThroughput")),
            None => manual(content.get("offerThroughput")),
        }
    }
}

fn manual(value: Option<&Json>) -> Result<Throughput, Failure> {
    within(value, "offer throughput", MIN_MANUAL, 100).map(Throughput::Manual)
}

fn autoscale(value: Option<&Json>) -> Result<Throughput, Failure> {
    within(value, "autoscale maximum throughput", MIN_AUTOSCALE, 1000).map(Throughput::Autoscale)
}

/// `value` when it is a multiple of `step` RU/s from `least` to Azure's most.
fn within(value: Option<&Json>, what: &str, least: u64, step: u64) -> Result<u64, Failure> {
    let n = value.and_then(Json::as_u64).unwrap_or(0);
    match (least..=MAX_THROUGHPUT).contains(&n) && n.is_multiple_of(step) {
        true => Ok(n),
        false => Err(bad_request(format!(
            "The {what} is {}: it is a multiple of {step} RU/s from {least} to {MAX_THROUGHPUT}.",
            value.map_or("missing".to_owned(), Json::to_string)
        ))),
    }
}

/// The throughput a request to make a database or container asks for, if any.
pub(super) fn asked_throughput(asked: &Asked<'_>) -> Result<Option<Throughput>, Failure> {
    let fixed = asked.header("x-ms-offer-throughput");
    let scaled = asked.header("x-ms-cosmos-offer-autopilot-settings");
    match (fixed, scaled) {
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(bad_request(
            "x-ms-offer-throughput and x-ms-cosmos-offer-autopilot-settings are not taken together: \
             a throughput is manual or autoscale.",
        )),
        (Some(n), None) => {
            let n: Json = n.trim().parse::<u64>().map_or(Json::Null, Json::from);
            manual(Some(&n)).map(Some)
        }
        (None, Some(settings)) => {
            let settings: Json = serde_json::from_str(settings).map_err(|_| {
                bad_request("x-ms-cosmos-offer-autopilot-settings is JSON: {\"maxThroughput\": N}.")
            })?;
            autoscale(settings.get("maxThroughput")).map(Some)
        }
    }
}

/// The id of the offer of the resource `link` (`dbs/{db}` or `dbs/{db}/colls/{coll}`): a
/// digest of it, in letters, digits, `-` and `_` (a path segment, as Azure's are).
pub(crate) fn offer_id(link: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(super::digest(&["offer", link]))
}

impl<T: Tables> Front<'_, T> {
    /// Provisions `throughput` to the resource `link`, whose resource id is `rid`.
    pub(super) async fn provision(
        &self,
        link: &str,
        rid: &str,
        throughput: Throughput,
    ) -> Result<(), Failure> {
        let id = offer_id(link);
        let offer = json!({
            "id": id,
            "resource": format!("{link}/"),
            "offerResourceId": rid,
            "offerType": "Invalid",
            "offerVersion": "V2",
            "content": throughput.content(throughput.most()),
        });
        let Json::Object(offer) = offer else {
            unreachable!("an object")
        };
        self.write_offer(&id, None, &offer).await.map(drop)
    }

    async fn write_offer(
        &self,
        id: &str,
        before: Option<&Entity>,
        offer: &Map<String, Json>,
    ) -> Result<Entity, Failure> {
        let entity = self.entity("", id, before.map(|b| b.timestamp), offer);
        let change = Change {
            key: (String::new(), id.to_owned()),
            expected: before.map_or(Expected::Anything, |b| Expected::Version(b.timestamp)),
            write: Some(entity.clone()),
        };
        self.tables
            .create_table(OFFERS)
            .await
            .map_err(crate::failure::backend)?;
        self.commit_resource(OFFERS, &[change], crate::failure::conflict)
            .await?;
        Ok(entity)
    }

    /// Removes the offer of the resource `link`, if it has one.
    pub(super) async fn unprovision(&self, link: &str) -> Result<(), Failure> {
        let change = Change {
            key: (String::new(), offer_id(link)),
            expected: Expected::Anything,
            write: None,
        };
        match self.commit(OFFERS, &[change]).await {
            Err(super::commit::Committed::Failed(failure)) => Err(failure),
            _ => Ok(()),
        }
    }

    /// What the resource `link` is provisioned, if it has an offer of its own.
    pub(crate) async fn throughput_of(&self, link: &str) -> Result<Option<Throughput>, Failure> {
        match self.get(OFFERS, "", &offer_id(link)).await? {
            Some(entity) => {
                let offer = json_of(&entity);
                Ok(Throughput::of_content(&offer["content"]).ok())
            }
            None => Ok(None),
        }
    }

    /// The offer whose budget a request to the documents of `db`/`coll` draws on (the
    /// container's own, else its database's), as `budgets` knows it or read again.
    pub(crate) async fn drawn_on(
        &self,
        budgets: &Budgets,
        (db, coll): (&str, &str),
        now: f64,
    ) -> Result<Option<String>, Failure> {
        let account = self.account.name();
        let container = format!("{account}/dbs/{db}/colls/{coll}");
        if let Some(route) = budgets.route(&container, now) {
            return Ok(route);
        }
        let mut offer = None;
        for link in [format!("dbs/{db}/colls/{coll}"), format!("dbs/{db}")] {
            if let Some(throughput) = self.throughput_of(&link).await? {
                offer = Some((format!("{account}/{link}"), throughput.most() as f64));
                break;
            }
        }
        let key = offer.as_ref().map(|(key, _)| key.clone());
        budgets.set_route(&container, offer, now);
        Ok(key)
    }

    /// Read Offers, and Query Offers (a `POST` of a query).
    pub(super) async fn offers(&self, asked: &Asked<'_>) -> Answered {
        let all = self.scan_all(OFFERS, Some("")).await?;
        let mut offers: Vec<Json> = all.iter().map(offer_json).collect();
        if crate::document::is_query(asked.headers) {
            let body: Json = serde_json::from_slice(asked.body).map_err(|_| {
                bad_request("A query's body is JSON: {\"query\": ..., \"parameters\": [...]}.")
            })?;
            let text = body["query"].as_str().unwrap_or_default();
            let parameters = body["parameters"].as_array().cloned().unwrap_or_default();
            let query = crate::sql::Query::parse(text, parameters)
                .map_err(|error| bad_request(format!("Query: {}", error.message)))?;
            let meter = crate::sql::Meter::per_document();
            offers = offers
                .iter()
                .flat_map(|o| query.results(o, &meter))
                .collect();
        }
        Ok(Done::feed("", "Offers", offers, None))
    }

    pub(super) async fn offer(&self, id: &str) -> Answered {
        let entity = self.get(OFFERS, "", id).await?.ok_or_else(not_found)?;
        Ok(Done::ok(offer_json(&entity), entity.timestamp))
    }

    /// Replace Offer: its content (the throughput) changes, within Azure's limits; what it is
    /// the offer of does not.
    pub(super) async fn replace_offer(&self, id: &str, asked: &Asked<'_>) -> Answered {
        let before = self.get(OFFERS, "", id).await?.ok_or_else(not_found)?;
        let given = document::resource(asked.body)?;
        let content = given.get("content").cloned().unwrap_or(Json::Null);
        let mut offer = json_of(&before);
        let was = &offer["content"];
        let ever = (was["offerMinimumThroughputParameters"]["maxThroughputEverProvisioned"])
            .as_u64()
            .or_else(|| Throughput::of_content(was).ok().map(Throughput::most))
            .unwrap_or(MIN_MANUAL);
        let throughput = Throughput::of_content(&content)?.within_minimum(ever)?;
        let ever = ever.max(throughput.most());
        offer.insert("content".into(), throughput.content(ever));
        let after = self.write_offer(id, Some(&before), &offer).await?;
        Ok(Done::ok(offer_json(&after), after.timestamp))
    }
}

fn offer_json(entity: &Entity) -> Json {
    let id = &entity.row_key;
    let link = format!("offers/{id}");
    Json::Object(document::with_system(
        json_of(entity),
        &link,
        id,
        entity.timestamp,
    ))
}
