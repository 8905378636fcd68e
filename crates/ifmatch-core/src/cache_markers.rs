//! The marks a shared cache inside the layer (`ifmatch-cache`) and the layer put on what
//! passes between them.

/// Marks an answer a shared cache inside the layer stored fresh, or served fresh from its
/// store, under a tag the origin gave: until it goes stale that cache answers the key's
/// conditional requests itself, and then asks the origin, as the origin's freshness says. The
/// `ifmatch_tower::ConditionalLayer` remembers no such answer: a second memory of
/// it would cost every miss an insert, and would answer 304 after the origin's freshness ran
/// out.
#[derive(Clone, Copy, Debug)]
pub struct FreshInSharedCache;

/// Marks a request a shared cache is to pass to the inner service untouched: not answered from
/// its store, its answer not stored (`Cache-Status: fwd=bypass`). For a request whose answer
/// depends on a field no stored response could have been chosen by (a digest of a part that
/// only the origin computes, say: Azure's `x-ms-range-get-content-md5`), and for the layer's
/// own GET that learns a resource's current version before a write. An unsafe method's
/// success still invalidates its target.
#[derive(Clone, Copy, Debug)]
pub struct BypassSharedCache;
