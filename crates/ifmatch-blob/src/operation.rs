//! Reading a request line into a blob-dialect operation, and the naming rules.

use crate::error_code::ErrorCode;
use http::Method;
use percent_encoding::percent_decode_str;

/// The operations of the blob dialect. The options of a listing are boxed: every request's
/// future holds its operation, and moves it (a GET's, 32 bytes rather than 120).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operation {
    /// `GET /?comp=list`: the account's containers.
    ListContainers(Box<ListOptions>),
    /// `PUT /{container}?restype=container`
    CreateContainer,
    /// `DELETE /{container}?restype=container`
    DeleteContainer,
    /// `GET` or `HEAD /{container}?restype=container`
    GetContainerProperties,
    /// `PUT /{container}?restype=container&comp=undelete`: Restore Container.
    RestoreContainer,
    /// `GET /{container}?restype=container&comp=list`
    ListBlobs(Box<ListOptions>),
    /// `GET /{container}?restype=container&comp=blobs&where=...`: Find Blobs by Tags in
    /// Container.
    FindBlobsByTags(Box<FindOptions>),
    /// `GET /?comp=blobs&where=...`: Find Blobs by Tags across the account's containers.
    FindBlobsInAccount(Box<FindOptions>),
    /// `GET /?restype=service&comp=properties`
    GetBlobServiceProperties,
    /// `POST /?restype=service&comp=userdelegationkey`: a key for user delegation SAS, given to
    /// a bearer token's principal.
    GetUserDelegationKey,
    /// `PUT /?restype=service&comp=properties`
    SetBlobServiceProperties,
    /// `PUT /{container}?restype=container&comp=lease`
    LeaseContainer,
    /// `GET` or `HEAD /{container}?restype=container&comp=acl`
    GetContainerAcl,
    /// `PUT /{container}?restype=container&comp=acl`
    SetContainerAcl,
    /// `POST /{container}?restype=container&comp=batch`: Blob Batch, subrequests in the body.
    SubmitBatch,
    /// `GET` or `HEAD /{container}?restype=container&comp=metadata`
    GetContainerMetadata,
    /// `PUT /{container}?restype=container&comp=metadata`
    SetContainerMetadata,
    /// `GET` or `HEAD /{container}/{blob}?comp=metadata`
    GetBlobMetadata,
    /// `PUT /{container}/{blob}?comp=metadata`
    SetBlobMetadata,
    /// `PUT /{container}/{blob}?comp=properties`: the blob's HTTP headers.
    SetBlobProperties,
    /// `GET /{container}/{blob}?comp=tags`
    GetBlobTags,
    /// `PUT /{container}/{blob}?comp=tags`
    SetBlobTags,
    /// `PUT /{container}/{blob}`
    PutBlob,
    /// `GET` or `HEAD /{container}/{blob}`
    GetBlob,
    /// `DELETE /{container}/{blob}`
    DeleteBlob,
    /// `PUT /{container}/{blob}?comp=lease`
    LeaseBlob,
    /// `PUT /{container}/{blob}?comp=block&blockid=...`: stage one block, by its id (base64,
    /// as sent).
    PutBlock(String),
    /// `PUT /{container}/{blob}?comp=blocklist`: commit a list of blocks as the blob.
    PutBlockList,
    /// `GET /{container}/{blob}?comp=blocklist&blocklisttype=...`
    GetBlockList(BlockListType),
    /// `PUT /{container}/{blob}?comp=appendblock`: Append Block (Append Block From URL with
    /// `x-ms-copy-source`).
    AppendBlock,
    /// `PUT /{container}/{blob}?comp=seal`: Append Blob Seal.
    SealBlob,
    /// `PUT /{container}/{blob}?comp=incrementalcopy`: Incremental Copy Blob.
    IncrementalCopy,
    /// `PUT /{container}/{blob}?comp=page`: Put Page (`x-ms-page-write: update` or `clear`).
    PutPage,
    /// `GET /{container}/{blob}?comp=pagelist`: Get Page Ranges (with `prevsnapshot=`, the
    /// difference from that snapshot).
    GetPageRanges(Box<PageRangesOptions>),
    /// `PUT /{container}/{blob}?comp=snapshot`
    SnapshotBlob,
    /// `PUT /{container}/{blob}?comp=undelete`
    UndeleteBlob,
    /// `PUT /{container}/{blob}?comp=immutabilityPolicies`
    SetImmutabilityPolicy,
    /// `DELETE /{container}/{blob}?comp=immutabilityPolicies`
    DeleteImmutabilityPolicy,
    /// `PUT /{container}/{blob}?comp=legalhold`
    SetLegalHold,
    /// `PUT /{container}/{blob}?comp=copy&copyid=...` with `x-ms-copy-action: abort`: Abort
    /// Copy Blob, of the copy with this id.
    AbortCopyBlob(String),
}

impl Operation {
    /// Whether the operation only reads, as the change feed's container allows.
    pub fn reads_feed(&self) -> bool {
        matches!(
            self,
            Self::GetContainerProperties
                | Self::GetContainerMetadata
                | Self::ListBlobs(_)
                | Self::GetBlob
                | Self::GetBlobMetadata
                | Self::GetBlockList(_)
        )
    }

    /// Whether the operation takes `snapshot=`.
    pub fn reads_snapshots(&self) -> bool {
        matches!(
            self,
            Self::GetBlob
                | Self::GetBlobMetadata
                | Self::GetBlobTags
                | Self::GetBlockList(_)
                | Self::GetPageRanges(_)
                | Self::DeleteBlob
        )
    }

    /// Whether the operation takes `versionid=`: it reads a version, sets its tags, or
    /// deletes it.
    pub fn reads_versions(&self) -> bool {
        self.reads_snapshots()
            || matches!(
                self,
                Self::SetBlobTags
                    | Self::SetImmutabilityPolicy
                    | Self::DeleteImmutabilityPolicy
                    | Self::SetLegalHold
            )
    }

    /// Azure's name of the operation, as in its REST reference (for metrics and logs).
    pub fn name(&self) -> &'static str {
        match self {
            Self::ListContainers(_) => "ListContainers",
            Self::CreateContainer => "CreateContainer",
            Self::DeleteContainer => "DeleteContainer",
            Self::RestoreContainer => "RestoreContainer",
            Self::GetContainerProperties => "GetContainerProperties",
            Self::ListBlobs(_) => "ListBlobs",
            Self::FindBlobsByTags(_) | Self::FindBlobsInAccount(_) => "FindBlobsByTags",
            Self::GetBlobServiceProperties => "GetBlobServiceProperties",
            Self::GetUserDelegationKey => "GetUserDelegationKey",
            Self::SetBlobServiceProperties => "SetBlobServiceProperties",
            Self::LeaseContainer => "LeaseContainer",
            Self::GetContainerAcl => "GetContainerACL",
            Self::SetContainerAcl => "SetContainerACL",
            Self::SubmitBatch => "SubmitBatch",
            Self::GetContainerMetadata => "GetContainerMetadata",
            Self::SetContainerMetadata => "SetContainerMetadata",
            Self::GetBlobMetadata => "GetBlobMetadata",
            Self::SetBlobMetadata => "SetBlobMetadata",
            Self::SetBlobProperties => "SetBlobProperties",
            Self::GetBlobTags => "GetBlobTags",
            Self::SetBlobTags => "SetBlobTags",
            Self::PutBlob => "PutBlob",
            Self::GetBlob => "GetBlob",
            Self::DeleteBlob => "DeleteBlob",
            Self::LeaseBlob => "LeaseBlob",
            Self::PutBlock(_) => "PutBlock",
            Self::PutBlockList => "PutBlockList",
            Self::GetBlockList(_) => "GetBlockList",
            Self::AbortCopyBlob(_) => "AbortCopyBlob",
            Self::AppendBlock => "AppendBlock",
            Self::SealBlob => "SealBlob",
            Self::PutPage => "PutPage",
            Self::IncrementalCopy => "IncrementalCopyBlob",
            Self::GetPageRanges(_) => "GetPageRanges",
            Self::SnapshotBlob => "SnapshotBlob",
            Self::UndeleteBlob => "UndeleteBlob",
            Self::SetImmutabilityPolicy => "SetImmutabilityPolicy",
            Self::DeleteImmutabilityPolicy => "DeleteImmutabilityPolicy",
            Self::SetLegalHold => "SetLegalHold",
        }
    }

    /// Whether this is a lease action (on a blob or a container).
    pub fn is_lease(&self) -> bool {
        matches!(self, Self::LeaseBlob | Self::LeaseContainer)
    }
}

/// Which blocks Get Block List lists (`blocklisttype`; committed when absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockListType {
    /// The blocks of the blob as it is.
    Committed,
    /// The blocks staged since, not yet committed.
    Uncommitted,
    /// Both.
    All,
}

/// The options of Get Page Ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRangesOptions {
    /// `prevsnapshot`: the snapshot whose difference is asked for, validated.
    pub previous: Option<String>,
    /// Where an earlier page stopped (its `NextMarker`).
    pub marker: Option<String>,
    /// At most this many ranges (`maxresults`; all of them when absent).
    pub max_results: Option<usize>,
}

/// The options of Find Blobs by Tags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FindOptions {
    /// `where`: the tags expression (read by the front: 400 when it is not one).
    pub expression: String,
    /// Where an earlier page stopped (its `NextMarker`).
    pub marker: Option<String>,
    /// At most this many blobs (1 to 5000).
    pub max_results: usize,
}

/// What List Blobs and List Containers are asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListOptions {
    /// Only names that start with this.
    pub prefix: String,
    /// Only names after this one (the `NextMarker` of an earlier page).
    pub marker: Option<String>,
    /// `startFrom`: only names at or after this one (object_store's Azure backend lists from
    /// an offset with it).
    pub start_from: Option<String>,
    /// At most this many names (1 to 5000).
    pub max_results: usize,
    /// Names that go on past the prefix through this are rolled up into one `BlobPrefix`
    /// (List Blobs), as a directory listing does.
    pub delimiter: Option<String>,
    /// `include=metadata`: each entry carries its metadata.
    pub metadata: bool,
    /// `include=uncommittedblobs`: blobs that have staged blocks and no content yet are listed
    /// too.
    pub uncommitted: bool,
    /// `include=snapshots`: each blob's snapshots are listed after it, oldest first.
    pub snapshots: bool,
    /// `include=versions`: each blob's earlier versions are listed after it (and its
    /// snapshots), oldest first, and its current one says so.
    pub versions: bool,
    /// `include=deleted`: deleted blobs kept for their retention days (and, with
    /// `snapshots`, deleted snapshots) are listed too.
    pub deleted: bool,
}

impl ListOptions {
    /// Whether a listing lists a record of a blob that is `qualified` so (a snapshot, a
    /// version; `None`: the blob's own).
    pub fn lists(&self, qualified: Option<crate::record_name::Qualifier<'_>>) -> bool {
        use crate::record_name::Qualifier;
        match qualified {
            None => true,
            Some(Qualifier::Snapshot(_)) => self.snapshots,
            Some(Qualifier::Version(_)) => self.versions,
            Some(Qualifier::Deleted(_)) => self.deleted,
        }
    }
}

/// The largest page of List Blobs.
pub const MAX_RESULTS: usize = 5000;

/// A parsed request line: what to do, and to what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The operation.
    pub operation: Operation,
    /// The container name, validated.
    pub container: String,
    /// The blob name, validated; empty for container operations.
    pub blob: String,
    /// The snapshot of the blob the operation reads or deletes (`snapshot=`), validated.
    pub snapshot: Option<String>,
    /// The version of the blob the operation reads, tags or deletes (`versionid=`), validated.
    pub version: Option<String>,
}

impl Target {
    /// Reads the method, the path below the account (see
    /// [`Accounts::locate`](ifmatch_azure::Accounts::locate)) and the query. Names are percent-decoded
    /// and validated: a container name is 3 to 63 of `a-z 0-9 -` (no leading, trailing or
    /// doubled `-`); a blob name is 1 to 1024 characters with no control characters and no `.`
    /// or `..` segment.
    pub fn parse(method: &Method, path: &str, query: Option<&str>) -> Result<Self, ErrorCode> {
        let path = path.strip_prefix('/').ok_or(ErrorCode::InvalidUri)?;
        let (container, blob) = match ifmatch_azure::split_once_ascii(path, b'/') {
            Some((c, b)) => (c, Some(b)),
            None => (path, None),
        };
        let query = Query::parse(query.unwrap_or(""))?;
        if container.is_empty() && blob.is_none() {
            return Ok(Self {
                operation: account_operation(method, &query)?,
                container: String::new(),
                blob: String::new(),
                snapshot: None,
                version: None,
            });
        }
        let container = decode(container)?;
        let feed = container == crate::change_feed::FEED;
        if !feed {
            validate_container(&container)?;
        }

        let operation = match blob {
            None | Some("") => container_operation(method, &query)?,
            // `restype` names container operations; on a blob path it is a mistake, never a
            // Put Blob.
            Some(_) if query.restype.is_some() => {
                return Err(ErrorCode::InvalidQueryParameterValue);
            }
            Some(_) => blob_operation(method, &query)?,
        };
        // The change feed's container is the account's to read, nobody's to write.
        if feed && !operation.reads_feed() {
            return Err(ErrorCode::AuthorizationPermissionMismatch);
        }
        let blob = match blob {
            Some(b) if !b.is_empty() => {
                let b = decode(b)?;
                validate_blob(&b)?;
                b
            }
            _ => String::new(),
        };
        // A snapshot is read, listed and deleted, never written (400 on any other operation).
        let snapshot = match query.snapshot.as_deref() {
            None => None,
            Some(id) if operation.reads_snapshots() => Some(crate::record_name::parse_id(id)?),
            Some(_) => return Err(ErrorCode::InvalidQueryParameterValue),
        };
        let version = match query.version.as_deref() {
            None => None,
            Some(id) if operation.reads_versions() && snapshot.is_none() => {
                Some(crate::record_name::parse_id(id)?)
            }
            Some(_) => return Err(ErrorCode::InvalidQueryParameterValue),
        };
        Ok(Self {
            operation,
            container,
            blob,
            snapshot,
            version,
        })
    }

    /// The name of the record the operation addresses: the blob's, or its snapshot's.
    pub fn record_name(&self) -> String {
        match (&self.snapshot, &self.version) {
            (Some(id), _) => crate::record_name::snapshot(&self.blob, id),
            (None, Some(id)) => crate::record_name::version(&self.blob, id),
            (None, None) => self.blob.clone(),
        }
    }
}
/// The account's operation `method` and `query` name (a path with no container).
fn account_operation(method: &Method, query: &Query) -> Result<Operation, ErrorCode> {
    if query.restype.as_deref() == Some("service") {
        return match (method, query.comp.as_deref()) {
            (&Method::GET, Some("properties")) => Ok(Operation::GetBlobServiceProperties),
            (&Method::PUT, Some("properties")) => Ok(Operation::SetBlobServiceProperties),
            (&Method::POST, Some("userdelegationkey")) => Ok(Operation::GetUserDelegationKey),
            _ => Err(ErrorCode::InvalidQueryParameterValue),
        };
    }
    match (method, query.comp.as_deref()) {
        (&Method::GET, Some("list")) => {
            Ok(Operation::ListContainers(Box::new(query.list_options()?)))
        }
        (&Method::GET, Some("blobs")) => Ok(Operation::FindBlobsInAccount(Box::new(
            query.find_options()?,
        ))),
        _ => Err(ErrorCode::InvalidQueryParameterValue),
    }
}

/// The container's operation `method` and `query` name (a path with a container alone).
fn container_operation(method: &Method, query: &Query) -> Result<Operation, ErrorCode> {
    if query.restype.as_deref() != Some("container") {
        return Err(ErrorCode::InvalidQueryParameterValue);
    }
    Ok(match (method, query.comp.as_deref()) {
        (&Method::PUT, None) => Operation::CreateContainer,
        (&Method::DELETE, None) => Operation::DeleteContainer,
        (&Method::GET | &Method::HEAD, None) => Operation::GetContainerProperties,
        (&Method::GET, Some("list")) => Operation::ListBlobs(Box::new(query.list_options()?)),
        (&Method::GET, Some("blobs")) => {
            Operation::FindBlobsByTags(Box::new(query.find_options()?))
        }
        (&Method::PUT, Some("lease")) => Operation::LeaseContainer,
        (&Method::PUT, Some("undelete")) => Operation::RestoreContainer,
        (&Method::GET | &Method::HEAD, Some("acl")) => Operation::GetContainerAcl,
        (&Method::PUT, Some("acl")) => Operation::SetContainerAcl,
        (&Method::POST, Some("batch")) => Operation::SubmitBatch,
        (&Method::GET | &Method::HEAD, Some("metadata")) => Operation::GetContainerMetadata,
        (&Method::PUT, Some("metadata")) => Operation::SetContainerMetadata,
        (
            _,
            None | Some("list" | "lease" | "acl" | "batch" | "metadata" | "blobs" | "undelete"),
        ) => {
            return Err(ErrorCode::UnsupportedHttpVerb);
        }
        _ => return Err(ErrorCode::InvalidQueryParameterValue),
    })
}

/// The blob's operation `method` and `query` name.
fn blob_operation(method: &Method, query: &Query) -> Result<Operation, ErrorCode> {
    Ok(match (method, query.comp.as_deref()) {
        (&Method::PUT, None) => Operation::PutBlob,
        (&Method::GET | &Method::HEAD, None) => Operation::GetBlob,
        (&Method::DELETE, None) => Operation::DeleteBlob,
        (&Method::PUT, Some("lease")) => Operation::LeaseBlob,
        (&Method::GET | &Method::HEAD, Some("metadata")) => Operation::GetBlobMetadata,
        (&Method::PUT, Some("metadata")) => Operation::SetBlobMetadata,
        (&Method::PUT, Some("properties")) => Operation::SetBlobProperties,
        (&Method::GET, Some("tags")) => Operation::GetBlobTags,
        (&Method::PUT, Some("tags")) => Operation::SetBlobTags,
        (&Method::PUT, Some("block")) => Operation::PutBlock(query.block_id()?),
        (&Method::PUT, Some("blocklist")) => Operation::PutBlockList,
        (&Method::GET | &Method::HEAD, Some("blocklist")) => {
            Operation::GetBlockList(query.block_list_type()?)
        }
        (&Method::PUT, Some("appendblock")) => Operation::AppendBlock,
        (&Method::PUT, Some("seal")) => Operation::SealBlob,
        (&Method::PUT, Some("page")) => Operation::PutPage,
        (&Method::PUT, Some("incrementalcopy")) => Operation::IncrementalCopy,
        (&Method::GET | &Method::HEAD, Some("pagelist")) => {
            Operation::GetPageRanges(Box::new(query.page_ranges_options()?))
        }
        (&Method::PUT, Some("snapshot")) => Operation::SnapshotBlob,
        (&Method::PUT, Some("undelete")) => Operation::UndeleteBlob,
        (&Method::PUT, Some("immutabilityPolicies")) => Operation::SetImmutabilityPolicy,
        (&Method::DELETE, Some("immutabilityPolicies")) => Operation::DeleteImmutabilityPolicy,
        (&Method::PUT, Some("legalhold")) => Operation::SetLegalHold,
        (&Method::PUT, Some("copy")) => Operation::AbortCopyBlob(
            (query.copy_id.clone()).ok_or(ErrorCode::InvalidQueryParameterValue)?,
        ),
        (
            _,
            None
            | Some(
                "lease"
                | "metadata"
                | "properties"
                | "block"
                | "blocklist"
                | "copy"
                | "appendblock"
                | "seal"
                | "page"
                | "pagelist"
                | "incrementalcopy"
                | "tags"
                | "snapshot"
                | "undelete"
                | "immutabilityPolicies"
                | "legalhold",
            ),
        ) => {
            return Err(ErrorCode::UnsupportedHttpVerb);
        }
        _ => return Err(ErrorCode::InvalidQueryParameterValue),
    })
}

#[derive(Default)]
struct Query {
    restype: Option<String>,
    comp: Option<String>,
    prefix: Option<String>,
    marker: Option<String>,
    max_results: Option<String>,
    delimiter: Option<String>,
    include: Option<String>,
    block_id: Option<String>,
    block_list_type: Option<String>,
    copy_id: Option<String>,
    start_from: Option<String>,
    expression: Option<String>,
    snapshot: Option<String>,
    version: Option<String>,
    previous: Option<String>,
}

impl Query {
    fn parse(query: &str) -> Result<Self, ErrorCode> {
        let mut out = Self::default();
        if query.is_empty() {
            // Most requests name no query.
            return Ok(out);
        }
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            let slot = match &*name {
                "restype" => &mut out.restype,
                "comp" => &mut out.comp,
                "prefix" => &mut out.prefix,
                "marker" => &mut out.marker,
                "maxresults" => &mut out.max_results,
                "delimiter" => &mut out.delimiter,
                "include" => &mut out.include,
                "blockid" => &mut out.block_id,
                "blocklisttype" => &mut out.block_list_type,
                "copyid" => &mut out.copy_id,
                "startFrom" => &mut out.start_from,
                "where" => &mut out.expression,
                "snapshot" => &mut out.snapshot,
                "versionid" => &mut out.version,
                "prevsnapshot" => &mut out.previous,
                _ => continue,
            };
            if slot.replace(value.into_owned()).is_some() {
                return Err(ErrorCode::InvalidQueryParameterValue);
            }
        }
        Ok(out)
    }

    fn page_ranges_options(&self) -> Result<PageRangesOptions, ErrorCode> {
        let previous = (self.previous.as_deref())
            .map(crate::record_name::parse_id)
            .transpose()?;
        let max_results = (self.max_results.as_deref())
            .map(|n| n.parse::<usize>().ok().filter(|n| *n >= 1))
            .map(|n| n.ok_or(ErrorCode::InvalidQueryParameterValue))
            .transpose()?;
        Ok(PageRangesOptions {
            previous,
            marker: self.marker.clone().filter(|m| !m.is_empty()),
            max_results,
        })
    }

    fn find_options(&self) -> Result<FindOptions, ErrorCode> {
        let list = self.list_options()?;
        Ok(FindOptions {
            expression: self.expression.clone().unwrap_or_default(),
            marker: list.marker,
            max_results: list.max_results,
        })
    }

    fn list_options(&self) -> Result<ListOptions, ErrorCode> {
        // Past 5,000 a page holds 5,000, as Azure answers; 0 or less, or no number, is 400.
        let max_results = match &self.max_results {
            None => MAX_RESULTS,
            Some(n) => n
                .parse::<u32>()
                .ok()
                .filter(|n| *n >= 1)
                .map(|n| (n as usize).min(MAX_RESULTS))
                .ok_or(ErrorCode::InvalidQueryParameterValue)?,
        };
        let include = self.include.as_deref().unwrap_or("");
        // Each is echoed in the listing's XML, where no escape makes such characters well-formed.
        let echoed = [&self.prefix, &self.marker, &self.delimiter];
        if !echoed
            .into_iter()
            .flatten()
            .all(|text| ifmatch_azure::is_xml_text(text))
        {
            return Err(ErrorCode::InvalidQueryParameterValue);
        }
        Ok(ListOptions {
            prefix: self.prefix.clone().unwrap_or_default(),
            marker: self.marker.clone().filter(|m| !m.is_empty()),
            start_from: self.start_from.clone().filter(|s| !s.is_empty()),
            max_results,
            delimiter: self.delimiter.clone().filter(|d| !d.is_empty()),
            metadata: include.split(',').any(|i| i.trim() == "metadata"),
            uncommitted: include.split(',').any(|i| i.trim() == "uncommittedblobs"),
            snapshots: include.split(',').any(|i| i.trim() == "snapshots"),
            versions: include.split(',').any(|i| i.trim() == "versions"),
            deleted: include.split(',').any(|i| i.trim() == "deleted"),
        })
    }

    /// `blockid`: base64 of 1 to 64 bytes (the dialect's rule), kept as sent.
    fn block_id(&self) -> Result<String, ErrorCode> {
        use base64::Engine;
        let id = self
            .block_id
            .as_deref()
            .ok_or(ErrorCode::InvalidQueryParameterValue)?;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(id)
            .map_err(|_| ErrorCode::InvalidBlockId)?;
        if !(1..=64).contains(&decoded.len()) {
            return Err(ErrorCode::InvalidBlockId);
        }
        Ok(id.to_owned())
    }

    fn block_list_type(&self) -> Result<BlockListType, ErrorCode> {
        match self.block_list_type.as_deref() {
            None | Some("committed") => Ok(BlockListType::Committed),
            Some("uncommitted") => Ok(BlockListType::Uncommitted),
            Some("all") => Ok(BlockListType::All),
            Some(_) => Err(ErrorCode::InvalidQueryParameterValue),
        }
    }
}

fn decode(segment: &str) -> Result<String, ErrorCode> {
    percent_decode_str(segment)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| ErrorCode::InvalidUri)
}

fn validate_container(name: &str) -> Result<(), ErrorCode> {
    let ok = (3..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        // (Not `contains("--")`: a substring search sets up a searcher for a 3- to 63-byte name.)
        && !name.as_bytes().windows(2).any(|pair| pair == b"--");
    ok.then_some(()).ok_or(ErrorCode::InvalidResourceName)
}

fn validate_blob(name: &str) -> Result<(), ErrorCode> {
    let ok = (1..=1024).contains(&name.chars().count())
        && !name.chars().any(|c| c.is_control())
        && ifmatch_azure::is_xml_text(name)
        && !name
            .split(['/', '\\'])
            .any(|segment| segment == "." || segment == "..");
    ok.then_some(()).ok_or(ErrorCode::InvalidResourceName)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(method: Method, uri: &str) -> Result<Target, ErrorCode> {
        let uri: http::Uri = uri.parse().unwrap();
        Target::parse(&method, uri.path(), uri.query())
    }

    #[test]
    fn operations() {
        use Operation::*;
        #[rustfmt::skip]
        let cases: &[(Method, &str, Result<Operation, ErrorCode>)] = &[
            (Method::PUT, "/box?restype=container", Ok(CreateContainer)),
            (Method::DELETE, "/box?restype=container", Ok(DeleteContainer)),
            (Method::HEAD, "/box?restype=container", Ok(GetContainerProperties)),
            (Method::GET, "/box?restype=container", Ok(GetContainerProperties)),
            (Method::PUT, "/box?restype=container&comp=lease", Ok(LeaseContainer)),
            (Method::PUT, "/box/a/b.txt", Ok(PutBlob)),
            (Method::GET, "/box/a/b.txt", Ok(GetBlob)),
            (Method::HEAD, "/box/a/b.txt", Ok(GetBlob)),
            (Method::DELETE, "/box/a/b.txt", Ok(DeleteBlob)),
            (Method::PUT, "/box/a/b.txt?comp=lease", Ok(LeaseBlob)),
            (Method::PUT, "/box/a?comp=lease&timeout=30", Ok(LeaseBlob)),
            (Method::PUT, "/box", Err(ErrorCode::InvalidQueryParameterValue)),
            (Method::PUT, "/box?restype=container&comp=acl", Ok(SetContainerAcl)),
            (Method::GET, "/box?restype=container&comp=acl", Ok(GetContainerAcl)),
            (Method::PUT, "/box/a?comp=block", Err(ErrorCode::InvalidQueryParameterValue)),
            (Method::POST, "/box/a", Err(ErrorCode::UnsupportedHttpVerb)),
            (Method::PUT, "/box/a?restype=container", Err(ErrorCode::InvalidQueryParameterValue)),
            (Method::DELETE, "/box/a?restype=container&comp=lease", Err(ErrorCode::InvalidQueryParameterValue)),
            (Method::PUT, "/box/a?comp=Lease", Err(ErrorCode::InvalidQueryParameterValue)),
            (Method::PATCH, "/box?restype=container", Err(ErrorCode::UnsupportedHttpVerb)),
            (Method::GET, "/box/a?comp=lease", Err(ErrorCode::UnsupportedHttpVerb)),
            (Method::PUT, "/box?restype=container&restype=container", Err(ErrorCode::InvalidQueryParameterValue)),
        ];
        for (method, uri, want) in cases {
            assert_eq!(
                parse(method.clone(), uri).map(|t| t.operation),
                *want,
                "{method} {uri}"
            );
        }
    }

    #[test]
    fn list_options() {
        let t = parse(
            Method::GET,
            "/box?restype=container&comp=list&prefix=a%2Fb&maxresults=2&marker=a%2Fb1&startFrom=a%2Fb0",
        )
        .unwrap();
        let want = ListOptions {
            prefix: "a/b".into(),
            marker: Some("a/b1".into()),
            start_from: Some("a/b0".into()),
            max_results: 2,
            delimiter: None,
            metadata: false,
            uncommitted: false,
            snapshots: false,
            versions: false,
            deleted: false,
        };
        assert_eq!(t.operation, Operation::ListBlobs(Box::new(want)));
        for bad in ["0", "x", "-1", "99999999999"] {
            let uri = format!("/box?restype=container&comp=list&maxresults={bad}");
            assert_eq!(
                parse(Method::GET, &uri),
                Err(ErrorCode::InvalidQueryParameterValue),
                "{bad}"
            );
        }
        // Past 5,000 a page holds 5,000, as Azure answers.
        let uri = "/box?restype=container&comp=list&maxresults=5001";
        match parse(Method::GET, uri).unwrap().operation {
            Operation::ListBlobs(options) => assert_eq!(options.max_results, MAX_RESULTS),
            other => panic!("{other:?}"),
        }
    }

    proptest::proptest! {
        #[test]
        fn any_request_line_parses_or_is_refused(path in "/[ -~]{0,80}", method in "[A-Z]{1,8}") {
            let parsed = (path.parse::<http::Uri>(), Method::from_bytes(method.as_bytes()));
            if let (Ok(uri), Ok(method)) = parsed
                && let Ok(target) = Target::parse(&method, uri.path(), uri.query())
            {
                proptest::prop_assert!(!target.blob.split('/').any(|s| s == ".."));
            }
        }
    }

    #[test]
    fn names() {
        let ok = [
            "/box/a",
            "/abc/x%20y",
            "/a-1/dir/sub/file.txt",
            "/box/a//b",
            "/box/caf%C3%A9",
            "/box/..a",
        ];
        for uri in ok {
            assert!(parse(Method::GET, uri).is_ok(), "{uri}");
        }
        let t = parse(Method::GET, "/box/dir%2Fname%3F").unwrap();
        assert_eq!(
            (t.container.as_str(), t.blob.as_str()),
            ("box", "dir/name?")
        );
        let bad = [
            "/ab/x",
            "/Box/x",
            "/-box/x",
            "/box-/x",
            "/bo--x/x",
            "/b_x/x",
            "/box/../etc/passwd",
            "/box/a/../../x",
            "/box/%2E%2E/x",
            "/box/a/.",
            "/box/a%00b",
            "/box/a%0Ab",
            "/box/..%5Cx",
            "/box/%FF",
        ];
        for uri in bad {
            let got = parse(Method::GET, uri).map(|_| ());
            assert!(
                matches!(
                    got,
                    Err(ErrorCode::InvalidResourceName | ErrorCode::InvalidUri)
                ),
                "{uri}: {got:?}"
            );
        }
        let long = format!("/box/{}", "x".repeat(1025));
        assert_eq!(
            parse(Method::GET, &long).map(|_| ()),
            Err(ErrorCode::InvalidResourceName)
        );
    }

    #[test]
    fn container_names_follow_azures_rules() {
        let name = |n: &str| validate_container(n).is_ok();
        for good in ["box", "a-b", "a1-b2-c3", &"x".repeat(63)] {
            assert!(name(good), "{good}");
        }
        for bad in [
            "ab",
            "a--b",
            "ab--",
            "-ab",
            "ab-",
            "aBc",
            "a_b",
            "a.b",
            &"x".repeat(64),
        ] {
            assert!(!name(bad), "{bad}");
        }
    }
}
