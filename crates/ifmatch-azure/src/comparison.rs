//! The comparisons Azure's filter languages share: a blob index's tag conditions (`=`, `<>`,
//! `>`, ...) and the Table service's `$filter` (`eq`, `ne`, `gt`, ...), each spelled its own way.

use std::cmp::Ordering;

/// A comparison of a value with another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// Equal.
    Eq,
    /// Not equal.
    Ne,
    /// Greater.
    Gt,
    /// Greater or equal.
    Ge,
    /// Less.
    Lt,
    /// Less or equal.
    Le,
}

impl Comparison {
    /// Whether two values whose order is `ordering` (the first's to the second's) meet it.
    pub fn holds(self, ordering: Ordering) -> bool {
        match self {
            Self::Eq => ordering.is_eq(),
            Self::Ne => ordering.is_ne(),
            Self::Gt => ordering.is_gt(),
            Self::Ge => ordering.is_ge(),
            Self::Lt => ordering.is_lt(),
            Self::Le => ordering.is_le(),
        }
    }
}
