//! The Queue service's XML: the message a Put or Update Message sends, and the lists the
//! answers carry.

use std::fmt::Write;

use ifmatch_azure::auth::StoredPolicy;
use ifmatch_azure::xml_escape;
use quick_xml::events::Event;

use crate::failure::{ErrorCode, Failure, Result};
use crate::messages::{MAX_MESSAGE, Message};
use crate::queues::Queue;

/// The most stored access policies a queue has.
const MAX_POLICIES: usize = 5;

/// The declaration every body starts with.
const DECLARATION: &str = "<?xml version=\"1.0\" encoding=\"utf-8\"?>";

fn invalid(detail: &str) -> Failure {
    Failure::new(ErrorCode::InvalidXmlDocument, detail.to_owned())
}

/// The text of `<QueueMessage><MessageText>...</MessageText></QueueMessage>`, unescaped: at
/// most 64 KiB (400 `MessageTooLarge` past it), text XML can carry.
pub(crate) fn message_text(body: &[u8]) -> Result<String> {
    let wrong =
        || invalid("A message is <QueueMessage><MessageText>text</MessageText></QueueMessage>.");
    let mut reader = quick_xml::Reader::from_reader(body);
    let mut depth = Vec::new();
    let mut text: Option<String> = None;
    loop {
        let event = reader.read_event().map_err(|_| wrong())?;
        match event {
            Event::Decl(_) | Event::Comment(_) | Event::PI(_) => {}
            Event::Start(e) => {
                let name = e.local_name().as_ref().to_vec();
                match (depth.len(), name.as_slice()) {
                    (0, b"QueueMessage") => {}
                    (1, b"MessageText") if text.is_none() => text = Some(String::new()),
                    _ => return Err(wrong()),
                }
                depth.push(name);
            }
            Event::Empty(e) => match (depth.len(), e.local_name().as_ref()) {
                (1, b"MessageText") if text.is_none() => text = Some(String::new()),
                _ => return Err(wrong()),
            },
            Event::End(_) => {
                depth.pop();
            }
            Event::Text(t) if depth.len() == 2 => {
                let decoded = t.decode().map_err(|_| wrong())?;
                text.get_or_insert_default().push_str(&decoded);
            }
            Event::GeneralRef(entity) if depth.len() == 2 => {
                let resolved = resolve(&entity).ok_or_else(wrong)?;
                text.get_or_insert_default().push_str(&resolved);
            }
            Event::Text(t) if t.iter().all(u8::is_ascii_whitespace) => {}
            Event::Eof if depth.is_empty() => break,
            _ => return Err(wrong()),
        }
        if text.as_ref().is_some_and(|t| t.len() > MAX_MESSAGE) {
            return Err(ErrorCode::MessageTooLarge.into());
        }
    }
    text.ok_or_else(wrong)
}

/// The answer of Put Message: the message's id, times and receipt.
pub(crate) fn put_answer(message: &Message) -> String {
    let mut out = format!("{DECLARATION}<QueueMessagesList><QueueMessage>");
    let _ = write!(
        out,
        "<MessageId>{}</MessageId><InsertionTime>{}</InsertionTime><ExpirationTime>{}</ExpirationTime><PopReceipt>{}</PopReceipt><TimeNextVisible>{}</TimeNextVisible>",
        message.id,
        date(message.inserted),
        date(message.expires),
        xml_escape(&message.receipt),
        date(message.visible),
    );
    out.push_str("</QueueMessage></QueueMessagesList>");
    out
}

/// The answer of Get Messages (`peek` false: with receipts and visible times) or Peek
/// Messages.
pub(crate) fn messages_answer(messages: &[Message], peek: bool) -> String {
    let mut out = format!("{DECLARATION}<QueueMessagesList>");
    for m in messages {
        let _ = write!(
            out,
            "<QueueMessage><MessageId>{}</MessageId><InsertionTime>{}</InsertionTime><ExpirationTime>{}</ExpirationTime>",
            m.id,
            date(m.inserted),
            date(m.expires)
        );
        if !peek {
            let _ = write!(
                out,
                "<PopReceipt>{}</PopReceipt><TimeNextVisible>{}</TimeNextVisible>",
                xml_escape(&m.receipt),
                date(m.visible)
            );
        }
        let _ = write!(
            out,
            "<DequeueCount>{}</DequeueCount><MessageText>{}</MessageText></QueueMessage>",
            m.dequeues,
            xml_escape(&m.text)
        );
    }
    out.push_str("</QueueMessagesList>");
    out
}

/// The answer of List Queues.
pub(crate) fn list_answer(
    endpoint: &str,
    options: &crate::operation::ListOptions,
    queues: &[(String, Queue)],
    next: Option<&str>,
) -> String {
    let mut out = format!(
        "{DECLARATION}<EnumerationResults ServiceEndpoint=\"{}\">",
        xml_escape(endpoint)
    );
    let _ = write!(
        out,
        "<Prefix>{}</Prefix><Marker>{}</Marker><MaxResults>{}</MaxResults><Queues>",
        xml_escape(&options.prefix),
        xml_escape(&options.marker),
        options.max_results
    );
    for (name, queue) in queues {
        let _ = write!(out, "<Queue><Name>{name}</Name>");
        if options.metadata {
            out.push_str("<Metadata>");
            for (key, value) in &queue.metadata {
                let _ = write!(out, "<{key}>{}</{key}>", xml_escape(value));
            }
            out.push_str("</Metadata>");
        }
        out.push_str("</Queue>");
    }
    let _ = write!(
        out,
        "</Queues><NextMarker>{}</NextMarker></EnumerationResults>",
        next.unwrap_or_default()
    );
    out
}

/// A queue's stored access policies, read and checked: `<SignedIdentifiers>` of at most five
/// `<SignedIdentifier>`s, each an `<Id>` of 1 to 64 characters, unique, and an `<AccessPolicy>`
/// whose `<Start>` and `<Expiry>` are ISO 8601 times and whose `<Permission>` is letters of
/// `raup`. Empty text is no policy.
pub(crate) fn policies(body: &[u8]) -> Result<Vec<(String, StoredPolicy)>> {
    let text = std::str::from_utf8(body).map_err(|_| invalid("The access policy is not UTF-8."))?;
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let wrong = || invalid("The access policy is not <SignedIdentifiers> XML.");
    let mut reader = quick_xml::Reader::from_str(text);
    let mut path: Vec<Vec<u8>> = Vec::new();
    let mut root = false;
    let mut policies: Vec<(String, StoredPolicy)> = Vec::new();
    let mut value = String::new();
    loop {
        match reader.read_event().map_err(|_| wrong())? {
            Event::Start(e) => {
                let name = e.local_name().as_ref().to_vec();
                match (path.len(), name.as_slice()) {
                    (0, b"SignedIdentifiers") => root = true,
                    (1, b"SignedIdentifier") => {
                        policies.push(Default::default());
                        if policies.len() > MAX_POLICIES {
                            return Err(invalid("A queue has at most five signed identifiers."));
                        }
                    }
                    _ => {}
                }
                path.push(name);
                value.clear();
            }
            Event::Empty(e)
                if path.is_empty() && e.local_name().as_ref() == b"SignedIdentifiers" =>
            {
                root = true
            }
            Event::Text(t) => value.push_str(&t.decode().map_err(|_| wrong())?),
            Event::GeneralRef(entity) => value.push_str(&resolve(&entity).ok_or_else(wrong)?),
            Event::End(_) => {
                let name = path.pop().unwrap_or_default();
                let inside: Vec<&[u8]> = path.iter().map(Vec::as_slice).collect();
                if let Some((id, policy)) = policies.last_mut() {
                    let field = value.trim().to_owned();
                    match (inside.as_slice(), name.as_slice()) {
                        ([_, b"SignedIdentifier"], b"Id") => *id = field,
                        ([_, _, b"AccessPolicy"], b"Start") => policy.start = Some(field),
                        ([_, _, b"AccessPolicy"], b"Expiry") => policy.expiry = Some(field),
                        ([_, _, b"AccessPolicy"], b"Permission") => {
                            policy.permissions = Some(field)
                        }
                        _ => {}
                    }
                }
                value.clear();
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !root {
        return Err(invalid("An access policy is <SignedIdentifiers>."));
    }
    for (i, (id, policy)) in policies.iter().enumerate() {
        if id.is_empty() || id.chars().count() > 64 {
            return Err(invalid("A signed identifier's Id is 1 to 64 characters."));
        }
        if policies[..i].iter().any(|(other, _)| other == id) {
            return Err(invalid("Each signed identifier's Id is its own."));
        }
        let times = [&policy.start, &policy.expiry];
        if times
            .into_iter()
            .flatten()
            .any(|t| !t.is_empty() && !StoredPolicy::valid_time(t))
        {
            return Err(invalid(
                "An access policy's Start and Expiry are ISO 8601 UTC times.",
            ));
        }
        if (policy.permissions.as_deref().unwrap_or_default().chars()).any(|c| !"raup".contains(c))
        {
            return Err(invalid("A queue's access policy permits letters of raup."));
        }
    }
    // An element left empty is a field the policy does not set.
    for (_, policy) in &mut policies {
        for field in [
            &mut policy.start,
            &mut policy.expiry,
            &mut policy.permissions,
        ] {
            if field.as_deref() == Some("") {
                *field = None;
            }
        }
    }
    Ok(policies)
}

/// The character an entity reference in text stands for: `&#233;` or a predefined one.
fn resolve(entity: &quick_xml::events::BytesRef<'_>) -> Option<String> {
    match entity.resolve_char_ref() {
        Ok(Some(c)) => Some(c.to_string()),
        Ok(None) => {
            let name = entity.decode().ok()?;
            quick_xml::escape::resolve_predefined_entity(&name).map(str::to_owned)
        }
        Err(_) => None,
    }
}

/// The service's properties when none were set: logging, metrics and CORS off.
pub(crate) fn default_service_properties() -> String {
    format!(
        "{DECLARATION}<StorageServiceProperties><Logging><Version>1.0</Version><Read>false</Read><Write>false</Write><Delete>false</Delete><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></Logging><HourMetrics><Version>1.0</Version><Enabled>false</Enabled><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></HourMetrics><MinuteMetrics><Version>1.0</Version><Enabled>false</Enabled><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></MinuteMetrics><Cors /></StorageServiceProperties>"
    )
}

/// Get Queue Service Stats, as Azurite answers it: a primary that is always live.
pub(crate) fn service_stats(now: std::time::SystemTime) -> String {
    format!(
        "{DECLARATION}<StorageServiceStats><GeoReplication><Status>live</Status><LastSyncTime>{}</LastSyncTime></GeoReplication></StorageServiceStats>",
        httpdate::fmt_http_date(now)
    )
}

/// An instant in microseconds since the Unix epoch as an HTTP date (the end of time for
/// `i64::MAX`, a message that never expires: Azure's 31 Dec 9999).
pub(crate) fn date(micros: i64) -> String {
    const END: i64 = 253_402_300_799; // 9999-12-31T23:59:59Z
    let seconds = (micros / 1_000_000).clamp(0, END);
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds as u64);
    httpdate::fmt_http_date(time)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_body_is_read_unescaped_and_bounded() {
        let body = b"<?xml version=\"1.0\"?><QueueMessage><MessageText>a &amp; b &lt;c&gt; &#233;</MessageText></QueueMessage>";
        assert_eq!(message_text(body).unwrap(), "a & b <c> \u{e9}");
        assert_eq!(
            message_text(b"<QueueMessage><MessageText/></QueueMessage>").unwrap(),
            ""
        );
        for wrong in [
            &b"text"[..],
            b"<QueueMessage></QueueMessage>",
            b"<Other><MessageText>x</MessageText></Other>",
        ] {
            assert_eq!(message_text(wrong).unwrap_err().code, "InvalidXmlDocument");
        }
        let at = |n: usize| {
            format!(
                "<QueueMessage><MessageText>{}</MessageText></QueueMessage>",
                "x".repeat(n)
            )
        };
        assert!(message_text(at(MAX_MESSAGE).as_bytes()).is_ok());
        assert_eq!(
            message_text(at(MAX_MESSAGE + 1).as_bytes())
                .unwrap_err()
                .code,
            "MessageTooLarge"
        );
    }

    #[test]
    fn stored_policies_are_read_and_their_limits_refused() {
        let acl = |id: &str, policy: &str| {
            format!(
                "<SignedIdentifiers><SignedIdentifier><Id>{id}</Id><AccessPolicy>{policy}\
                 </AccessPolicy></SignedIdentifier></SignedIdentifiers>"
            )
        };
        let read = policies(
            acl(
                &"i".repeat(64),
                "<Start>2026-01-01T00:00:00Z</Start><Expiry /><Permission>rp</Permission>",
            )
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(read[0].0.len(), 64);
        assert_eq!(read[0].1.start.as_deref(), Some("2026-01-01T00:00:00Z"));
        assert_eq!(read[0].1.expiry, None, "an empty element sets nothing");
        assert_eq!(read[0].1.permissions.as_deref(), Some("rp"));
        for wrong in [
            acl(&"i".repeat(65), ""),
            acl("", ""),
            acl("a", "<Permission>rw</Permission>"),
            acl("a", "<Expiry>tomorrow</Expiry>"),
            "<Other />".to_owned(),
        ] {
            let refused = policies(wrong.as_bytes()).unwrap_err();
            assert_eq!(refused.code, "InvalidXmlDocument", "{wrong}");
        }
        assert!(policies(b"").unwrap().is_empty());
    }

    #[test]
    fn dates_reach_the_end_of_time() {
        assert_eq!(date(i64::MAX), "Fri, 31 Dec 9999 23:59:59 GMT");
        assert_eq!(date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    }
}
