//! The ways a request is answered: a hit, a miss, a revalidation, a negotiated choice.

pub(crate) mod coding;
pub(crate) mod hit;
pub(crate) mod language;
pub(crate) mod miss;
pub(crate) mod revalidate;
