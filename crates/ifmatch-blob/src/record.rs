//! The records the front keeps per container and per blob.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::lease::Lease;
use crate::page_blob::Paged;
use ifmatch_core::EntityTag;
use ifmatch_core::date::HttpDate;
use ifmatch_core::precondition::Validators;

/// The metadata record of a container or a blob: everything but the blob's bytes.
///
/// Records are replaced whole with a compare-and-swap on [`Record::generation`], so a record
/// and the object it names change together or not at all.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Record {
    /// The strong ETag: for a blob, the SHA-256 of its bytes.
    pub etag: EntityTag,
    /// Last modification, in whole seconds since the Unix epoch.
    pub last_modified: u64,
    /// The lease.
    #[serde(default)]
    pub lease: Lease,
    /// Bumped by every change of the record; the compare-and-swap compares it.
    pub generation: u64,
    /// The blob's bytes; `None` for a container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    /// A container's public access level: who may read without credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_access: Option<PublicAccess>,
    /// The user-defined metadata (`x-ms-meta-*`), names lowercased.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// Blocks staged into the record itself by earlier versions, in the order they came: read
    /// as the first blocks of the staged set, never written any more (see [`Record::staging`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uncommitted: Vec<Block>,
    /// The blocks staged by Put Block and not yet committed, kept apart from the record (see
    /// `Records::stage_block`): where they are. A blob record
    /// with staged blocks and no [`Record::content`] is a blob that does not exist yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staging: Option<Staging>,
    /// The last Copy Blob that wrote this blob, until a Put Blob or Put Block List replaces
    /// it (Azure's `x-ms-copy-*` properties).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy: Option<Copied>,
    /// The blob's index tags ([`crate::tags`]): not part of its ETag, as in Azure.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The id of the version this blob record is, when it was written while its account kept
    /// versions ([`crate::version`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The blob's time-based retention policy ([`crate::immutability`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immutability: Option<crate::immutability::Policy>,
    /// Whether the blob is under a legal hold ([`crate::immutability`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub legal_hold: bool,
    /// When a blob (or snapshot) record was deleted and until when it is kept, while its
    /// account keeps deleted blobs ([`crate::soft_delete`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted: Option<Deleted>,
    /// An account's Blob service properties (`<StorageServiceProperties>`), in the record
    /// [`crate::settings::service_key`] names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// The blob's changes the change feed has not published yet ([`crate::change_feed`]),
    /// written by the compare-and-swap that made them; in the feed's head record, those of the
    /// chunk being published.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feed: Vec<crate::change::Change>,
    /// A container's own retention policy and legal holds, set through the management API
    /// ([`crate::container_protection`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protection: Option<Box<crate::container_protection::Protection>>,
    /// An account's own `$delegators` record: the development principals whose tokens got a
    /// user delegation key, with the roles they carried ([`crate::delegators`]).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub delegators: crate::delegators::Delegators,
}

/// A deleted blob's or container's times ([`crate::soft_delete`]), in seconds since the Unix
/// epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Deleted {
    /// When it was deleted.
    pub at: u64,
    /// When it goes for good: its account's retention days after `at`, as they were then.
    pub until: u64,
    /// A deleted container's blobs are being moved (into it as the container is deleted, out
    /// of it as it is restored): until that ends, its records may name objects the live
    /// container's name too, so it is never listed, and removed without discarding them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub moving: bool,
}

/// A Copy Blob that wrote a blob: finished when its record is written, but for a copy from
/// another server that runs after its answer (`pending` until then; see
/// `front/pending_copies.rs`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Copied {
    /// `x-ms-copy-id`: a new UUID per copy.
    pub id: String,
    /// `x-ms-copy-source`: the source's URL as the request gave it, without its query (a
    /// shared access signature stays secret).
    pub source: String,
    /// The bytes copied.
    pub len: u64,
    /// When it finished, in seconds since the Unix epoch.
    pub completed: u64,
    /// `x-ms-copy-status`.
    #[serde(default, skip_serializing_if = "CopyStatus::is_success")]
    pub status: CopyStatus,
    /// `x-ms-copy-status-description`: why a copy failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Where a copy stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CopyStatus {
    /// Its bytes are the blob's.
    #[default]
    Success,
    /// It runs: the blob is empty until it ends.
    Pending,
    /// Abort Copy Blob ended it: the blob stays empty.
    Aborted,
    /// It could not read its source: the blob stays empty.
    Failed,
}

impl CopyStatus {
    /// Its `x-ms-copy-status` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Pending => "pending",
            Self::Aborted => "aborted",
            Self::Failed => "failed",
        }
    }

    fn is_success(&self) -> bool {
        *self == Self::Success
    }
}

/// What a record keeps of its staged blocks, which the backend keeps apart so that staging one
/// costs one small write however many are staged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Staging {
    /// Names the set among the backend's: a new random one for every set, so that blocks
    /// staged for a blob since committed, written whole or deleted are never read as a later
    /// set's.
    pub epoch: u64,
    /// The length of every block id of the set (a blob's block ids all have one length).
    pub id_len: usize,
}

/// A block of a block blob: staged by Put Block, then named by a Put Block List.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Block {
    /// Its id, base64, as the client gave it.
    pub id: String,
    /// The object that holds its bytes.
    pub object: String,
    /// Its length in bytes.
    pub len: u64,
    /// The strong tag of its bytes (`"` + hex SHA-256 + `"`).
    pub sha256: EntityTag,
    /// When it was staged, in seconds since the Unix epoch: uncommitted blocks expire.
    pub staged: u64,
}

/// A container's public access level (`x-ms-blob-public-access`); private when absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PublicAccess {
    /// Anyone may read the container's blobs, not list them.
    Blob,
    /// Anyone may read the blobs, list them and read the container's properties.
    Container,
}

impl PublicAccess {
    /// Reads `x-ms-blob-public-access`: `Some(None)` when absent (private), `None` for a value
    /// that is not a level.
    pub fn from_header(value: Option<&http::HeaderValue>) -> Option<Option<Self>> {
        match value.map(http::HeaderValue::as_bytes) {
            None => Some(None),
            Some(b"blob") => Some(Some(Self::Blob)),
            Some(b"container") => Some(Some(Self::Container)),
            Some(_) => None,
        }
    }

    /// The header's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Blob => "blob",
            Self::Container => "container",
        }
    }
}

/// Where a blob's bytes are and what they are.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Content {
    /// The object that holds the bytes, named by the `Objects` store
    /// (empty when they are [`Content::inline`] or in [`Content::blocks`]).
    pub object: String,
    /// Length in bytes.
    pub len: u64,
    /// The `Content-Type` given when it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// The MD5 of the bytes, base64, as `Content-MD5` gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    /// The strong tag of the bytes alone (`"` + hex SHA-256 + `"`), when the record's ETag is
    /// not it (the blob has metadata or properties); absent, the ETag is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<EntityTag>,
    /// The blob's HTTP headers besides `Content-Type`.
    #[serde(default, skip_serializing_if = "Properties::is_empty")]
    pub properties: Properties,
    /// A blob committed by Put Block List: its blocks, whose bytes one after the other are
    /// the blob's ([`Content::object`] is then empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<Block>,
    /// The bytes themselves, for a small blob kept in its record (see
    /// `Records::inline_max`): no object holds them. Base64 when
    /// serialized.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "inline_bytes"
    )]
    pub inline: Option<bytes::Bytes>,
    /// An append blob's state: its bytes are then the blocks of its append set (see
    /// [`Appended`]), and its tag chains each block's to the tag before it; `None` for a block
    /// blob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<Appended>,
    /// A page blob's sequence number and runs of pages (see [`Paged`]): its bytes are the
    /// runs', zeros between them, [`Content::len`] its size, and its tag chains each change
    /// to the tag before it; `None` for a block or an append blob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages: Option<Paged>,
}

/// What an append blob's record keeps of it. Its blocks are not in the record (an append would
/// then rewrite a record as long as the blob's block list): each Append Block adds an entry to
/// the blob's append set, as `Records::stage_block` adds a staged
/// block, one small write whatever the set holds, and then swaps the record for one counting
/// it. An entry's id is the chain value it follows (see [`Appended::chain`]); appenders that lost
/// their compare-and-swap leave entries no later entry follows, which readers pass over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Appended {
    /// Sealed: no block may be appended any more.
    #[serde(default)]
    pub sealed: bool,
    /// Names the blob's append set among the backend's sets (as [`Staging::epoch`]).
    #[serde(default)]
    pub epoch: u64,
    /// How many blocks the blob holds.
    #[serde(default)]
    pub count: usize,
}

impl Appended {
    /// The chain value of an append blob once `block` follows the bytes whose chain value is
    /// `before` (an empty blob's is the tag of no bytes): the SHA-256 of the value before, the
    /// block's tag and its object's name. A new value for every append, at the cost of one
    /// small hash; and only the entry an append committed leads on to the next.
    pub fn chain(before: &EntityTag, block: &Block) -> EntityTag {
        let mut all = Vec::with_capacity(2 * 66 + block.object.len());
        all.extend_from_slice(before.to_header_value().as_bytes());
        all.extend_from_slice(block.sha256.to_header_value().as_bytes());
        all.extend_from_slice(block.object.as_bytes());
        ifmatch_core::strong_etag(&all)
    }

    /// The blocks of the blob whose append set holds `entries` (in the order they were
    /// staged): from the empty blob's chain value, the `count` entries that each follow the
    /// one before and lead to `last`; `None` if they do not.
    pub fn resolve(&self, entries: Vec<Block>, last: &EntityTag) -> Option<Vec<Block>> {
        let mut after: std::collections::HashMap<String, Vec<Block>> = Default::default();
        for entry in entries {
            after.entry(entry.id.clone()).or_default().push(entry);
        }
        let mut chained = ifmatch_core::strong_etag(b"");
        let mut out = Vec::with_capacity(self.count);
        for n in 0..self.count {
            let candidates = after.get(&chained.to_string())?;
            let (next, block) = candidates.iter().find_map(|block| {
                let next = Appended::chain(&chained, block);
                let leads = if n + 1 == self.count {
                    next == *last
                } else {
                    after.contains_key(&next.to_string())
                };
                leads.then(|| (next, block.clone()))
            })?;
            out.push(block);
            chained = next;
        }
        (chained == *last).then_some(out)
    }
}

/// A blob's HTTP headers, as Put Blob and Set Blob Properties give them (`Content-Type` is
/// [`Content::content_type`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Properties {
    /// `Cache-Control`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<String>,
    /// `Content-Encoding`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_encoding: Option<String>,
    /// `Content-Language`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_language: Option<String>,
    /// `Content-Disposition`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_disposition: Option<String>,
}

impl Properties {
    /// Whether none is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

impl Record {
    /// A new container record.
    pub fn container(etag: EntityTag, now: SystemTime) -> Self {
        Self {
            etag,
            last_modified: unix_seconds(now),
            lease: Lease::Available,
            generation: 1,
            content: None,
            public_access: None,
            metadata: BTreeMap::new(),
            uncommitted: Vec::new(),
            staging: None,
            copy: None,
            tags: BTreeMap::new(),
            version: None,
            immutability: None,
            legal_hold: false,
            deleted: None,
            service: None,
            feed: Vec::new(),
            protection: None,
            delegators: BTreeMap::new(),
        }
    }

    /// A new blob record for bytes stored in `object`.
    pub fn blob(etag: EntityTag, now: SystemTime, content: Content) -> Self {
        Self {
            content: Some(content),
            ..Self::container(etag, now)
        }
    }

    /// What a container's protection reads of this blob.
    pub fn protected_as(&self) -> crate::container_protection::Blob {
        crate::container_protection::Blob {
            changed: self.last_modified,
            appendable: (self.content.as_ref()).is_some_and(|c| c.append.is_some()),
        }
    }

    /// Whether a container has a retention policy of its own, and a legal hold.
    pub fn container_protection(&self) -> (bool, bool) {
        let protection = self.protection.as_deref();
        (
            protection.is_some_and(|p| p.policy.is_some()),
            protection.is_some_and(|p| !p.holds.is_empty()),
        )
    }

    /// The same record with this generation.
    pub fn with_generation(mut self, generation: u64) -> Self {
        self.generation = generation;
        self
    }

    /// Last-Modified as an instant.
    pub fn last_modified_time(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.last_modified)
    }

    /// Last-Modified as an HTTP date.
    pub fn last_modified_date(&self) -> HttpDate {
        HttpDate::from(UNIX_EPOCH + Duration::from_secs(self.last_modified))
    }

    /// The validators the preconditions are evaluated against.
    pub fn validators(&self) -> Validators {
        Validators::new(Some(self.etag.clone()), Some(self.last_modified_date()))
    }

    /// The blob's length, 0 for a container.
    pub fn len(&self) -> u64 {
        self.content.as_ref().map_or(0, |c| c.len)
    }

    /// Whether the blob is empty (or this is a container).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every object this record names: its content's and its uncommitted blocks'. What must
    /// be discarded when the record goes, and what the orphan sweep keeps.
    pub fn objects(&self) -> impl Iterator<Item = &str> {
        let content = self
            .content
            .iter()
            .flat_map(Content::pieces)
            .map(|(o, _)| o);
        content.chain(self.uncommitted.iter().map(|b| b.object.as_str()))
    }

    /// The strong tag of the blob's bytes: `"` + hex SHA-256 + `"`.
    pub fn bytes_tag(&self) -> &EntityTag {
        self.content
            .as_ref()
            .and_then(|c| c.sha256.as_ref())
            .unwrap_or(&self.etag)
    }
}

impl Content {
    /// Content stored in `object`.
    pub fn new(object: String, len: u64, content_type: Option<String>) -> Self {
        Self {
            object,
            len,
            content_type,
            md5: None,
            sha256: None,
            properties: Properties::default(),
            blocks: Vec::new(),
            inline: None,
            append: None,
            pages: None,
        }
    }

    /// `x-ms-blob-type`: what kind of blob this is.
    pub fn blob_type(&self) -> &'static str {
        match (&self.append, &self.pages) {
            (Some(_), _) => "AppendBlob",
            (None, Some(_)) => "PageBlob",
            (None, None) => "BlockBlob",
        }
    }

    /// Whether the blob's tag chains its changes (an append or a page blob) rather than
    /// hashing its bytes: its chain value is then kept in [`Content::sha256`] whatever the
    /// record's tag, and no `x-ifmatch-content-sha256` is given.
    pub fn chained(&self) -> bool {
        self.append.is_some() || self.pages.is_some()
    }

    /// Content kept in the record itself: `bytes`, in no object.
    pub fn inline(bytes: bytes::Bytes, content_type: Option<String>) -> Self {
        let mut content = Self::new(String::new(), bytes.len() as u64, content_type);
        content.inline = Some(bytes);
        content
    }

    /// The objects that hold the bytes, in order, with their lengths: the one object of a
    /// blob put whole, or the blocks of one committed from a block list.
    pub fn pieces(&self) -> Vec<(&str, u64)> {
        if let Some(paged) = &self.pages {
            paged.objects()
        } else if self.inline.is_some() || (self.blocks.is_empty() && self.object.is_empty()) {
            // Kept in the record, or an append blob with no block yet.
            Vec::new()
        } else if self.blocks.is_empty() {
            vec![(self.object.as_str(), self.len)]
        } else {
            self.blocks
                .iter()
                .map(|b| (b.object.as_str(), b.len))
                .collect()
        }
    }

    /// What a read of `range` of the bytes reads: each object it covers, with that object's
    /// length and the part of it that falls in `range` (for a page blob, zeros between its
    /// runs: pieces with no object).
    pub fn pieces_in(
        &self,
        range: std::ops::Range<u64>,
    ) -> Vec<(String, u64, std::ops::Range<u64>)> {
        if let Some(paged) = &self.pages {
            return paged.pieces_in(range);
        }
        let mut offset = 0;
        let mut out = Vec::new();
        for (object, len) in self.pieces() {
            let (start, end) = (range.start.max(offset), range.end.min(offset + len));
            if start < end {
                out.push((object.to_owned(), len, start - offset..end - offset));
            }
            offset += len;
        }
        out
    }
}

/// Whole seconds since the Unix epoch (0 before it).
pub fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// [`Content::inline`] as base64 text (a JSON array of numbers would take four times the room).
mod inline_bytes {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use bytes::Bytes;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        bytes: &Option<Bytes>,
        out: S,
    ) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(bytes) => out.serialize_str(&STANDARD.encode(bytes)),
            None => out.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        input: D,
    ) -> Result<Option<Bytes>, D::Error> {
        Option::<String>::deserialize(input)?
            .map(|text| STANDARD.decode(text).map(Bytes::from))
            .transpose()
            .map_err(serde::de::Error::custom)
    }
}
