//! Storage accounts: their names and keys, and which one a request addresses.
//!
//! Azure names the account in the host (`{account}.blob.core.windows.net`, host-style); the
//! emulators name it in the path's first segment (`http://127.0.0.1:10000/{account}/...`,
//! path-style, what every development connection string points at). Both are served: a host
//! whose first label is an account's name followed by `.blob.` is host-style; otherwise the
//! path's first segment must name an account.

use std::fmt;
use std::sync::Arc;

use crate::error_code::CommonCode;
use crate::identity::Identity;
use crate::request::{host, split_once_ascii};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// The development account every Azure emulator serves (a published, well-known name).
pub const DEV_ACCOUNT: &str = "devstoreaccount1";

/// The development account's published key: anyone may sign with it, so it protects nothing.
pub const DEV_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// One storage account: its name and its keys (a request signed with any of them passes, so
/// keys can be rotated).
#[derive(Clone)]
pub struct Account {
    name: String,
    keys: Vec<Vec<u8>>,
    /// Whose bearer tokens are taken, and what they may do (none: bearer tokens refused).
    identity: Option<Arc<Identity>>,
}

impl fmt::Debug for Account {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the keys.
        f.debug_struct("Account")
            .field("name", &self.name)
            .field("keys", &self.keys.len())
            .finish()
    }
}

impl Account {
    /// An account named `name` with base64 `keys`.
    pub fn new(name: &str, keys: &[&str]) -> Result<Self, String> {
        let valid = (3..=24).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if !valid {
            return Err(format!(
                "account name {name:?}: 3 to 24 lowercase letters and digits"
            ));
        }
        let keys = keys
            .iter()
            .map(|key| {
                STANDARD
                    .decode(key.trim())
                    .ok()
                    .filter(|k| !k.is_empty())
                    .ok_or_else(|| format!("account {name}: a key is not base64"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if keys.is_empty() {
            return Err(format!("account {name}: no key"));
        }
        Ok(Self {
            name: name.to_owned(),
            keys,
            identity: None,
        })
    }

    /// This account taking the bearer tokens `other` takes.
    pub fn sharing_identity(mut self, other: &Account) -> Self {
        self.identity = other.identity.clone();
        self
    }

    /// Whose bearer tokens this account takes, if any.
    pub fn identity(&self) -> Option<&Identity> {
        self.identity.as_deref()
    }

    /// The account's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The account's keys, decoded.
    pub(crate) fn keys(&self) -> &[Vec<u8>] {
        &self.keys
    }
}

/// The accounts a front serves. The first is the default account: its containers are stored
/// under their own names (so a data directory from before accounts keeps its data); another
/// account's container `c` is stored as `{account}~c` (no container name holds `~`).
#[derive(Debug, Clone)]
pub struct Accounts {
    accounts: Vec<Account>,
}

impl Default for Accounts {
    /// The development account alone, with its published key.
    fn default() -> Self {
        Self {
            accounts: vec![Account::new(DEV_ACCOUNT, &[DEV_KEY]).expect("the published key")],
        }
    }
}

impl Accounts {
    /// These accounts; the first is the default.
    pub fn new(accounts: Vec<Account>) -> Result<Self, String> {
        if accounts.is_empty() {
            return Err("no account".into());
        }
        for (i, account) in accounts.iter().enumerate() {
            if accounts[..i].iter().any(|a| a.name == account.name) {
                return Err(format!("account {} given twice", account.name));
            }
        }
        Ok(Self { accounts })
    }

    /// Whose bearer tokens these accounts take, if any.
    pub fn identity(&self) -> Option<Arc<Identity>> {
        self.accounts.first().and_then(|a| a.identity.clone())
    }

    /// These accounts taking the bearer tokens `identity` trusts.
    pub fn with_identity(mut self, identity: Arc<Identity>) -> Self {
        for account in &mut self.accounts {
            account.identity = Some(identity.clone());
        }
        self
    }

    /// Reads `name:key[,key2]` entries separated by `;` or newlines (the form of
    /// `--accounts`, `IFMATCH_ACCOUNTS` and an accounts file); `#` starts a comment line.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut accounts = Vec::new();
        for entry in text.split(['\n', ';']) {
            let entry = entry.trim();
            if entry.is_empty() || entry.starts_with('#') {
                continue;
            }
            let (name, keys) = entry
                .split_once(':')
                .ok_or_else(|| format!("{entry:?}: expected name:key"))?;
            let keys: Vec<&str> = keys.split(',').collect();
            accounts.push(Account::new(name.trim(), &keys)?);
        }
        Self::new(accounts)
    }

    /// The account named `name`.
    pub fn get(&self, name: &str) -> Option<&Account> {
        self.accounts.iter().find(|a| a.name == name)
    }

    /// Every account, the default first.
    pub fn iter(&self) -> impl Iterator<Item = &Account> {
        self.accounts.iter()
    }

    /// The name a container of `account` is stored under.
    pub fn stored(&self, account: &Account, container: &str) -> String {
        if account.name == self.accounts[0].name {
            container.to_owned()
        } else {
            format!("{}~{container}", account.name)
        }
    }

    /// The name `account` knows a stored container by; `None` when it is another account's.
    pub fn name_in(&self, account: &Account, stored: &str) -> Option<String> {
        let default = account.name == self.accounts[0].name;
        match stored.split_once('~') {
            None if default => Some(stored.to_owned()),
            Some((owner, name)) if owner == account.name && !default => Some(name.to_owned()),
            _ => None,
        }
    }

    /// Which account a request to the service named `service` (`blob`, `queue`, `table`)
    /// addresses, and the rest of its path (starting with `/`): by its host
    /// (`{account}.{service}.…`), else by its path's first segment.
    pub fn locate<'a>(
        &self,
        service: &str,
        host: Option<&str>,
        path: &'a str,
    ) -> Result<(&Account, &'a str, Style), CommonCode> {
        if let Some(host) = host
            && let Some((first, rest)) = split_once_ascii(host, b'.')
            && rest
                .strip_prefix(service)
                .is_some_and(|r| r.starts_with('.'))
            && let Some(account) = self.get(first)
        {
            return Ok((account, path, Style::Host));
        }
        let path = path.strip_prefix('/').ok_or(CommonCode::InvalidUri)?;
        let (name, rest) = match split_once_ascii(path, b'/') {
            Some((name, _)) => (name, &path[name.len()..]),
            None => (path, "/"),
        };
        let account = self.get(name).ok_or(CommonCode::InvalidUri)?;
        Ok((account, rest, Style::Path))
    }

    /// The connection string for `account` at `endpoint` (`http://host:port`), in the form
    /// the Azure SDKs read. Only the published development key is written out; another key
    /// is a secret, shown as `<key>`.
    pub fn connection_string(&self, account: &Account, endpoint: &str) -> String {
        self.connection_string_with(account, endpoint, None, None)
    }

    /// [`Accounts::connection_string`] naming the Table service's endpoint too.
    pub fn connection_string_with(
        &self,
        account: &Account,
        endpoint: &str,
        tables: Option<&str>,
        queues: Option<&str>,
    ) -> String {
        let key = account
            .keys
            .first()
            .map(|k| STANDARD.encode(k))
            .unwrap_or_default();
        let key = if key == DEV_KEY {
            key
        } else {
            "<key>".to_owned()
        };
        let name = &account.name;
        let protocol = if endpoint.starts_with("https:") {
            "https"
        } else {
            "http"
        };
        let mut text = format!(
            "DefaultEndpointsProtocol={protocol};AccountName={name};AccountKey={key};BlobEndpoint={endpoint}/{name};"
        );
        if let Some(queues) = queues {
            text.push_str(&format!("QueueEndpoint={queues}/{name};"));
        }
        if let Some(tables) = tables {
            text.push_str(&format!("TableEndpoint={tables}/{name};"));
        }
        text
    }
}

/// How a request named its account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// In the host: `{account}.blob.{domain}`.
    Host,
    /// In the path's first segment, as the emulators serve.
    Path,
}

impl Style {
    /// The root of `account` as the request `parts` named it, without a closing `/`:
    /// `{scheme}://{host}{mount}`, and `/{account}` after it when named in the path. The
    /// scheme is `https` when the request came over HTTPS (`https`).
    pub fn root(
        self,
        parts: &http::request::Parts,
        https: bool,
        mount: &str,
        account: &Account,
    ) -> String {
        let scheme = if https { "https" } else { "http" };
        let host = host(parts).unwrap_or("");
        match self {
            Self::Host => format!("{scheme}://{host}{mount}"),
            Self::Path => format!("{scheme}://{host}{mount}/{}", account.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_name_their_account_by_host_or_by_path() {
        let accounts =
            Accounts::parse("devstoreaccount1:AAAA; other:BBBB,CCCC\n# a comment\n").unwrap();
        let (a, rest, style) = accounts
            .locate("blob", Some("127.0.0.1:10000"), "/devstoreaccount1/box/a/b")
            .unwrap();
        assert_eq!(
            (a.name(), rest, style),
            ("devstoreaccount1", "/box/a/b", Style::Path)
        );
        let (a, rest, style) = accounts
            .locate("blob", Some("other.blob.localhost:8787"), "/box/a")
            .unwrap();
        assert_eq!((a.name(), rest, style), ("other", "/box/a", Style::Host));
        let (_, rest, _) = accounts.locate("blob", None, "/other").unwrap();
        assert_eq!(rest, "/");
        // A host-style host of an unknown account falls back to the path.
        let (a, _, style) = accounts
            .locate("blob", Some("nobody.blob.localhost"), "/other/box")
            .unwrap();
        assert_eq!((a.name(), style), ("other", Style::Path));
        for path in ["/box/a", "/", "", "/devstoreaccount/box"] {
            assert_eq!(
                accounts.locate("blob", None, path).map(|_| ()),
                Err(CommonCode::InvalidUri),
                "{path}"
            );
        }
        assert_eq!(
            accounts.stored(accounts.get("other").unwrap(), "box"),
            "other~box"
        );
        assert_eq!(
            accounts.stored(accounts.get("devstoreaccount1").unwrap(), "box"),
            "box"
        );
    }

    #[test]
    fn bad_configurations_say_why() {
        for bad in [
            "",
            "x:AAAA",
            "Upper:AAAA",
            "name",
            "name:***",
            "a1b:AAAA;a1b:AAAA",
        ] {
            assert!(Accounts::parse(bad).is_err(), "{bad:?}");
        }
        let text = format!("{:?}", Accounts::default());
        assert!(!text.contains(DEV_KEY), "no key in Debug: {text}");
    }
}
