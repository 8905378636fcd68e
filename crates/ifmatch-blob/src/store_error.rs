//! The errors of a backend: what failed, and whether a retry may help.

use ifmatch_core::BoxError;

/// The errors of a backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// [`PutMode::Create`] found a record.
    #[error("{key} already exists")]
    AlreadyExists {
        /// The record (a `Key` as it displays).
        key: String,
    },
    /// [`PutMode::Update`] or a delete found another generation: someone else changed it.
    #[error("{key} changed concurrently")]
    Conflict {
        /// The record (a `Key` as it displays).
        key: String,
    },
    /// The record or object does not exist.
    #[error("{key} not found")]
    NotFound {
        /// The record (a `Key` as it displays) or the object (`object NAME`).
        key: String,
    },
    /// A blob record was written into a container that does not exist (any more).
    #[error("the container does not exist")]
    ContainerNotFound,
    /// The body is larger than the limit.
    #[error("the body is larger than {limit} bytes")]
    TooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
    /// The storage must know the body's length before it streams, and the request did not say
    /// (no `Content-Length`).
    #[error("the body's length must be known")]
    LengthRequired,
    /// Reading the request body failed (the client went away).
    #[error("reading the request body failed: {0}")]
    Body(#[source] BoxError),
    /// The backend cannot be reached now; retrying later may work. A change asked of it may
    /// or may not have been made (the request went out, the answer did not come back).
    #[error("the backend is unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// What the backend holds is damaged: a record that does not parse, an object shorter or
    /// longer than its record says. `what` names it (a file, a key, an object).
    #[error("{what} is damaged: {source}")]
    Corrupt {
        /// The damaged thing.
        what: String,
        /// What is wrong with it.
        #[source]
        source: BoxError,
    },
    /// The backend does not offer this operation.
    #[error("the backend does not support {0}")]
    Unsupported(&'static str),
    /// What a backend said that it should not have: a reply of a protocol it did not expect,
    /// a record it could not encode. `backend` names it (`redis`, `durable-object`, `local`).
    #[error("{backend}: {source}")]
    Generic {
        /// The backend.
        backend: &'static str,
        /// What went wrong.
        #[source]
        source: BoxError,
    },
    /// Any other I/O failure; nothing was changed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl StoreError {
    /// Whether a change that failed with this error may have been made all the same, so that
    /// what it referred to (a staged object) must be kept: only when the backend could not
    /// say. A lost compare-and-swap, a refusal or a local I/O error left nothing behind.
    pub fn may_have_landed(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }

    /// A [`StoreError::AlreadyExists`] of `key`.
    pub fn already_exists(key: impl std::fmt::Display) -> Self {
        Self::AlreadyExists {
            key: key.to_string(),
        }
    }

    /// A [`StoreError::Conflict`] on `key`.
    pub fn conflict(key: impl std::fmt::Display) -> Self {
        Self::Conflict {
            key: key.to_string(),
        }
    }

    /// A [`StoreError::NotFound`] of `key` (a record's `Key`, or `object NAME`).
    pub fn not_found(key: impl std::fmt::Display) -> Self {
        Self::NotFound {
            key: key.to_string(),
        }
    }

    /// A [`StoreError::Generic`] of `backend`.
    pub fn generic(backend: &'static str, source: impl Into<BoxError>) -> Self {
        Self::Generic {
            backend,
            source: source.into(),
        }
    }

    /// A [`StoreError::Corrupt`] for `what`.
    pub fn corrupt(what: impl std::fmt::Display, source: impl Into<BoxError>) -> Self {
        Self::Corrupt {
            what: what.to_string(),
            source: source.into(),
        }
    }
}
