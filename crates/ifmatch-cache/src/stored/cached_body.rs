//! The body of the cache's answers.

use http_body_util::Either;

use crate::stored::entry_body::Reader;
use crate::stored::tee::Tee;

/// The body of an answer: a stored body (whole or arriving), or the inner service's (kept
/// as it passes when it has no declared length and is to be stored once whole).
pub type CachedBody<B> = Either<Reader, Tee<B>>;
