//! The rules a response is judged by, apart from where it is kept.

pub(crate) mod cache_status;
pub(crate) mod freshness;
pub(crate) mod key;
pub(crate) mod lazy_policy;
pub(crate) mod range;
pub(crate) mod received;
pub(crate) mod targeted;
pub(crate) mod unkeyed;
pub(crate) mod weights;
