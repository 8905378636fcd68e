//! The XML of List Blobs and List Containers (`EnumerationResults`), and the paging of both:
//! prefix, marker, page size, and for blobs a delimiter that rolls names up into `BlobPrefix`
//! entries, as a directory listing does.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::SystemTime;

use ifmatch_core::lease::LeaseState;
use ifmatch_core::xml_escape;

use crate::Record;
use crate::operation::ListOptions;

/// One entry of a page: a blob, or the prefix that stands for every name under it.
pub(crate) enum Entry<'a> {
    Blob(&'a str, &'a Record),
    Prefix(String),
}

/// One page of `names` (sorted, already filtered by the prefix), and the marker of the next
/// page when there is one. With a delimiter, the names that go on past the prefix through it
/// count once, as their `BlobPrefix`; a marker that is such a prefix skips everything under it.
pub(crate) fn page<'a>(
    names: &'a [(String, Record)],
    options: &ListOptions,
) -> (Vec<Entry<'a>>, Option<String>) {
    let mut entries: Vec<Entry<'a>> = Vec::new();
    for (name, record) in names {
        if let Some(marker) = &options.marker {
            let under_marker = options
                .delimiter
                .as_deref()
                .is_some_and(|d| marker.ends_with(d) && name.starts_with(marker.as_str()));
            if name <= marker || under_marker {
                continue;
            }
        }
        let rolled = options.delimiter.as_deref().and_then(|delimiter| {
            let rest = name.get(options.prefix.len()..)?;
            let at = rest.find(delimiter)?;
            Some(format!(
                "{}{}",
                options.prefix,
                &rest[..at + delimiter.len()]
            ))
        });
        let entry = match rolled {
            Some(prefix) => {
                if matches!(entries.last(), Some(Entry::Prefix(last)) if *last == prefix) {
                    continue;
                }
                Entry::Prefix(prefix)
            }
            None => Entry::Blob(name, record),
        };
        if entries.len() == options.max_results {
            let last = match entries.last() {
                Some(Entry::Blob(name, _)) => (*name).to_owned(),
                Some(Entry::Prefix(prefix)) => prefix.clone(),
                None => unreachable!("a full page has a last entry"),
            };
            return (entries, Some(last));
        }
        entries.push(entry);
    }
    (entries, None)
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

fn next_marker_xml(xml: &mut String, next_marker: Option<&str>) {
    match next_marker {
        Some(marker) => {
            let _ = write!(xml, "<NextMarker>{}</NextMarker>", xml_escape(marker));
        }
        None => xml.push_str("<NextMarker />"),
    }
}

/// The `EnumerationResults` document of List Containers: `containers` are the page's
/// (name as the account knows it, record).
pub(crate) fn containers_results(
    endpoint: &str,
    options: &ListOptions,
    containers: &[(String, Record)],
    next_marker: Option<&str>,
    now: SystemTime,
) -> String {
    let mut xml = String::with_capacity(256 + containers.len() * 384);
    let _ = write!(
        xml,
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><EnumerationResults ServiceEndpoint=\"{}\">",
        xml_escape(endpoint)
    );
    paging_xml(&mut xml, options);
    xml.push_str("<Containers>");
    for (name, record) in containers {
        let state = record.lease.state(now);
        let _ = write!(
            xml,
            "<Container><Name>{}</Name><Properties><Last-Modified>{}</Last-Modified>\
             <Etag>{}</Etag><LeaseStatus>{}</LeaseStatus><LeaseState>{}</LeaseState>",
            xml_escape(name),
            record.last_modified_date(),
            xml_escape(&record.etag.to_string()),
            state.status_str(),
            state.as_str(),
        );
        if let Some(level) = record.public_access {
            let _ = write!(xml, "<PublicAccess>{}</PublicAccess>", level.as_str());
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

/// The `EnumerationResults` document for one page of blobs.
pub(crate) fn enumeration_results(
    container: &str,
    options: &ListOptions,
    entries: &[Entry<'_>],
    next_marker: Option<&str>,
    now: SystemTime,
) -> String {
    let mut xml = String::with_capacity(256 + entries.len() * 512);
    let _ = write!(
        xml,
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><EnumerationResults ContainerName=\"{}\">",
        xml_escape(container)
    );
    paging_xml(&mut xml, options);
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
        let state = record.lease.state(now);
        let content_type = record
            .content
            .as_ref()
            .and_then(|c| c.content_type.as_deref());
        let _ = write!(
            xml,
            "<Blob><Name>{}</Name><Properties><Last-Modified>{}</Last-Modified><Etag>{}</Etag>\
             <Content-Length>{}</Content-Length><Content-Type>{}</Content-Type>\
             <BlobType>BlockBlob</BlobType><LeaseStatus>{}</LeaseStatus><LeaseState>{}</LeaseState>",
            xml_escape(name),
            record.last_modified_date(),
            xml_escape(&record.etag.to_string()),
            record.len(),
            xml_escape(content_type.unwrap_or("application/octet-stream")),
            state.status_str(),
            state.as_str(),
        );
        if state == LeaseState::Leased {
            let mut headers = http::HeaderMap::new();
            record.lease.insert_headers(now, &mut headers);
            if let Some(duration) = headers.get(ifmatch_core::lease::headers::LEASE_DURATION) {
                let _ = write!(
                    xml,
                    "<LeaseDuration>{}</LeaseDuration>",
                    duration.to_str().unwrap_or("")
                );
            }
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
            metadata_xml(&mut xml, &record.metadata);
        }
        xml.push_str("</Blob>");
    }
    xml.push_str("</Blobs>");
    next_marker_xml(&mut xml, next_marker);
    xml.push_str("</EnumerationResults>");
    xml
}

#[cfg(test)]
mod tests {
    use super::*;
    use ifmatch_core::strong_etag;

    fn names(list: &[&str]) -> Vec<(String, Record)> {
        list.iter()
            .map(|n| {
                (
                    (*n).to_owned(),
                    Record::container(strong_etag(n.as_bytes()), SystemTime::UNIX_EPOCH),
                )
            })
            .collect()
    }

    fn shown(entries: &[Entry<'_>]) -> Vec<String> {
        entries
            .iter()
            .map(|e| match e {
                Entry::Blob(name, _) => (*name).to_owned(),
                Entry::Prefix(prefix) => format!("{prefix}*"),
            })
            .collect()
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
        let mut options = ListOptions {
            max_results: 2,
            delimiter: Some("/".into()),
            ..ListOptions::default()
        };
        let mut pages = Vec::new();
        loop {
            let (entries, next) = page(&all, &options);
            pages.push(shown(&entries));
            match next {
                Some(marker) => options.marker = Some(marker),
                None => break,
            }
        }
        assert_eq!(pages, [vec!["a.txt", "dir1/*"], vec!["dir2/*", "z.txt"]]);

        let under = names(&["dir1/b.txt", "dir1/c.txt", "dir1/sub/d.txt"]);
        let options = ListOptions {
            prefix: "dir1/".into(),
            max_results: 10,
            delimiter: Some("/".into()),
            ..ListOptions::default()
        };
        assert_eq!(
            shown(&page(&under, &options).0),
            ["dir1/b.txt", "dir1/c.txt", "dir1/sub/*"]
        );
    }
}
