//! What every listener of `ifmatch` puts between its clients and a service: the accept loop and
//! its cap on connections (`accept.rs`, `connections.rs`), the timeouts and rate floor on heads
//! and bodies (`body_rate.rs`), lengths hyper would refuse in words of its own
//! (`huge_length.rs`), the 1xx a proxy passes on (`interim.rs`), and the rest of a refused
//! upload read while its answer goes (`drain.rs`). Slow, idle and hostile clients stop here.

pub(crate) mod accept;
mod body_rate;
mod connections;
pub(crate) mod drain;
mod huge_length;
pub(crate) mod interim;
