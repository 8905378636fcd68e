//! File work every part of the data directory shares: a name in `tmp/`, a temporary file
//! removed unless renamed into place, a directory's fsync.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

/// A new name in the `tmp/` of the data directory `root`.
pub(super) fn tmp_path(root: &Path) -> PathBuf {
    root.join("tmp")
        .join(uuid::Uuid::new_v4().simple().to_string())
}

/// A file in `tmp/` that is removed when dropped, unless forgotten once renamed into place.
pub(super) struct TempFile(pub(super) PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Removes the file at `path`; one already gone is no error.
pub(super) fn remove_file(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}
