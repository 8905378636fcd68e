//! The XML of List Blobs (`EnumerationResults`).

use std::fmt::Write;
use std::time::SystemTime;

use ifmatch_core::lease::LeaseState;
use ifmatch_core::xml_escape;

use crate::Record;
use crate::operation::ListOptions;

/// The `EnumerationResults` document for one page of blobs.
pub(crate) fn enumeration_results(
    container: &str,
    options: &ListOptions,
    blobs: &[(String, Record)],
    next_marker: Option<&str>,
    now: SystemTime,
) -> String {
    let mut xml = String::with_capacity(256 + blobs.len() * 512);
    let _ = write!(
        xml,
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><EnumerationResults ContainerName=\"{}\">",
        xml_escape(container)
    );
    if !options.prefix.is_empty() {
        let _ = write!(xml, "<Prefix>{}</Prefix>", xml_escape(&options.prefix));
    }
    if let Some(marker) = &options.marker {
        let _ = write!(xml, "<Marker>{}</Marker>", xml_escape(marker));
    }
    let _ = write!(
        xml,
        "<MaxResults>{}</MaxResults><Blobs>",
        options.max_results
    );
    for (name, record) in blobs {
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
        xml.push_str("</Properties></Blob>");
    }
    xml.push_str("</Blobs>");
    match next_marker {
        Some(marker) => {
            let _ = write!(xml, "<NextMarker>{}</NextMarker>", xml_escape(marker));
        }
        None => xml.push_str("<NextMarker />"),
    }
    xml.push_str("</EnumerationResults>");
    xml
}
