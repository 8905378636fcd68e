//! What every Azure dialect of ifmatch shares, one floor above the core: the blob front, the
//! Table service, the Cosmos endpoint, the client and the Worker all stand on it.
//!
//! | concern | where |
//! |---|---|
//! | storage accounts, their keys, which one a request names | [`Account`], [`Accounts`] |
//! | Shared Key, the SAS window, account SAS, HMAC | [`auth`] |
//! | Entra ID tokens: trusted issuers, roles and their assignments, the tokens checked | [`identity`], [`roles`], [`token`], [`signature`] (the native cryptography and the development issuer: feature `tokens`) |
//! | user delegation keys and the SAS they sign | [`delegation`] |
//! | Azure Storage's error codes, and the macro each dialect declares its own with | [`CommonCode`], [`error_codes!`] |
//! | instants in ISO 8601, read and written once; each dialect's forms beside its rules | [`iso8601`] |
//! | the host's clock and randomness | [`Env`], [`ManualEnv`] |
//! | one instance's writes to a key, one at a time | [`Turns`] |
//! | the compare-and-swap loop of every front | [`swap::Attempts`] |
//! | the headers every answer carries, and the operation's name beside it | [`REQUEST_ID`], [`ERROR_CODE`], [`OperationName`], [`Named`] |
//! | what a host knows of a request's client | [`Client`] |
//! | a request's body read whole, up to a dialect's limit, for every host | [`WholeBody`], [`answer_whole`] |
//!
//! ```
//! use ifmatch_azure::{Accounts, DEV_ACCOUNT, auth};
//!
//! let accounts = Accounts::default();
//! let account = accounts.get(DEV_ACCOUNT).unwrap();
//! assert_eq!(account.name(), "devstoreaccount1");
//! assert!(!auth::verify(account, "GET\n", "not a signature"));
//! ```

mod account;
pub mod auth;
mod comparison;
pub mod cors;
pub mod delegation;
mod env;
mod error_code;
mod headers;
pub mod identity;
pub mod inflight;
pub mod iso8601;
pub mod metadata;
mod request;
pub mod roles;
pub mod service_properties;
mod serving;
pub mod signature;
pub mod swap;
pub mod token;
mod turns;
mod whole_body;

pub use account::{Account, Accounts, DEV_ACCOUNT, DEV_KEY, Style};
pub use comparison::Comparison;
#[cfg(feature = "system")]
pub use env::SystemEnv;
pub use env::{Env, ManualEnv};
pub use error_code::{CommonCode, is_xml_text, xml_error_body, xml_escape};
pub use headers::{
    CONTENT_MD5, ERROR_CODE, MS_VERSION, Named, OperationName, REQUEST_ID, X_MS_DATE,
    answered_version, request_id, stamp,
};
pub use request::{Client, host, split_once_ascii};
pub use serving::Serving;
pub use turns::Turns;
pub use whole_body::{Answer, WholeBody, answer_whole};
