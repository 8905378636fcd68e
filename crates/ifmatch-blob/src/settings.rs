//! What an account's Blob service properties (`<StorageServiceProperties>`, set by Set Blob
//! Service Properties) ask of the front: whether it keeps versions ([`crate::version`]), and
//! for how many days a deleted blob is kept ([`crate::soft_delete`]). They are kept in a record
//! of the account's own, among its containers' ([`service_key`]).

use crate::store::Key;

/// The name of the record that keeps an account's Blob service properties, among its
/// containers' (no container's name has a `$`).
pub const SERVICE: &str = "$service";

/// The most days a deleted blob may be kept (Azure's limit).
pub const MAX_RETENTION_DAYS: u32 = 365;

/// The key of the Blob service properties of the account that owns the stored container
/// `container` (see `Accounts::stored`: another account's containers are `account~name`).
pub fn service_key(container: &str) -> Key {
    match container.split_once('~') {
        Some((account, _)) => Key::Container(format!("{account}~{SERVICE}")),
        None => Key::Container(SERVICE.to_owned()),
    }
}

/// What the properties ask.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settings {
    /// `<IsVersioningEnabled>true`.
    pub versioning: bool,
    /// `<DeleteRetentionPolicy><Enabled>true</Enabled><Days>N</Days>`: N.
    pub retention_days: Option<u32>,
}

impl Settings {
    /// Reads the properties `xml`: an error says what is wrong (a retention policy enabled
    /// without its days, or with days out of 1 to 365).
    pub fn of(xml: &str) -> Result<Self, String> {
        let versioning = text(xml, "IsVersioningEnabled").is_some_and(is_true);
        let retention_days = match text(xml, "DeleteRetentionPolicy") {
            Some(policy) if text(policy, "Enabled").is_some_and(is_true) => {
                let days = text(policy, "Days").and_then(|d| d.trim().parse::<u32>().ok());
                match days {
                    Some(days @ 1..=MAX_RETENTION_DAYS) => Some(days),
                    _ => {
                        return Err(format!(
                            "DeleteRetentionPolicy's Days must be 1 to {MAX_RETENTION_DAYS}"
                        ));
                    }
                }
            }
            _ => None,
        };
        Ok(Self {
            versioning,
            retention_days,
        })
    }
}

/// The text inside the first element `name` of `xml`.
fn text<'a>(xml: &'a str, name: &str) -> Option<&'a str> {
    let start = xml.find(&format!("<{name}>"))? + name.len() + 2;
    let end = start + xml[start..].find(&format!("</{name}>"))?;
    Some(&xml[start..end])
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
            </StorageServiceProperties>";
        let want = Settings {
            versioning: true,
            retention_days: Some(7),
        };
        assert_eq!(Settings::of(on), Ok(want));
        assert_eq!(
            Settings::of("<StorageServiceProperties />"),
            Ok(Settings::default())
        );
        let off = "<DeleteRetentionPolicy><Enabled>false</Enabled></DeleteRetentionPolicy>";
        assert_eq!(Settings::of(off).unwrap().retention_days, None);
        for days in ["0", "366", "x", ""] {
            let xml = format!(
                "<DeleteRetentionPolicy><Enabled>true</Enabled><Days>{days}</Days></DeleteRetentionPolicy>"
            );
            assert!(Settings::of(&xml).is_err(), "{days}");
        }
        let xml = "<DeleteRetentionPolicy><Enabled>true</Enabled><Days>365</Days></DeleteRetentionPolicy>";
        assert_eq!(Settings::of(xml).unwrap().retention_days, Some(365));
    }
}
