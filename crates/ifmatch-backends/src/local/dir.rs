//! The data directory: its layout, its lock, how it is used, and atomic file writes.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ifmatch_blob::{Key, StoreError};
use sha2::{Digest, Sha256};

use super::files::{sync_dir, tmp_path};
use super::journal;
use super::record_file::{self, Slot};

/// How a data directory is used. It is written in `DATA/mode` the first time, and a server
/// refuses to open the directory in the other mode: an embedded server keeps the records in
/// the directory and takes every object no record names for an orphan, so opening the shared
/// directory of Redis-mode instances that way would sweep their live objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One server keeps records and objects here (`ifmatch serve`).
    Embedded,
    /// Instances of the distributed mode keep their objects here, their records in Redis
    /// (`ifmatch serve --backend redis://...`).
    Shared,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Self::Embedded => "embedded",
            Self::Shared => "shared",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "embedded" => Some(Self::Embedded),
            "shared" => Some(Self::Shared),
            _ => None,
        }
    }
}

/// An open data directory: locked against other servers for as long as it lives, or shared by
/// several (the distributed mode, where records live in Redis).
#[derive(Debug)]
pub struct DataDir {
    root: PathBuf,
    mode: Mode,
    _lock: Option<File>,
}

impl DataDir {
    /// Opens (creating if missing) `root` for one embedded server: locks it, checks its mode,
    /// empties its `tmp/`, replays its records' journal and moves damaged records aside (naming
    /// each in the log).
    pub fn open(root: impl Into<PathBuf>) -> io::Result<Arc<Self>> {
        let dir = Self::lock(root.into(), Mode::Embedded)?;
        dir.clean_tmp(Duration::ZERO)?;
        let replayed = journal::recover(&dir.root)?;
        if replayed > 0 {
            tracing::info!(replayed, "replayed the records' journal");
        }
        for (path, error) in dir.quarantine()? {
            tracing::error!(
                record = %path.display(), %error,
                "a damaged record was moved to damaged/; its blob is not served"
            );
        }
        Ok(Arc::new(dir))
    }

    /// Opens (creating if missing) `root` to share it with other servers of the distributed
    /// mode: no lock, and only temporary files older than `stale` are removed (younger ones
    /// may be uploads in flight on another server).
    pub fn open_shared(root: impl Into<PathBuf>, stale: Duration) -> io::Result<Arc<Self>> {
        let root = Self::create(root.into())?;
        claim(&root, Mode::Shared)?;
        let dir = Self {
            root,
            mode: Mode::Shared,
            _lock: None,
        };
        dir.clean_tmp(stale)?;
        Ok(Arc::new(dir))
    }

    /// Refuses, as [`DataDir::open`] or [`DataDir::open_shared`] (`shared`) would, a directory
    /// used the other way, changing nothing: what a server checks before it reaches a backend.
    pub fn check_mode(root: &Path, shared: bool) -> io::Result<()> {
        let mode = if shared { Mode::Shared } else { Mode::Embedded };
        match check(root, mode) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// Opens `root` to check it, under the lock (so no server changes it meanwhile): what
    /// `ifmatch check` does. Changes nothing but what a server's start would: the records'
    /// journal is replayed onto the record files.
    pub fn open_to_check(root: impl Into<PathBuf>) -> io::Result<Self> {
        let root = root.into();
        if !root.join("containers").is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} is not an ifmatch data directory", root.display()),
            ));
        }
        let mode = fs::read_to_string(root.join("mode"))
            .ok()
            .and_then(|text| Mode::parse(&text))
            .unwrap_or(Mode::Embedded);
        let lock = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(root.join(".lock"))?;
        lock.try_lock_shared().map_err(|_| in_use(&root))?;
        if mode == Mode::Embedded {
            journal::recover(&root)?;
        }
        Ok(Self {
            root,
            mode,
            _lock: Some(lock),
        })
    }

    fn lock(root: PathBuf, mode: Mode) -> io::Result<Self> {
        let root = Self::create(root)?;
        let lock = File::create(root.join(".lock"))?;
        lock.try_lock().map_err(|_| in_use(&root))?;
        claim(&root, mode)?;
        Ok(Self {
            root,
            mode,
            _lock: Some(lock),
        })
    }

    fn create(root: PathBuf) -> io::Result<PathBuf> {
        for dir in ["containers", "objects", "tmp"] {
            fs::create_dir_all(root.join(dir))?;
        }
        Ok(root)
    }

    /// Removes temporary files older than `older_than`: uploads a crash or a failure left.
    pub fn clean_tmp(&self, older_than: Duration) -> io::Result<usize> {
        let mut removed = 0;
        for entry in fs::read_dir(self.root.join("tmp"))? {
            let entry = entry?;
            if age(&entry) < older_than {
                continue;
            }
            let path = entry.path();
            // Another server may remove it first.
            let result = if path.is_dir() {
                fs::remove_dir_all(&path)
            } else {
                fs::remove_file(&path)
            };
            match result {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(removed)
    }

    /// Moves every blob record that does not parse to `damaged/`, and answers them.
    fn quarantine(&self) -> io::Result<Vec<(PathBuf, StoreError)>> {
        let mut moved = Vec::new();
        for container in fs::read_dir(self.root.join("containers"))? {
            let container = container?.path();
            let mut files = vec![container.join("container.json")];
            if let Ok(blobs) = fs::read_dir(container.join("blobs")) {
                for entry in blobs {
                    files.push(entry?.path());
                }
            }
            for path in files {
                let parsed = if path.ends_with("container.json") {
                    read_record::<ifmatch_blob::Record>(&path).map(|_| ())
                } else {
                    read_record::<BlobFile>(&path).map(|_| ())
                };
                let Err(error) = parsed else { continue };
                let damaged = self.root.join("damaged");
                fs::create_dir_all(&damaged)?;
                let name = format!(
                    "{}-{}",
                    container.file_name().unwrap_or_default().to_string_lossy(),
                    path.file_name().unwrap_or_default().to_string_lossy()
                );
                fs::rename(&path, damaged.join(name))?;
                moved.push((path, error));
            }
        }
        Ok(moved)
    }

    /// Whether records were moved aside: then no object may be taken for an orphan, since a
    /// damaged record may name it.
    pub fn has_damaged(&self) -> bool {
        fs::read_dir(self.root.join("damaged")).is_ok_and(|mut d| d.next().is_some())
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// How the directory is used.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub(super) fn tmp_path(&self) -> PathBuf {
        tmp_path(&self.root)
    }

    pub(super) fn containers_dir(&self) -> PathBuf {
        self.root.join("containers")
    }

    pub(super) fn objects_dir(&self) -> PathBuf {
        self.root.join("objects")
    }

    pub(super) fn container_dir(&self, container: &str) -> PathBuf {
        self.in_container(container, &[])
    }

    /// A record's file: built in one buffer of its length (a commit makes this path once or
    /// twice), the blob's name as the hex of its SHA-256.
    pub(super) fn record_path(&self, key: &Key) -> PathBuf {
        let (c, file) = match key {
            Key::Container(c) => (c, "container.json"),
            Key::Blob(c, name) => {
                let mut file = [0; NAME_DIGITS + ".json".len()];
                name_digits(name, &mut file);
                file[NAME_DIGITS..].copy_from_slice(b".json");
                let file = std::str::from_utf8(&file).expect("hex digits are ASCII");
                return self.in_container(c, &["blobs", file]);
            }
        };
        self.in_container(c, &[file])
    }

    /// The file of the blocks staged for the blob under `key` under `epoch`
    /// ([`super::staged_file`]), in its container's `staged/`.
    pub(super) fn staged_path(&self, key: &Key, epoch: u64) -> Option<PathBuf> {
        let Key::Blob(c, name) = key else { return None };
        let mut digits = [0; NAME_DIGITS];
        name_digits(name, &mut digits);
        let digits = std::str::from_utf8(&digits).expect("hex digits are ASCII");
        let file = format!("{digits}-{epoch:016x}");
        Some(self.in_container(c, &["staged", &file]))
    }

    /// `parts` under container `c`'s directory, in one allocation.
    fn in_container(&self, c: &str, parts: &[&str]) -> PathBuf {
        let len = self.root.as_os_str().len() + "/containers/".len() + c.len();
        let len = len + parts.iter().map(|part| part.len() + 1).sum::<usize>();
        let mut path = PathBuf::with_capacity(len);
        path.push(&self.root);
        path.push("containers");
        path.push(c);
        for part in parts {
            path.push(part);
        }
        path
    }

    pub(super) fn object_path(&self, object: &str) -> Result<PathBuf, StoreError> {
        // Object names are ours (a simple UUID); anything else is not an object of this store.
        let ours = object.len() == 32 && object.bytes().all(|b| b.is_ascii_hexdigit());
        ours.then(|| self.objects_dir().join(object))
            .ok_or_else(|| StoreError::not_found(format_args!("object {object}")))
    }
}

/// The hex digits of a blob name's SHA-256: the name its files go by.
const NAME_DIGITS: usize = 64;

fn name_digits(name: &str, out: &mut [u8]) {
    hex::encode_to_slice(Sha256::digest(name.as_bytes()), &mut out[..NAME_DIGITS])
        .expect("room for the digits");
}

fn in_use(root: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::WouldBlock,
        format!("{} is in use by another ifmatch server", root.display()),
    )
}

/// Records `mode` in `root/mode`, or refuses when the directory is used the other way.
fn claim(root: &Path, mode: Mode) -> io::Result<()> {
    if check(root, mode)? {
        return Ok(());
    }
    let path = root.join("mode");
    // A name of this claim's own: instances of a fleet starting at once on a new shared
    // directory each write theirs and rename it over `mode` (the same text, whoever is last);
    // one shared name let one rename the file another was still writing.
    static CLAIMS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let claim = CLAIMS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = (root.join("tmp")).join(format!("mode.{}.{claim}", std::process::id()));
    fs::write(&tmp, format!("{}\n", mode.as_str()))?;
    File::open(&tmp)?.sync_all()?;
    fs::rename(&tmp, &path)?;
    sync_dir(root)
}

/// Whether `root` is already used in `mode` (`false`: in no mode yet), or why it may not be.
fn check(root: &Path, mode: Mode) -> io::Result<bool> {
    let path = root.join("mode");
    let found = match fs::read_to_string(&path) {
        Ok(text) => Some(Mode::parse(&text).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: unknown mode {:?}", path.display(), text.trim()),
            )
        })?),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // A directory from before the mode file: records mean embedded, objects alone
            // mean shared.
            let has =
                |dir: &str| fs::read_dir(root.join(dir)).is_ok_and(|mut d| d.next().is_some());
            if has("containers") {
                Some(Mode::Embedded)
            } else if has("objects") {
                Some(Mode::Shared)
            } else {
                None
            }
        }
        Err(e) => return Err(e),
    };
    match found {
        Some(found) if found != mode => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            match found {
                Mode::Shared => format!(
                    "{} holds the objects of ifmatch instances sharing records through Redis \
                     (its mode file says `shared`); a server without --backend would take them \
                     all for orphans and delete them. Serve it with --backend redis://..., or \
                     give another --data.",
                    root.display()
                ),
                Mode::Embedded => format!(
                    "{} is the data directory of one ifmatch server with its records in it \
                     (its mode file says `embedded`); instances with --backend would not see \
                     them. Serve it without --backend, or give another --data.",
                    root.display()
                ),
            },
        )),
        Some(_) => Ok(true),
        None => Ok(false),
    }
}

fn age(entry: &fs::DirEntry) -> Duration {
    entry
        .metadata()
        .and_then(|m| m.modified())
        .map(|t| t.elapsed().unwrap_or_default())
        .unwrap_or_default()
}

/// A blob's record file: the blob's name (the file is named by its hash) and its record.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct BlobFile {
    pub(super) name: String,
    pub(super) record: ifmatch_blob::Record,
}

/// Reads a record file ([`record_file`]): its record and the slot that held it. A missing file
/// is `None`; one whose slots are both torn, or whose record does not parse, is
/// [`StoreError::Corrupt`] naming it.
pub(super) fn read_record<T: serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<Option<(T, Option<Slot>)>, StoreError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let (payload, slot) = record_file::read(&bytes)
        .map_err(|e| StoreError::corrupt(format!("record {}", path.display()), e))?;
    Ok(Some((parse_record(payload, path)?, slot)))
}

/// The record a record file's payload (its JSON) holds; `path` names the file in the error.
pub(super) fn parse_record<T: serde::de::DeserializeOwned>(
    payload: &[u8],
    path: &Path,
) -> Result<T, StoreError> {
    serde_json::from_slice(payload)
        .map_err(|e| StoreError::corrupt(format!("record {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Instances of a fleet starting at once on a new shared directory each claim it: every
    /// claim succeeds (one temporary name for all let one rename the file another was still
    /// writing, and that instance failed to start).
    #[test]
    fn instances_claiming_a_new_shared_directory_at_once_all_succeed() {
        for _ in 0..20 {
            let root = tempfile::tempdir().unwrap();
            let path = root.path().to_path_buf();
            let claims: Vec<_> = (0..8)
                .map(|_| {
                    let path = path.clone();
                    std::thread::spawn(move || {
                        DataDir::open_shared(path, Duration::from_secs(3600))
                    })
                })
                .collect();
            for claim in claims {
                claim.join().unwrap().unwrap();
            }
            assert_eq!(fs::read_to_string(path.join("mode")).unwrap(), "shared\n");
        }
    }

    #[test]
    fn a_records_file_is_under_its_container_by_its_names_digest() {
        let root = tempfile::tempdir().unwrap();
        let dir = DataDir::open(root.path()).unwrap();
        let c = root.path().join("containers").join("box");
        let digits = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
        let blob = Key::Blob("box".into(), "hello".into());
        assert_eq!(
            dir.record_path(&blob),
            c.join(format!("blobs/{digits}.json"))
        );
        let container = Key::Container("box".into());
        assert_eq!(dir.record_path(&container), c.join("container.json"));
        assert_eq!(
            dir.staged_path(&blob, 10),
            Some(c.join(format!("staged/{digits}-000000000000000a")))
        );
    }
}
