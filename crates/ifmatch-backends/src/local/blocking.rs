//! File work on tokio's blocking pool, for the local backends.

use ifmatch_blob::StoreError;

/// Runs blocking file work on tokio's blocking pool.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(std::io::Error::other)?
}
