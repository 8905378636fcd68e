//! Why a query is refused.

/// Why a query is refused: a message that names what is wrong or not served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SqlError {
    /// What is wrong.
    pub message: String,
}

impl SqlError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}
