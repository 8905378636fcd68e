//! The change feed, as Azure lays it out and its SDKs read it: the account's read-only
//! container `$blobchangefeed`, one segment an hour (`idx/segments/YYYY/MM/DD/HH00/meta.json`
//! naming its shard `log/00/YYYY/MM/DD/HH00/`), and in the shard chunks, Avro object container
//! files ([`crate::avro`]) of change records: `BlobCreated`, `BlobDeleted`,
//! `BlobPropertiesUpdated`, `BlobSnapshotCreated`.
//!
//! A [`Change`] is written in the record the change writes, in the same compare-and-swap (a
//! deleted blob's record stays, empty, until its change is published); the front's publisher
//! moves changes from records to chunks (`Front::publish_changes`).

use ifmatch_azure::iso8601::TICKS_PER_SECOND;
use std::time::SystemTime;
use time::OffsetDateTime;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;

pub use crate::change::{Change, Kind, id, instant};
use crate::record::Record;

/// The container the feed is read from.
pub const FEED: &str = "$blobchangefeed";

/// The account's own container (beside its containers, as `$service` is) of what the
/// publisher needs: a marker for each change not yet published, and its head.
pub const CHANGES: &str = "$changes";

/// Whether the stored container `container` is an account's [`CHANGES`]: records of the
/// publisher's own, no bytes.
pub fn holds_markers(container: &str) -> bool {
    container.rsplit('~').next() == Some(CHANGES)
}

/// Whether `record` is a blob's deletion that the feed has not published yet: no content, no
/// blocks, its changes held (`Front::publish_changes` removes it).
pub fn is_unpublished_deletion(record: &Record) -> bool {
    record.content.is_none()
        && record.staging.is_none()
        && record.uncommitted.is_empty()
        && !record.feed.is_empty()
}

/// Whether the record describes a blob that is there (not an empty record of staged blocks,
/// of a deletion not yet published, nor a deleted blob kept).
fn there(record: Option<&Record>) -> Option<&Record> {
    record.filter(|r| r.content.is_some() && r.deleted.is_none())
}

/// What the feed says of a write that replaced `previous` by `written` (`None`: the record
/// removed), and by which operation; `None` when the feed says nothing (a lease, tags, blocks
/// staged). The operation is read off the records, so that no write path names it.
pub fn kind_of(
    previous: Option<&Record>,
    written: Option<&Record>,
) -> Option<(Kind, &'static str)> {
    let (previous, written) = (there(previous), there(written));
    let Some(written) = written else {
        return previous.map(|_| (Kind::BlobDeleted, "DeleteBlob"));
    };
    let content = written.content.as_ref()?;
    let bytes_changed = previous.is_none_or(|p| p.bytes_tag() != written.bytes_tag());
    if bytes_changed {
        // A copy's bytes: a new copy's, or one from another server finished in the background
        // (its status moved on).
        let copied = written.copy.is_some() && previous.map(|p| &p.copy) != Some(&written.copy);
        let api = if copied {
            "CopyBlob"
        } else if content.append.is_some() && previous.is_some() {
            "AppendBlock"
        } else if content.pages.is_some() && previous.is_some() {
            "PutPage"
        } else if !content.blocks.is_empty() {
            "PutBlockList"
        } else {
            "PutBlob"
        };
        return Some((Kind::BlobCreated, api));
    }
    let previous = previous?;
    if previous.metadata != written.metadata {
        return Some((Kind::BlobPropertiesUpdated, "SetBlobMetadata"));
    }
    let before = previous.content.as_ref()?;
    let properties_changed = before.properties != content.properties
        || before.content_type != content.content_type
        || before.len != content.len;
    properties_changed.then_some((Kind::BlobPropertiesUpdated, "SetBlobProperties"))
}

/// The change `kind` (by `api`) of the blob `container`/`blob` whose record is `record`
/// (after the change; before it, for a deletion), made at `now` (`random`, its id's random
/// part).
pub fn change(
    (kind, api): (Kind, &str),
    (container, blob): (&str, &str),
    record: &Record,
    (now, random): (SystemTime, u64),
) -> Change {
    let content = record.content.as_ref();
    Change {
        id: id(now, random),
        kind,
        api: api.to_owned(),
        time: crate::record_name::id(now),
        container: container.to_owned(),
        blob: blob.to_owned(),
        etag: record.etag.to_string(),
        content_type: (content.and_then(|c| c.content_type.clone())).unwrap_or_default(),
        len: record.len(),
        blob_type: content.map_or("BlockBlob", |c| c.blob_type()).to_owned(),
        snapshot: None,
    }
}

/// An hour's form in the feed's paths: `YYYY/MM/DD/HH00`.
const HOUR: &[BorrowedFormatItem<'_>] = format_description!("[year]/[month]/[day]/[hour]00");

/// The hour a chunk written at `now` belongs to: `YYYY/MM/DD/HH00`.
pub fn hour(now: SystemTime) -> String {
    let seconds = crate::record::unix_seconds(now) as i64;
    let at = OffsetDateTime::from_unix_timestamp(seconds).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    at.format(HOUR)
        .expect("an OffsetDateTime has every part of the form")
}

/// When an hour of [`hour`]'s form starts, in seconds since the Unix epoch.
pub fn hour_start(hour: &str) -> Option<i64> {
    ifmatch_azure::iso8601::read(hour, HOUR, 0).map(|ticks| ticks / TICKS_PER_SECOND)
}

/// The hour of a segment's path ([`segment_path`]).
pub fn segment_hour(path: &str) -> Option<&str> {
    path.strip_prefix("idx/segments/")?
        .strip_suffix("/meta.json")
}

/// The segment of `hour`: the blob naming its shards.
pub fn segment_path(hour: &str) -> String {
    format!("idx/segments/{hour}/meta.json")
}

/// The shard of `hour`'s segment (one: the feed of one server is one log).
pub fn shard_path(hour: &str) -> String {
    format!("log/00/{hour}/")
}

/// The `n`th chunk of `hour`'s shard: ten characters of file name, as the SDKs' cursors
/// take them.
pub fn chunk_path(hour: &str, n: u64) -> String {
    format!("{}{n:05}.avro", shard_path(hour))
}

/// The segment's `meta.json`, naming its shard, `status` as given.
pub fn segment_json(hour: &str, status: &str) -> String {
    let begin = hour_instant(hour);
    format!(
        "{{\"version\":0,\"begin\":\"{begin}\",\"intervalSecs\":3600,\"status\":\"{status}\",\
         \"config\":{{\"version\":0,\"configVersionEtag\":\"0x0\",\"numShards\":1,\
         \"recordsFormat\":\"avro\",\"formatSchemaVersion\":1,\"shardDistFnVersion\":1}},\
         \"chunkFilePaths\":[\"{FEED}/{}\"],\"storageDiagnostics\":{{\"version\":0}}}}",
        shard_path(hour)
    )
}

/// `meta/segments.json`: the last segment that may be read whole.
pub fn segments_json(last_consumable: &str) -> String {
    format!(
        "{{\"version\":0,\"lastConsumable\":\"{last_consumable}\",\
         \"storageDiagnostics\":{{\"version\":0}}}}"
    )
}

/// The instant an hour of [`hour`]'s form starts, as `2026-11-28T16:00:00.000Z`.
pub fn hour_instant(hour: &str) -> String {
    let part = |range: std::ops::Range<usize>| hour.get(range).unwrap_or("00");
    format!(
        "{}-{}-{}T{}:00:00.000Z",
        part(0..4),
        part(5..7),
        part(8..10),
        part(11..13)
    )
}

/// The feed's record schema (Azure's, in the fields this feed fills).
const SCHEMA: &str = r#"{"type":"record","name":"BlobChangeEvent","namespace":"com.microsoft.azure.storage.blobchangefeed","fields":[{"name":"schemaVersion","type":"int"},{"name":"topic","type":"string"},{"name":"subject","type":"string"},{"name":"eventType","type":"string"},{"name":"eventTime","type":"string"},{"name":"id","type":"string"},{"name":"data","type":{"type":"record","name":"BlobChangeEventData","fields":[{"name":"api","type":"string"},{"name":"clientRequestId","type":"string"},{"name":"requestId","type":"string"},{"name":"etag","type":"string"},{"name":"contentType","type":"string"},{"name":"contentLength","type":"long"},{"name":"blobType","type":"string"},{"name":"snapshot","type":["null","string"]},{"name":"url","type":"string"},{"name":"sequencer","type":"string"},{"name":"storageDiagnostics","type":{"type":"map","values":"string"}}]}}]}"#;

/// A chunk of `changes`, in their order, of `account`: the same changes give the same bytes
/// (its sync marker is drawn from their ids), so a chunk written again is the same chunk.
pub fn chunk(account: &str, changes: &[Change]) -> Vec<u8> {
    use crate::avro::{long, string, string_map};
    use sha2::Digest;
    let topic = format!(
        "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ifmatch/providers/\
         Microsoft.Storage/storageAccounts/{account}"
    );
    let mut hash = sha2::Sha256::new();
    let records: Vec<Vec<u8>> = (changes.iter())
        .map(|change| {
            hash.update(change.id.as_bytes());
            let name = change
                .container
                .split_once('~')
                .map_or(&*change.container, |(_, n)| n);
            let mut out = Vec::new();
            long(&mut out, 1);
            string(&mut out, &topic);
            string(
                &mut out,
                &format!(
                    "/blobServices/default/containers/{name}/blobs/{}",
                    change.blob
                ),
            );
            string(&mut out, change.kind.as_str());
            string(&mut out, &change.time);
            string(&mut out, &event_id(&change.id));
            string(&mut out, &change.api);
            string(&mut out, "");
            string(&mut out, &event_id(&change.id));
            string(&mut out, &change.etag);
            string(&mut out, &change.content_type);
            long(&mut out, change.len as i64);
            string(&mut out, &change.blob_type);
            match &change.snapshot {
                Some(snapshot) => {
                    long(&mut out, 1);
                    string(&mut out, snapshot);
                }
                None => long(&mut out, 0),
            }
            string(&mut out, "");
            string(&mut out, &change.id);
            string_map(&mut out, [("bid", change.id.as_str())].into_iter());
            out
        })
        .collect();
    let digest = hash.finalize();
    let sync: [u8; 16] = digest[..16].try_into().expect("32 bytes");
    crate::avro::container(SCHEMA, sync, &records)
}

/// A change's `id` in the feed: its id's 32 hex digits as a UUID.
fn event_id(id: &str) -> String {
    match (
        id.get(..8),
        id.get(8..12),
        id.get(12..16),
        id.get(16..20),
        id.get(20..32),
    ) {
        (Some(a), Some(b), Some(c), Some(d), Some(e)) => format!("{a}-{b}-{c}-{d}-{e}"),
        _ => id.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn what_a_write_is_to_the_feed_is_read_off_its_records() {
        use crate::record::{Content, Copied, CopyStatus};
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        let blob = |bytes: &[u8]| {
            let content = Content::new("o".into(), bytes.len() as u64, None);
            Record::blob(ifmatch_core::strong_etag(bytes), now, content)
        };
        let (one, two) = (blob(b"one"), blob(b"two"));
        let kind = |p: Option<&Record>, w: Option<&Record>| kind_of(p, w);
        assert_eq!(kind(None, Some(&one)), Some((Kind::BlobCreated, "PutBlob")));
        assert_eq!(
            kind(Some(&one), Some(&two)),
            Some((Kind::BlobCreated, "PutBlob"))
        );
        assert_eq!(
            kind(Some(&one), None),
            Some((Kind::BlobDeleted, "DeleteBlob"))
        );
        assert_eq!(kind(None, None), None);
        // A lease or tags change nothing the feed reports; metadata does.
        let mut leased = one.clone();
        leased.lease = crate::lease::Lease::Available;
        leased.tags.insert("k".into(), "v".into());
        assert_eq!(kind(Some(&one), Some(&leased)), None);
        let mut described = one.clone();
        described.metadata.insert("k".into(), "v".into());
        // Its ETag covers the metadata; the tag of its bytes is kept beside it, unchanged.
        described.etag = ifmatch_core::strong_etag(b"one, described");
        described.content.as_mut().unwrap().sha256 = Some(one.etag.clone());
        let updated = Some((Kind::BlobPropertiesUpdated, "SetBlobMetadata"));
        assert_eq!(kind(Some(&one), Some(&described)), updated);
        // A copy's bytes: when it is made, and when one from another server is finished.
        let copy = |status| Copied {
            id: "c1".into(),
            source: "http://x/y".into(),
            len: 3,
            completed: 0,
            status,
            description: None,
        };
        let (mut pending, mut done) = (blob(b""), two.clone());
        pending.copy = Some(copy(CopyStatus::Pending));
        done.copy = Some(copy(CopyStatus::Success));
        let copied = Some((Kind::BlobCreated, "CopyBlob"));
        assert_eq!(kind(Some(&one), Some(&pending)), copied);
        assert_eq!(kind(Some(&pending), Some(&done)), copied);
        // A record of staged blocks only, or a deleted one kept, is no blob.
        let mut kept = one.clone();
        kept.deleted = Some(crate::soft_delete::kept(now, 1));
        assert_eq!(
            kind(Some(&kept), Some(&two)),
            Some((Kind::BlobCreated, "PutBlob"))
        );
    }

    #[test]
    fn ids_sort_as_instants_and_hours_are_paths() {
        let at = SystemTime::UNIX_EPOCH + Duration::new(1_795_000_000, 5);
        let (a, b) = (id(at, u64::MAX), id(at + Duration::from_nanos(1), 0));
        assert!(a < b);
        assert_eq!(instant(&a), Some(at));
        assert_eq!(hour(at), "2026/11/18/1100");
        assert_eq!(
            chunk_path("2026/11/18/1100", 3),
            "log/00/2026/11/18/1100/00003.avro"
        );
        assert_eq!(hour_instant("2026/11/18/1100"), "2026-11-18T11:00:00.000Z");
        assert_eq!(hour_start("2026/11/18/1100"), Some(1_794_999_600));
        let segment = segment_path("2026/11/18/1100");
        assert_eq!(segment_hour(&segment), Some("2026/11/18/1100"));
        assert_eq!(event_id(&a).len(), 36);
    }
}
