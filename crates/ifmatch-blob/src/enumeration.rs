//! The XML of List Blobs and List Containers (`EnumerationResults`), and the paging of both:
//! prefix, marker, page size, and for blobs a delimiter that rolls names up into `BlobPrefix`
//! entries, as a directory listing does.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::SystemTime;

use crate::lease::LeaseState;
use ifmatch_azure::xml_escape;

use crate::operation::ListOptions;
use crate::record::Record;
use crate::record_name::{self, Qualifier};
use crate::store::Records;
use crate::store::Scan;
use crate::store::StoreError;

/// One entry of a page: a blob, or the prefix that stands for every name under it.
pub(crate) enum Entry {
    Blob(String, Box<Record>),
    Prefix(String),
}

/// One page of List Blobs, built from scans of the backend in name order, so that a page
/// costs about the page, not the container: [`Pager::from`] says where the next scan starts,
/// [`Pager::take`] takes what it found. With a delimiter, the names that go on past the prefix
/// through it count once, as their `BlobPrefix`, and the next scan starts past all of them; a
/// marker that is such a prefix skips everything under it.
pub(crate) struct Pager<'o> {
    options: &'o ListOptions,
    entries: Vec<Entry>,
    from: Option<String>,
    next_marker: Option<String>,
}

impl<'o> Pager<'o> {
    pub(crate) fn new(options: &'o ListOptions) -> Self {
        // A marker is a rolled-up prefix only if the delimiter would roll it up: a blob named
        // like one (`a/` under the prefix `a/`) is a blob, and the names after it follow.
        let from = match &options.marker {
            Some(marker) if rolled(options, marker).is_some_and(|p| p == *marker) => past(marker),
            Some(marker) => Some(format!("{marker}\0")),
            None => Some(String::new()),
        };
        // Names under the prefix, and at or after `startFrom`.
        let at_least = (options.start_from.iter()).fold(&options.prefix, |a, s| a.max(s));
        let from = from.map(|from| from.max(at_least.clone()));
        Self {
            options,
            entries: Vec::new(),
            from,
            next_marker: None,
        }
    }

    /// Where the next scan starts (names at or after it), and how many names it should
    /// bring; `None` when the page is complete.
    pub(crate) fn from(&self) -> Option<(&str, usize)> {
        let want = self.options.max_results + 1 - self.entries.len();
        self.from.as_deref().map(|from| (from, want))
    }

    /// Takes a scan's names (in order, starting at [`Pager::from`]; fewer than asked for
    /// only when no more follow).
    pub(crate) fn take(&mut self, scanned: Vec<(String, Record)>, asked: usize) {
        let exhausted = scanned.len() < asked;
        let options = self.options;
        let mut last = None;
        for (name, record) in scanned {
            last = Some(name.clone());
            if let Some(Entry::Prefix(prefix)) = self.entries.last()
                && name.starts_with(prefix.as_str())
            {
                continue;
            }
            // A snapshot, only when asked for.
            if !options.lists(record_name::split(&name).1)
                || record.deleted.is_some() && !options.deleted
            {
                continue;
            }
            // Blobs with staged blocks and no content yet, only when asked for.
            // A deletion the change feed has not published yet (no blocks either), never.
            let staged = record.staging.is_some() || !record.uncommitted.is_empty();
            if record.content.is_none() && !(options.uncommitted && staged) {
                continue;
            }
            let entry = match rolled(options, &name) {
                Some(prefix) => Entry::Prefix(prefix),
                None => Entry::Blob(name, Box::new(record)),
            };
            if self.entries.len() == options.max_results {
                self.next_marker = Some(match self.entries.last() {
                    Some(Entry::Blob(name, _)) => name.clone(),
                    Some(Entry::Prefix(prefix)) => prefix.clone(),
                    None => unreachable!("a full page has a last entry"),
                });
                self.from = None;
                return;
            }
            self.entries.push(entry);
        }
        self.from = match (exhausted, last) {
            (true, _) | (_, None) => None,
            (false, Some(last)) => match self.entries.last() {
                // Past every name under the prefix just rolled up.
                Some(Entry::Prefix(prefix)) if last.starts_with(prefix.as_str()) => past(prefix),
                // Past the other snapshots of the blob whose snapshots it skips: a scan
                // never reads more than one page of snapshots not listed.
                _ => match record_name::split(&last) {
                    (blob, Some(Qualifier::Snapshot(_))) if !options.snapshots => {
                        past(&record_name::snapshots_of(blob))
                    }
                    (blob, Some(Qualifier::Version(_))) if !options.versions => {
                        past(&record_name::versions_of(blob))
                    }
                    (blob, Some(Qualifier::Deleted(_))) if !options.deleted => {
                        past(&record_name::deleted_of(blob))
                    }
                    _ => Some(format!("{last}\0")),
                },
            },
        };
    }

    /// The page, and the marker of the next one when there is one.
    pub(crate) fn finish(self) -> (Vec<Entry>, Option<String>) {
        (self.entries, self.next_marker)
    }
}

/// One page of List Blobs of `container`, scanned from `records`: its entries, and the marker
/// of the next page when there is one.
pub(crate) async fn page<R: Records>(
    records: &R,
    container: &str,
    options: &ListOptions,
) -> Result<(Vec<Entry>, Option<String>), StoreError> {
    let mut pager = Pager::new(options);
    while let Some((from, limit)) = pager.from() {
        let prefix = &options.prefix;
        let scan = Scan {
            container,
            prefix,
            from,
            limit,
        };
        let scanned = records.list(scan).await?;
        pager.take(scanned, limit);
    }
    Ok(pager.finish())
}

/// The `BlobPrefix` that `name` rolls up into: the prefix, then the rest of the name up to
/// and with the first delimiter after it; `None` without a delimiter or when the rest has none.
fn rolled(options: &ListOptions, name: &str) -> Option<String> {
    let delimiter = options.delimiter.as_deref()?;
    let rest = name.strip_prefix(options.prefix.as_str())?;
    let at = rest.find(delimiter)?;
    Some(format!(
        "{}{}",
        options.prefix,
        &rest[..at + delimiter.len()]
    ))
}

/// The least string greater than every string that starts with `prefix`; `None` if there is
/// none.
fn past(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = (u32::from(last) + 1..=u32::from(char::MAX)).find_map(char::from_u32);
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

fn metadata_xml(xml: &mut String, metadata: &BTreeMap<String, String>) {
    xml.push_str("<Metadata>");
    for (name, value) in metadata {
        let _ = write!(xml, "<{name}>{}</{name}>", xml_escape(value));
    }
    xml.push_str("</Metadata>");
}

fn paging_xml(xml: &mut String, options: &ListOptions) {
    if !options.prefix.is_empty() {
        let _ = write!(xml, "<Prefix>{}</Prefix>", xml_escape(&options.prefix));
    }
    if let Some(marker) = &options.marker {
        let _ = write!(xml, "<Marker>{}</Marker>", xml_escape(marker));
    }
    let _ = write!(xml, "<MaxResults>{}</MaxResults>", options.max_results);
}

/// An `EnumerationResults` document's start: what it lists (`attribute`, the service's
/// endpoint or the container's name) and the paging it was asked for.
fn results_start(capacity: usize, attribute: &str, value: &str, options: &ListOptions) -> String {
    let mut xml = String::with_capacity(capacity);
    let _ = write!(
        xml,
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><EnumerationResults {attribute}=\"{}\">",
        xml_escape(value)
    );
    paging_xml(&mut xml, options);
    xml
}

fn next_marker_xml(xml: &mut String, next_marker: Option<&str>) {
    match next_marker {
        Some(marker) => {
            let _ = write!(xml, "<NextMarker>{}</NextMarker>", xml_escape(marker));
        }
        None => xml.push_str("<NextMarker />"),
    }
}

/// A container List Containers lists: its name, its version if it is a deleted one, its
/// record.
pub(crate) type ListedContainer = (String, Option<String>, Record);

/// The `EnumerationResults` document for one page of containers.
pub(crate) fn containers_results(
    endpoint: &str,
    options: &ListOptions,
    containers: &[ListedContainer],
    next_marker: Option<&str>,
    now: SystemTime,
) -> String {
    let capacity = 256 + containers.len() * 384;
    let mut xml = results_start(capacity, "ServiceEndpoint", endpoint, options);
    xml.push_str("<Containers>");
    for (name, version, record) in containers {
        let state = record.lease.state(now);
        let _ = write!(xml, "<Container><Name>{}</Name>", xml_escape(name));
        if let Some(version) = version {
            let _ = write!(
                xml,
                "<Deleted>true</Deleted><Version>{}</Version>",
                xml_escape(version)
            );
        }
        let _ = write!(
            xml,
            "<Properties><Last-Modified>{}</Last-Modified>\
             <Etag>{}</Etag><LeaseStatus>{}</LeaseStatus><LeaseState>{}</LeaseState>",
            record.last_modified_date(),
            xml_escape(&record.etag.to_string()),
            state.status_str(),
            state.as_str(),
        );
        if let Some(level) = record.public_access {
            let _ = write!(xml, "<PublicAccess>{}</PublicAccess>", level.as_str());
        }
        let (policy, hold) = record.container_protection();
        let _ = write!(
            xml,
            "<HasImmutabilityPolicy>{policy}</HasImmutabilityPolicy><HasLegalHold>{hold}</HasLegalHold>"
        );
        if let Some(deleted) = record.deleted {
            deleted_xml(&mut xml, deleted, now);
        }
        xml.push_str("</Properties>");
        if options.metadata {
            metadata_xml(&mut xml, &record.metadata);
        }
        xml.push_str("</Container>");
    }
    xml.push_str("</Containers>");
    next_marker_xml(&mut xml, next_marker);
    xml.push_str("</EnumerationResults>");
    xml
}

/// A deleted blob's or container's `DeletedTime` and `RemainingRetentionDays`.
fn deleted_xml(xml: &mut String, deleted: crate::record::Deleted, now: SystemTime) {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(deleted.at);
    let left = deleted
        .until
        .saturating_sub(crate::record::unix_seconds(now));
    let _ = write!(
        xml,
        "<DeletedTime>{}</DeletedTime><RemainingRetentionDays>{}</RemainingRetentionDays>",
        ifmatch_core::date::HttpDate::from(at),
        left.div_ceil(86_400)
    );
}

/// The `EnumerationResults` document for one page of blobs.
pub(crate) fn enumeration_results(
    container: &str,
    options: &ListOptions,
    entries: &[Entry],
    next_marker: Option<&str>,
    now: SystemTime,
) -> String {
    let capacity = 256 + entries.len() * 512;
    let mut xml = results_start(capacity, "ContainerName", container, options);
    if let Some(delimiter) = &options.delimiter {
        let _ = write!(xml, "<Delimiter>{}</Delimiter>", xml_escape(delimiter));
    }
    xml.push_str("<Blobs>");
    for entry in entries {
        let (name, record) = match entry {
            Entry::Prefix(prefix) => {
                let _ = write!(
                    xml,
                    "<BlobPrefix><Name>{}</Name></BlobPrefix>",
                    xml_escape(prefix)
                );
                continue;
            }
            Entry::Blob(name, record) => (name, record),
        };
        blob_xml(&mut xml, name, record, options, now);
    }
    xml.push_str("</Blobs>");
    next_marker_xml(&mut xml, next_marker);
    xml.push_str("</EnumerationResults>");
    xml
}

/// One blob's `<Blob>` of a listing: its name (and snapshot or version), its properties, and
/// its metadata when the listing includes it.
fn blob_xml(xml: &mut String, name: &str, record: &Record, options: &ListOptions, now: SystemTime) {
    let state = record.lease.state(now);
    let content_type = record
        .content
        .as_ref()
        .and_then(|c| c.content_type.as_deref());
    let append = record.content.as_ref().and_then(|c| c.append);
    let blob_type = record
        .content
        .as_ref()
        .map_or("BlockBlob", |c| c.blob_type());
    let (name, qualifier) = record_name::split(name);
    let _ = write!(xml, "<Blob><Name>{}</Name>", xml_escape(name));
    if record.deleted.is_some() {
        xml.push_str("<Deleted>true</Deleted>");
    }
    match (qualifier, &record.version) {
        (Some(Qualifier::Snapshot(id)), _) => {
            let _ = write!(xml, "<Snapshot>{id}</Snapshot>");
        }
        (Some(Qualifier::Version(id)), _) => {
            let _ = write!(xml, "<VersionId>{id}</VersionId>");
        }
        (None, Some(id)) if options.versions => {
            let _ = write!(
                xml,
                "<VersionId>{id}</VersionId><IsCurrentVersion>true</IsCurrentVersion>"
            );
        }
        (None | Some(Qualifier::Deleted(_)), _) => {}
    }
    let _ = write!(
        xml,
        "<Properties><Last-Modified>{}</Last-Modified><Etag>{}</Etag>\
         <Content-Length>{}</Content-Length><Content-Type>{}</Content-Type>\
         <BlobType>{}</BlobType><LeaseStatus>{}</LeaseStatus><LeaseState>{}</LeaseState>",
        record.last_modified_date(),
        xml_escape(&record.etag.to_string()),
        record.len(),
        xml_escape(content_type.unwrap_or("application/octet-stream")),
        blob_type,
        state.status_str(),
        state.as_str(),
    );
    if state == LeaseState::Leased {
        let mut headers = http::HeaderMap::new();
        record.lease.insert_headers(now, &mut headers);
        if let Some(duration) = headers.get(crate::lease::headers::LEASE_DURATION) {
            let _ = write!(
                xml,
                "<LeaseDuration>{}</LeaseDuration>",
                duration.to_str().unwrap_or("")
            );
        }
    }
    if append.is_some_and(|a| a.sealed) {
        xml.push_str("<Sealed>true</Sealed>");
    }
    if let Some(paged) = record.content.as_ref().and_then(|c| c.pages.as_ref()) {
        let _ = write!(
            xml,
            "<x-ms-blob-sequence-number>{}</x-ms-blob-sequence-number>",
            paged.sequence
        );
        if let Some(incremental) = &paged.incremental {
            xml.push_str("<IncrementalCopy>true</IncrementalCopy>");
            if let Some(id) = &incremental.destination_snapshot {
                let _ = write!(
                    xml,
                    "<CopyDestinationSnapshot>{id}</CopyDestinationSnapshot>"
                );
            }
        }
    }
    if let Some(deleted) = record.deleted {
        deleted_xml(xml, deleted, now);
    }
    if let Some(content) = &record.content {
        let p = &content.properties;
        let fields = [
            ("Content-Encoding", &p.content_encoding),
            ("Content-Language", &p.content_language),
            ("Cache-Control", &p.cache_control),
            ("Content-Disposition", &p.content_disposition),
            ("Content-MD5", &content.md5),
        ];
        for (element, value) in fields {
            if let Some(value) = value {
                let _ = write!(xml, "<{element}>{}</{element}>", xml_escape(value));
            }
        }
    }
    xml.push_str("</Properties>");
    if options.metadata {
        metadata_xml(xml, &record.metadata);
    }
    xml.push_str("</Blob>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use ifmatch_core::strong_etag;

    /// Blob records under `names`, each with content.
    fn names(list: &[&str]) -> Vec<(String, Record)> {
        list.iter()
            .map(|n| {
                let content = crate::record::Content::new(String::new(), 0, None);
                let record =
                    Record::blob(strong_etag(n.as_bytes()), SystemTime::UNIX_EPOCH, content);
                ((*n).to_owned(), record)
            })
            .collect()
    }

    fn shown(entries: &[Entry]) -> Vec<String> {
        entries
            .iter()
            .map(|e| match e {
                Entry::Blob(name, _) => name.clone(),
                Entry::Prefix(prefix) => format!("{prefix}*"),
            })
            .collect()
    }

    /// Every page of `all` as a backend would serve its scans, and how many scans it took.
    fn pages(all: &[(String, Record)], mut options: ListOptions) -> (Vec<Vec<String>>, usize) {
        let mut out = Vec::new();
        let mut scans = 0;
        loop {
            let mut pager = Pager::new(&options);
            while let Some((from, want)) = pager.from() {
                let scanned: Vec<_> = (all.iter())
                    .filter(|(n, _)| n.as_str() >= from && n.starts_with(&options.prefix))
                    .take(want)
                    .cloned()
                    .collect();
                scans += 1;
                pager.take(scanned, want);
            }
            let (entries, next) = pager.finish();
            out.push(shown(&entries));
            match next {
                Some(marker) => options.marker = Some(marker),
                None => return (out, scans),
            }
        }
    }

    #[test]
    fn a_delimiter_rolls_names_up_and_pages_never_repeat_a_prefix() {
        let all = names(&[
            "a.txt",
            "dir1/b.txt",
            "dir1/c.txt",
            "dir1/sub/d.txt",
            "dir2/e.txt",
            "z.txt",
        ]);
        let options = ListOptions {
            max_results: 2,
            delimiter: Some("/".into()),
            ..ListOptions::default()
        };
        let (top, _) = pages(&all, options);
        assert_eq!(top, [vec!["a.txt", "dir1/*"], vec!["dir2/*", "z.txt"]]);

        let options = ListOptions {
            prefix: "dir1/".into(),
            max_results: 10,
            delimiter: Some("/".into()),
            ..ListOptions::default()
        };
        assert_eq!(
            pages(&all, options).0,
            [vec!["dir1/b.txt", "dir1/c.txt", "dir1/sub/*"]]
        );
        let options = ListOptions {
            max_results: 4,
            ..ListOptions::default()
        };
        let (flat, _) = pages(&all, options);
        assert_eq!(
            flat.concat(),
            shown(
                &all.iter()
                    .map(|(n, r)| Entry::Blob(n.clone(), Box::new(r.clone())))
                    .collect::<Vec<_>>()
            )
        );
        assert_eq!(flat.len(), 2);
    }

    #[test]
    fn start_from_lists_from_a_name_on_and_a_marker_after_it_wins() {
        let all = names(&["a", "b", "c", "d/x", "d/y", "e"]);
        let options = |start: &str, marker: Option<&str>| ListOptions {
            max_results: 10,
            delimiter: Some("/".into()),
            start_from: Some(start.into()),
            marker: marker.map(Into::into),
            ..ListOptions::default()
        };
        assert_eq!(
            pages(&all, options("b", None)).0,
            [vec!["b", "c", "d/*", "e"]]
        );
        assert_eq!(pages(&all, options("bb", None)).0, [vec!["c", "d/*", "e"]]);
        assert_eq!(pages(&all, options("d/y", None)).0, [vec!["d/*", "e"]]);
        assert_eq!(pages(&all, options("b", Some("c"))).0, [vec!["d/*", "e"]]);
        assert_eq!(pages(&all, options("e", Some("a"))).0, [vec!["e"]]);
    }

    #[test]
    fn a_page_costs_the_page_not_the_container() {
        // 10,000 names under one directory and a few around it: a page of the top level
        // jumps over the directory in one scan, a flat page reads one page of names.
        let mut list: Vec<String> = (0..10_000).map(|i| format!("big/{i:05}")).collect();
        list.extend(["a".into(), "c".into(), "d/x".into()]);
        list.sort();
        let all = names(&list.iter().map(String::as_str).collect::<Vec<_>>());
        let options = ListOptions {
            max_results: 10,
            delimiter: Some("/".into()),
            ..ListOptions::default()
        };
        let (pages_, scans) = pages(&all, options);
        assert_eq!(pages_, [vec!["a", "big/*", "c", "d/*"]]);
        assert!(scans <= 4, "{scans} scans");
        let options = ListOptions {
            max_results: 100,
            ..ListOptions::default()
        };
        let mut pager = Pager::new(&options);
        let (_, want) = pager.from().unwrap();
        assert_eq!(want, 101, "one page and one name to know there is more");
        let scanned = all[..want].to_vec();
        pager.take(scanned, want);
        assert!(pager.from().is_none());
        assert_eq!(pager.finish().1.as_deref(), Some("big/00098"));
    }

    #[test]
    fn past_is_the_least_string_after_a_prefix() {
        assert_eq!(past("dir/").as_deref(), Some("dir0"));
        assert_eq!(past("a").as_deref(), Some("b"));
        assert_eq!(past("a\u{D7FF}").as_deref(), Some("a\u{E000}"));
        assert_eq!(past("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(past(""), None);
    }
}
