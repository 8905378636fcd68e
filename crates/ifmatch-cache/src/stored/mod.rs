//! One stored response: its entry, its bodies, the head of a fresh hit.

pub(crate) mod cached_body;
pub(crate) mod entry;
pub(crate) mod entry_body;
pub(crate) mod hit_head;
pub(crate) mod tee;
