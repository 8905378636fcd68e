//! A write's `If-Match` once a dialect has read its own spelling of it: absent, `*`, or one
//! version. The Table service spells a tag `W/"datetime'…'"` and Cosmos DB `"…"`; both compare
//! the version a tag names with the one stored, and this is that rule, once.

/// A write's `If-Match`; `V` is what the dialect's tags name (a version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfMatch<V> {
    /// None: the write is unconditional.
    Absent,
    /// `*`: whatever is stored.
    Any,
    /// This version; `None` for a tag the dialect never gives, which matches nothing.
    Version(Option<V>),
}

impl<V: PartialEq> IfMatch<V> {
    /// Whether the request carries one.
    pub fn is_present(&self) -> bool {
        !matches!(self, Self::Absent)
    }

    /// Whether it holds while `current` is stored (`None`: nothing is).
    ///
    /// ```
    /// use ifmatch_core::precondition::IfMatch;
    ///
    /// assert!(IfMatch::<u64>::Absent.holds(None));
    /// assert!(IfMatch::Any.holds(Some(&7)));
    /// assert!(!IfMatch::<u64>::Any.holds(None));
    /// assert!(IfMatch::Version(Some(7)).holds(Some(&7)));
    /// assert!(!IfMatch::Version(Some(6)).holds(Some(&7)), "someone wrote first");
    /// assert!(!IfMatch::Version(None).holds(Some(&7)), "a tag never given");
    /// ```
    pub fn holds(&self, current: Option<&V>) -> bool {
        match (self, current) {
            (Self::Absent, _) => true,
            (Self::Any, found) => found.is_some(),
            (Self::Version(wanted), Some(version)) => wanted.as_ref() == Some(version),
            (Self::Version(_), None) => false,
        }
    }
}
