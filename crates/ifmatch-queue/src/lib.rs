//! The Azure Queue Storage dialect of ifmatch: queues, and messages with their pop receipts,
//! visibility timeouts and dequeue counts, as Microsoft's REST reference documents them and
//! the official SDKs speak them, over the compare-and-swap of the Table backends (memory, the
//! local disk, Redis, a bucket, a Worker's Durable Objects), so that every backend serves
//! queues with no code of its own.
//!
//! Queues are the fourth kind of optimistic concurrency Azure Storage has: a message's pop
//! receipt is its ETag (Update and Delete Message must carry the latest one), and its
//! visibility timeout is its lease (a message a consumer got is invisible to the others until
//! it expires). How they are kept: [`messages`] and [`queues`].
//!
//! Where this server and Azure differ: a queue SAS may not name a stored access policy (`si`;
//! they are kept and answered, not applied), and `x-ms-approximate-messages-count` counts at
//! most [`messages::MAX_COUNTED`].

pub mod auth;
pub mod endpoint;
pub mod failure;
pub mod messages;
pub mod operation;
pub mod queues;
mod xml;

pub use endpoint::Endpoint;
pub use failure::{ErrorCode, Failure};
pub use operation::{Operation, Target};
