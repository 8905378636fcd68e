//! What an account's Blob service properties (`<StorageServiceProperties>`, set by Set Blob
//! Service Properties) ask of the front: whether it keeps versions ([`crate::version`]), and
//! for how many days a deleted blob or container is kept ([`crate::soft_delete`]). They are kept in a record
//! of the account's own, among its containers' ([`service_key`]).

use crate::store::Key;

/// The name of the record that keeps an account's Blob service properties, among its
/// containers' (no container's name has a `$`).
pub const SERVICE: &str = "$service";

/// The most days a deleted blob may be kept (Azure's limit).
pub const MAX_RETENTION_DAYS: u32 = 365;

/// The most days a change feed keeps its segments (Azure's `retentionInDays`: 1 to 146,000).
pub const MAX_FEED_RETENTION_DAYS: u32 = 146_000;

/// The key of the Blob service properties of the account that owns the stored container
/// `container` (see `Accounts::stored`: another account's containers are `account~name`).
pub fn service_key(container: &str) -> Key {
    Key::Container(beside(container, SERVICE))
}

/// The stored name of the account's own record or container `name` (a `$` name no container
/// takes) beside the stored container `container`: `name`, or `account~name`.
pub fn beside(container: &str, name: &str) -> String {
    match container.split_once('~') {
        Some((account, _)) => format!("{account}~{name}"),
        None => name.to_owned(),
    }
}

/// What the properties ask.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settings {
    /// `<IsVersioningEnabled>true`.
    pub versioning: bool,
    /// `<DeleteRetentionPolicy><Enabled>true</Enabled><Days>N</Days>`: N.
    pub retention_days: Option<u32>,
    /// `<ContainerDeleteRetentionPolicy>` likewise: how many days a deleted container is kept.
    /// Azure sets it through its management API (the storage account's blob service
    /// properties), whose name the element takes; here it is one more element of these.
    pub container_retention_days: Option<u32>,
    /// `<ChangeFeed><Enabled>true</Enabled></ChangeFeed>`: the account keeps a change feed
    /// ([`crate::change_feed`]). Azure sets it through its management API too; here it is one
    /// more element of these.
    pub change_feed: bool,
    /// `<ChangeFeed><RetentionInDays>N`: how many days the feed keeps a segment (1 to
    /// [`MAX_FEED_RETENTION_DAYS`], Azure's bounds); forever without it.
    pub change_feed_days: Option<u32>,
}

impl Settings {
    /// Reads the properties `xml`: an error says what is wrong (a retention policy enabled
    /// without its days, or with days out of 1 to 365).
    pub fn of(xml: &str) -> Result<Self, String> {
        let texts = texts(xml)?;
        let text = |path: &str| texts.get(path).map(String::as_str);
        let versioning = text("IsVersioningEnabled").is_some_and(is_true);
        let days = |policy: &str| match text(&format!("{policy}/Enabled")) {
            Some(enabled) if is_true(enabled) => {
                let days = text(&format!("{policy}/Days")).and_then(|d| d.trim().parse().ok());
                match days {
                    Some(days @ 1..=MAX_RETENTION_DAYS) => Ok(Some(days)),
                    _ => Err(format!("{policy}'s Days must be 1 to {MAX_RETENTION_DAYS}")),
                }
            }
            _ => Ok(None),
        };
        Ok(Self {
            versioning,
            retention_days: days("DeleteRetentionPolicy")?,
            container_retention_days: days("ContainerDeleteRetentionPolicy")?,
            change_feed: text("ChangeFeed/Enabled").is_some_and(is_true),
            change_feed_days: match text("ChangeFeed/RetentionInDays").map(str::trim) {
                None | Some("") => None,
                Some(days) => match days.parse() {
                    Ok(days @ 1..=MAX_FEED_RETENTION_DAYS) => Some(days),
                    _ => {
                        return Err(format!(
                            "ChangeFeed's RetentionInDays must be 1 to {MAX_FEED_RETENTION_DAYS}"
                        ));
                    }
                },
            },
        })
    }
}

/// The text of each element of the properties `xml`, by its path below
/// `<StorageServiceProperties>` (`DeleteRetentionPolicy/Days`), read with quick-xml.
fn texts(xml: &str) -> Result<std::collections::HashMap<String, String>, String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let (mut path, mut out) = (Vec::<String>::new(), std::collections::HashMap::new());
    loop {
        match reader.read_event().map_err(|e| format!("not XML: {e}"))? {
            Event::Start(e) => path.push(String::from_utf8_lossy(e.local_name().as_ref()).into()),
            Event::End(_) => {
                path.pop();
            }
            Event::Text(t) if path.len() > 1 => {
                let text = t.decode().map_err(|e| format!("not XML: {e}"))?;
                out.insert(path[1..].join("/"), text.into_owned());
            }
            Event::Eof => return Ok(out),
            _ => {}
        }
    }
}

fn is_true(text: &str) -> bool {
    text.trim().eq_ignore_ascii_case("true")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_the_front_keeps() {
        assert_eq!(service_key("box"), Key::Container("$service".into()));
        assert_eq!(
            service_key("acct~box"),
            Key::Container("acct~$service".into())
        );
        let on = "<StorageServiceProperties><IsVersioningEnabled>true</IsVersioningEnabled>\
            <DeleteRetentionPolicy><Enabled>true</Enabled><Days>7</Days></DeleteRetentionPolicy>\
            <ContainerDeleteRetentionPolicy><Enabled>true</Enabled><Days>3</Days>\
            </ContainerDeleteRetentionPolicy></StorageServiceProperties>";
        let want = Settings {
            versioning: true,
            retention_days: Some(7),
            container_retention_days: Some(3),
            change_feed: false,
            change_feed_days: None,
        };
        assert_eq!(Settings::of(on), Ok(want));
        assert_eq!(
            Settings::of("<StorageServiceProperties />"),
            Ok(Settings::default())
        );
        let off = "<StorageServiceProperties><DeleteRetentionPolicy><Enabled>false</Enabled>\
            </DeleteRetentionPolicy></StorageServiceProperties>";
        assert_eq!(Settings::of(off).unwrap().retention_days, None);
        for policy in ["DeleteRetentionPolicy", "ContainerDeleteRetentionPolicy"] {
            for days in ["0", "366", "x", ""] {
                let xml = format!(
                    "<StorageServiceProperties><{policy}><Enabled>true</Enabled>\
                     <Days>{days}</Days></{policy}></StorageServiceProperties>"
                );
                assert!(Settings::of(&xml).is_err(), "{policy} {days}");
            }
        }
        let xml = "<StorageServiceProperties><DeleteRetentionPolicy><Enabled>true</Enabled>\
            <Days>365</Days></DeleteRetentionPolicy></StorageServiceProperties>";
        assert_eq!(Settings::of(xml).unwrap().retention_days, Some(365));
        // The change feed's days: its bounds, and one past each refused.
        let feed = |days: &str| {
            Settings::of(&format!(
                "<StorageServiceProperties><ChangeFeed><Enabled>true</Enabled>\
                 <RetentionInDays>{days}</RetentionInDays></ChangeFeed></StorageServiceProperties>"
            ))
        };
        assert_eq!(feed("1").unwrap().change_feed_days, Some(1));
        assert_eq!(feed("146000").unwrap().change_feed_days, Some(146_000));
        for days in ["0", "146001", "x", "-1"] {
            assert!(feed(days).is_err(), "{days}");
        }
        assert!(feed("7").unwrap().change_feed);
    }
}
