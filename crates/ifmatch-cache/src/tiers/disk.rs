//! The disk tier: every stored response, once its body is whole, is also written to a file of
//! its own under the cache directory, and found there again once the memory tier let it go or
//! the process restarted.
//!
//! **Whole or absent.** A file is written under `tmp/` and renamed into `entries/` only once
//! all of it is written: a process killed at any point (SIGKILL included) leaves a whole file
//! or none, and `tmp/` is emptied at the next start. Each file ends with the SHA-256 of what
//! precedes it, checked whenever it is read: a file torn by a power loss (the tier does not
//! fsync; a cache can fetch again what it lost) is taken for absent and deleted, never served.
//!
//! **Bounded.** An index in memory (moka, weighed by file sizes against the tier's size) names
//! each key's files; what it evicts or forgets, it deletes.
//!
//! **Serving from the start.** The index is rebuilt from the headers of the files a previous
//! process left, by a thread of its own, one subdirectory of `entries/` at a time (in order),
//! while the tier serves: a key is a miss until its subdirectory is indexed, and the start
//! does not wait for a read of every file. What is forgotten meanwhile is deleted from disk at
//! once all the same: a key's files are found by their names (see [`Disk::invalidate`]), a
//! prefix's among the files not yet indexed are all deleted, their keys being unknown unread.
//! Of two files a previous process left for the same variant (a kill between placing one and
//! deleting the other), the newer is kept.
//!
//! **Never stale after a write, a crash included.** An invalidation bumps its key's
//! generation and deletes its files before it returns (so before the write's answer leaves),
//! under the lock every change of the index takes. A file is renamed into `entries/` under that
//! lock, only if its key's generation is still the one it was stored under; a response read
//! back from disk is put in memory only if its key's generation has not moved meanwhile. So a
//! file a write made stale is never in `entries/` once the write is answered, whenever the
//! process dies. (An eviction deletes its files a moment after the index lets them go: a crash
//! in that moment can leave one behind, which a later invalidation of its key, not knowing
//! it, would not delete; a window of microseconds, once per eviction.)
//!
//! File layout: `ifmatch-cache 1\n`, the length of the head (8 bytes, little-endian), the head
//! (JSON: the key, what the store needs to serve it, its policy), the body's length and the
//! body, then the SHA-256 of all of it. File name: `entries/`, the first two hex digits of the
//! key's SHA-256, `/`, all of them, then the time it was written, a count, and the time the
//! tier was opened (`digest-stamp-n-opened`, in hex).

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http_cache_semantics::CachePolicy;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::rules::freshness::Freshness;
use crate::stored::entry::Stored;
use crate::stored::entry_body::StoredBody;
use crate::tiers::disk_writer::{self, DiskWriter};

const MAGIC: &[u8] = b"ifmatch-cache 1\n";

/// The files of one key, the most recent first.
type Files = Arc<Vec<Arc<OnDisk>>>;

/// One file of the tier.
#[derive(Debug)]
pub(crate) struct OnDisk {
    path: PathBuf,
    size: u64,
    /// When it was written (nanoseconds since the epoch, from its name).
    stamp: u128,
    /// As in [`Stored`]: which requests it answers.
    variant: String,
    keyed: String,
}

/// What a file says of its response besides the body.
#[derive(Serialize, Deserialize)]
struct Head {
    key: String,
    variant: String,
    keyed: String,
    status: u16,
    /// The origin's `Date` (an HTTP-date: ASCII).
    date: Option<String>,
    #[serde(with = "http_serde::header_map")]
    validators: http::HeaderMap,
    #[serde(with = "http_serde::option::header_map")]
    own_fields: Option<http::HeaderMap>,
    stale: Freshness,
    fields: usize,
    policy: CachePolicy,
}

/// The part of [`Head`] the start reads.
#[derive(Deserialize)]
struct Names {
    key: String,
    variant: String,
    keyed: String,
}

/// How far the index of the files a previous process left has come.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Loading {
    /// The subdirectories of `entries/` before this one (by name) are indexed; this one and
    /// those after are not.
    Before(String),
    Done,
}

/// The disk tier of a store.
pub(crate) struct Disk {
    dir: PathBuf,
    index: moka::sync::Cache<String, Files, ifmatch_core::keyed::KeyHasher>,
    /// A bump for one key discards the in-flight writes of the others in its slot, which
    /// only costs them their copy on disk.
    generations: crate::tiers::generations::Generations,
    /// Taken by every change of the index, and by a generation's bump; what the index holds of
    /// the files a previous process left.
    changes: Mutex<Loading>,
    /// When it was opened, which the names of the files it writes end with: the others were
    /// left by a previous process.
    opened: u128,
    /// Makes file names unique within this process.
    written: AtomicU64,
    /// Files written, and writes or reads that failed.
    pub(crate) writes: AtomicU64,
    pub(crate) errors: AtomicU64,
    /// Writes the answers queued for the tier, by a thread of its own.
    pub(crate) writer: DiskWriter,
}

impl std::fmt::Debug for Disk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Disk")
            .field("dir", &self.dir)
            .field("entries", &self.index.entry_count())
            .finish_non_exhaustive()
    }
}

impl Disk {
    /// The tier in `dir` (made if missing), of at most `size` bytes of files, with the files a
    /// previous process left there, indexed by a thread of its own from now on.
    pub(crate) fn open(dir: &Path, size: u64) -> io::Result<Arc<Self>> {
        let (disk, subs) = Self::unindexed(dir, size)?;
        if !subs.is_empty() {
            let loading = disk.clone();
            std::thread::Builder::new()
                .name("ifmatch-cache-index".to_owned())
                .spawn(move || loading.load(&subs))?;
        }
        Ok(disk)
    }

    /// The tier in `dir`, the files a previous process left not indexed yet: it, and the
    /// subdirectories to index.
    fn unindexed(dir: &Path, size: u64) -> io::Result<(Arc<Self>, Vec<String>)> {
        fs::create_dir_all(dir.join("entries"))?;
        let tmp = dir.join("tmp");
        if tmp.exists() {
            fs::remove_dir_all(&tmp)?;
        }
        fs::create_dir_all(&tmp)?;
        let index = moka::sync::Cache::builder()
            .max_capacity(size)
            .weigher(|_, files: &Files| {
                let bytes = files.iter().map(|f| f.size).sum::<u64>();
                u32::try_from(bytes).unwrap_or(u32::MAX)
            })
            .eviction_listener(|_, files: Files, cause| {
                // A replaced list's dropped files are deleted by whoever replaced it.
                if cause != moka::notification::RemovalCause::Replaced {
                    for file in files.iter() {
                        let _ = fs::remove_file(&file.path);
                    }
                }
            })
            .build_with_hasher(ifmatch_core::keyed::KeyHasher::default());
        let subs = subdirectories(&dir.join("entries"))?;
        let (writer, queue) = disk_writer::queue();
        let disk = Arc::new(Self {
            dir: dir.to_owned(),
            index,
            generations: crate::tiers::generations::Generations::new(),
            changes: Mutex::new(match subs.first() {
                Some(first) => Loading::Before(first.clone()),
                None => Loading::Done,
            }),
            opened: now_stamp(),
            written: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            writer,
        });
        let tier = Arc::downgrade(&disk);
        queue.start(move |key, stored, body, generation| match tier.upgrade() {
            Some(disk) => {
                disk.write(key, stored, body, generation);
                true
            }
            None => false,
        })?;
        Ok((disk, subs))
    }

    /// Indexes the files a previous process left in the subdirectories `subs` of `entries/`
    /// (sorted), one subdirectory at a time: their heads read first, then all of them indexed
    /// under the lock at once (so that a subdirectory is indexed whole or not at all).
    fn load(&self, subs: &[String]) {
        let (started, mut files) = (std::time::Instant::now(), 0);
        for (at, sub) in subs.iter().enumerate() {
            let mut found = Vec::new();
            for entry in fs::read_dir(self.dir.join("entries").join(sub))
                .into_iter()
                .flatten()
            {
                let Ok(entry) = entry else { continue };
                let path = entry.path();
                // Written by this process: indexed when it was placed.
                if self.written_here(&path) {
                    continue;
                }
                let stamp = stamp_of(&path);
                match read_names(&path) {
                    Ok((names, size)) => found.push((names, size, path, stamp)),
                    // Deleted meanwhile (a key forgotten, a purge).
                    Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                    Err(error) => {
                        tracing::warn!(path = %path.display(), %error, "an unreadable cache file, deleted");
                        let _ = fs::remove_file(&path);
                    }
                }
            }
            files += found.len();
            let mut loading = self.lock();
            for (names, size, path, stamp) in found {
                let file = OnDisk {
                    path,
                    size,
                    stamp,
                    variant: names.variant,
                    keyed: names.keyed,
                };
                self.index_left(names.key, file);
            }
            *loading = subs
                .get(at + 1)
                .map_or(Loading::Done, |next| Loading::Before(next.clone()));
        }
        self.index.run_pending_tasks();
        let seconds = started.elapsed().as_secs_f64();
        tracing::info!(
            files,
            seconds,
            "the disk tier indexed what it held at start"
        );
    }

    /// Indexes `file` of `key`, left by a previous process, under the lock: unless `key` was
    /// forgotten since the start (then the file is deleted), and in place of an older file of
    /// the same variant (a newer one kept in its place), the most recent first.
    fn index_left(&self, key: String, file: OnDisk) {
        // Generations start at 0 with this process: a key whose generation moved was forgotten
        // since, and so was every file of it from before.
        if self.generation(&key) != 0 {
            let _ = fs::remove_file(&file.path);
            return;
        }
        let file = Arc::new(file);
        let mut dropped = None;
        self.index.entry(key).and_upsert_with(|files| {
            let mut all = files.map(|f| f.value().to_vec()).unwrap_or_default();
            let same = |f: &Arc<OnDisk>| f.variant == file.variant && f.keyed == file.keyed;
            match all.iter().position(same) {
                Some(at) if all[at].stamp >= file.stamp => dropped = Some(file.clone()),
                Some(at) => {
                    dropped = Some(all.remove(at));
                    all.push(file.clone());
                }
                None => all.push(file.clone()),
            }
            all.sort_by_key(|f| std::cmp::Reverse(f.stamp));
            Arc::new(all)
        });
        if let Some(dropped) = dropped {
            let _ = fs::remove_file(&dropped.path);
        }
    }

    /// Deletes every file of `key` in `entries/` that is not indexed yet (a previous process
    /// left it, and its subdirectory is still to be indexed), found by its name.
    fn delete_unindexed(&self, key: &str, loading: &Loading) {
        let digest = key_digest(key);
        let sub = &digest[..2];
        if !matches!(loading, Loading::Before(next) if sub >= next.as_str()) {
            return;
        }
        let dir = self.dir.join("entries").join(sub);
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let named = (path.file_name().and_then(|n| n.to_str()))
                .is_some_and(|name| name.starts_with(&digest));
            if named && !self.written_here(&path) {
                let _ = fs::remove_file(&path);
            }
        }
    }

    /// Deletes every file a previous process left that is not indexed yet: their keys are
    /// unknown until they are read.
    fn delete_all_unindexed(&self, loading: &Loading) {
        let Loading::Before(next) = loading else {
            return;
        };
        let entries = self.dir.join("entries");
        for sub in subdirectories(&entries).unwrap_or_default() {
            if sub < *next {
                continue;
            }
            for entry in fs::read_dir(entries.join(&sub))
                .into_iter()
                .flatten()
                .flatten()
            {
                let path = entry.path();
                if !self.written_here(&path) {
                    let _ = fs::remove_file(&path);
                }
            }
        }
    }

    /// Whether the file at `path` was written by this process (its name ends with the time
    /// the tier was opened).
    fn written_here(&self, path: &Path) -> bool {
        (path.file_name().and_then(|n| n.to_str()))
            .and_then(|name| name.split('-').nth(3))
            .and_then(|opened| u128::from_str_radix(opened, 16).ok())
            == Some(self.opened)
    }

    /// Whether the files a previous process left are still being indexed.
    pub(crate) fn indexing(&self) -> bool {
        *self.lock() != Loading::Done
    }

    /// Waits until the files a previous process left are indexed (for tests, which read the
    /// index right after a reopening).
    #[cfg(test)]
    pub(crate) fn wait_until_indexed(&self) {
        while self.indexing() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// The generation of `key` now: what a write or a read started now must find unchanged.
    pub(crate) fn generation(&self, key: &str) -> u64 {
        self.generations.of(key)
    }

    /// Holds every change of the index, a write's placing included, until dropped.
    #[cfg(test)]
    pub(crate) fn stall(&self) -> impl Sized + '_ {
        self.lock()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Loading> {
        self.changes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether anything of `key` is on disk.
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    /// Forgets `key`, and the writes of it under way; `also` runs under the same lock (the
    /// memory tier's own forgetting, so that no read from disk puts back what it forgot). Its
    /// files are gone from disk when it returns, those not indexed yet too.
    pub(crate) fn invalidate(&self, key: &str, also: impl FnOnce()) {
        let loading = self.lock();
        self.generations.bump(key);
        also();
        self.delete(key);
        self.delete_unindexed(key, &loading);
    }

    /// Takes `key` out of the index and deletes its files, now (under the lock).
    fn delete(&self, key: &str) {
        for file in self.index.remove(key).iter().flat_map(|files| files.iter()) {
            let _ = fs::remove_file(&file.path);
        }
    }

    /// Forgets every key that starts with `prefix`, and every write under way; `also` as in
    /// [`Disk::invalidate`]. Walks the whole index.
    pub(crate) fn invalidate_prefix(&self, prefix: &str, also: impl FnOnce()) {
        let loading = self.lock();
        self.generations.bump_all();
        also();
        for key in self.keys_with_prefix(prefix) {
            self.delete(&key);
        }
        self.delete_all_unindexed(&loading);
    }

    /// The keys on disk that start with `prefix`.
    pub(crate) fn keys_with_prefix(&self, prefix: &str) -> Vec<String> {
        (self.index.iter())
            .filter(|(key, _)| key.starts_with(prefix))
            .map(|(key, _)| String::clone(&key))
            .collect()
    }

    /// Writes `stored` (whose body is whole: `body`) as a file of `key`, and indexes it in
    /// place of the file of the same variant, if `key`'s generation is still `generation`.
    /// Blocking.
    pub(crate) fn write(&self, key: &str, stored: &Stored, body: &Bytes, generation: u64) {
        let placed = self
            .write_file(key, stored, body)
            .and_then(|(tmp, file)| self.place(key, &tmp, file, generation));
        match placed {
            Ok(true) => {
                self.writes.fetch_add(1, Ordering::Relaxed);
            }
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%key, %error, "a cached response could not be written to disk");
                self.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Renames the written file `tmp` into place as `file` and indexes it, in place of the
    /// file of the same variant, if `key`'s generation is still `generation` (else deletes
    /// it): whether it did.
    fn place(&self, key: &str, tmp: &Path, file: OnDisk, generation: u64) -> io::Result<bool> {
        let file = Arc::new(file);
        let mut dropped = Vec::new();
        let placed = {
            let _changes = self.lock();
            let current = self.generation(key) == generation;
            let renamed = current.then(|| {
                let sub = file.path.parent().unwrap_or(&self.dir);
                fs::create_dir_all(sub).and_then(|()| fs::rename(tmp, &file.path))
            });
            if let Some(Ok(())) = renamed {
                self.index.entry_by_ref(key).and_upsert_with(|files| {
                    let mut all = vec![file.clone()];
                    for old in files.iter().flat_map(|f| f.value().iter()) {
                        if old.variant == file.variant && old.keyed == file.keyed {
                            dropped.push(old.clone());
                        } else {
                            all.push(old.clone());
                        }
                    }
                    Arc::new(all)
                });
            }
            renamed.transpose()
        };
        for old in dropped {
            let _ = fs::remove_file(&old.path);
        }
        if !matches!(placed, Ok(Some(()))) {
            let _ = fs::remove_file(tmp);
        }
        placed.map(|done| done.is_some())
    }

    /// Writes the file of `stored` under `tmp/`: its path there, and what it will be once in
    /// place.
    fn write_file(
        &self,
        key: &str,
        stored: &Stored,
        body: &Bytes,
    ) -> io::Result<(PathBuf, OnDisk)> {
        let head = Head {
            key: key.to_owned(),
            variant: stored.variant.clone(),
            keyed: stored.keyed.clone(),
            status: stored.status.as_u16(),
            date: (stored.date.as_ref()).and_then(|d| d.to_str().ok().map(str::to_owned)),
            validators: stored.validators.clone(),
            own_fields: stored.own_fields.clone(),
            stale: stored.stale.clone(),
            fields: stored.fields,
            policy: CachePolicy::clone(&stored.policy),
        };
        let head = serde_json::to_vec(&head).map_err(io::Error::other)?;
        let key_digest = key_digest(key);
        let n = self.written.fetch_add(1, Ordering::Relaxed);
        let stamp = now_stamp();
        let name = format!("{key_digest}-{stamp:x}-{n:x}-{:x}", self.opened);
        let tmp = self.dir.join("tmp").join(&name);
        let mut out = io::BufWriter::new(fs::File::create(&tmp)?);
        let mut digest = Sha256::new();
        let mut put = |bytes: &[u8]| -> io::Result<()> {
            digest.update(bytes);
            out.write_all(bytes)
        };
        let written = put(MAGIC)
            .and_then(|()| put(&(head.len() as u64).to_le_bytes()))
            .and_then(|()| put(&head))
            .and_then(|()| put(&(body.len() as u64).to_le_bytes()))
            .and_then(|()| put(body))
            .and_then(|()| out.write_all(&digest.finalize()))
            .and_then(|()| out.flush());
        drop(out);
        if let Err(error) = written {
            let _ = fs::remove_file(&tmp);
            return Err(error);
        }
        let file = OnDisk {
            path: self.dir.join("entries").join(&key_digest[..2]).join(name),
            size: (MAGIC.len() + 8 + head.len() + 8 + body.len() + 32) as u64,
            stamp,
            variant: stored.variant.clone(),
            keyed: stored.keyed.clone(),
        };
        Ok((tmp, file))
    }

    /// The files of `key`, the most recent first.
    pub(crate) fn files(&self, key: &str) -> Files {
        self.index.get(key).unwrap_or_default()
    }

    /// Reads `file` of `key` back: `None` (and the key forgotten) when it is not whole.
    /// Blocking.
    pub(crate) fn read(&self, key: &str, file: &OnDisk) -> Option<Stored> {
        match read_file(&file.path) {
            Ok((head, body)) if head.key == key => Some(head.into_stored(body)),
            Ok(_) => None,
            Err(error) => {
                tracing::warn!(path = %file.path.display(), %error, "a cache file is not whole: forgotten");
                self.errors.fetch_add(1, Ordering::Relaxed);
                self.invalidate(key, || {});
                None
            }
        }
    }

    /// Puts `found` (read from disk) in memory with `put`, if `key`'s generation is still
    /// `generation`.
    pub(crate) fn restore(&self, key: &str, generation: u64, put: impl FnOnce()) -> bool {
        let _changes = self.lock();
        let current = self.generation(key) == generation;
        if current {
            put();
        }
        current
    }

    /// Keys and bytes on disk: counts the index keeps (a scrape of the metrics must not walk
    /// it).
    pub(crate) fn held(&self) -> (u64, u64) {
        self.index.run_pending_tasks();
        (self.index.entry_count(), self.index.weighted_size())
    }
}

impl Head {
    fn into_stored(self, body: Bytes) -> Stored {
        Stored {
            policy: crate::rules::lazy_policy::made(self.policy),
            status: http::StatusCode::from_u16(self.status).unwrap_or(http::StatusCode::OK),
            body: StoredBody::whole(body),
            date: self.date.and_then(|d| http::HeaderValue::from_str(&d).ok()),
            validators: self.validators,
            own_fields: self.own_fields,
            stale: self.stale,
            fields: self.fields,
            variant: self.variant,
            keyed: self.keyed,
            served: std::sync::OnceLock::new(),
            piece: None,
        }
    }
}

/// A key's SHA-256 in hex, as the layer's tags spell it: its files' names start with it, and
/// their subdirectory is its first two digits.
fn key_digest(key: &str) -> String {
    let digest = ifmatch_core::strong_etag(key.as_bytes());
    String::from_utf8_lossy(digest.opaque()).into_owned()
}

/// Nanoseconds since the epoch, now.
fn now_stamp() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
}

/// When the file at `path` was written, from its name (`digest-stamp-n-opened`, in hex; a
/// file of an earlier version has no `opened`); 0 for a name of another shape.
fn stamp_of(path: &Path) -> u128 {
    (path.file_name().and_then(|n| n.to_str()))
        .and_then(|name| name.split('-').nth(1))
        .and_then(|stamp| u128::from_str_radix(stamp, 16).ok())
        .unwrap_or(0)
}

/// The subdirectories of `entries`, by name.
fn subdirectories(entries: &Path) -> io::Result<Vec<String>> {
    let mut subs: Vec<String> = fs::read_dir(entries)?
        .flatten()
        .filter(|entry| entry.path().is_dir())
        .filter_map(|entry| entry.file_name().into_string().ok())
        .collect();
    subs.sort();
    Ok(subs)
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

/// The names in a file's head, and the file's size.
fn read_names(path: &Path) -> io::Result<(Names, u64)> {
    let mut file = fs::File::open(path)?;
    let size = file.metadata()?.len();
    let mut start = [0u8; MAGIC.len() + 8];
    file.read_exact(&mut start)?;
    if &start[..MAGIC.len()] != MAGIC {
        return Err(invalid("not a cache file"));
    }
    let len = u64::from_le_bytes(start[MAGIC.len()..].try_into().unwrap_or_default());
    if len > size {
        return Err(invalid("a head longer than the file"));
    }
    let mut head = vec![0; usize::try_from(len).map_err(|_| invalid("a head too long"))?];
    file.read_exact(&mut head)?;
    let names = serde_json::from_slice(&head).map_err(io::Error::other)?;
    Ok((names, size))
}

/// The 8-byte length at `at` in `content`; `at` goes past it.
fn length(content: &[u8], at: &mut usize) -> io::Result<usize> {
    let bytes = content
        .get(*at..*at + 8)
        .ok_or_else(|| invalid("cut short"))?;
    *at += 8;
    let len = u64::from_le_bytes(bytes.try_into().map_err(|_| invalid("cut short"))?);
    usize::try_from(len).map_err(|_| invalid("too long"))
}

/// A file's head and body, once its checksum holds.
fn read_file(path: &Path) -> io::Result<(Head, Bytes)> {
    let all = Bytes::from(fs::read(path)?);
    let too_short = || invalid("cut short");
    let (content, sum) = all.split_at(all.len().checked_sub(32).ok_or_else(too_short)?);
    if Sha256::digest(content).as_slice() != sum {
        return Err(invalid("its checksum does not hold"));
    }
    let mut at = MAGIC.len();
    if content.get(..at) != Some(MAGIC) {
        return Err(invalid("not a cache file"));
    }
    let head_len = length(content, &mut at)?;
    let head = content.get(at..at + head_len).ok_or_else(too_short)?;
    let head: Head = serde_json::from_slice(head).map_err(io::Error::other)?;
    at += head_len;
    let body_len = length(content, &mut at)?;
    if at + body_len != content.len() {
        return Err(invalid("a body of another length"));
    }
    Ok((head, all.slice(at..at + body_len)))
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::SystemTime;

    use http::{Request, Response};

    use super::*;
    use crate::policy;

    /// A stored 200 with `body`, fresh for 10 minutes, for `variant`.
    pub(crate) fn stored(body: &'static [u8], variant: &str) -> Stored {
        let asked = Request::get("http://h/a").body(()).unwrap();
        let response = Response::builder()
            .header("cache-control", "max-age=600")
            .header("etag", "\"v1\"")
            .header("date", httpdate::fmt_http_date(SystemTime::now()))
            .body(())
            .unwrap();
        let judged = policy::of(&asked, &response, SystemTime::now());
        Stored {
            status: http::StatusCode::OK,
            variant: variant.to_owned(),
            keyed: String::new(),
            served: std::sync::OnceLock::new(),
            piece: None,
            date: response.headers().get("date").cloned(),
            validators: response.headers().clone(),
            own_fields: None,
            fields: 100,
            stale: judged.stale,
            policy: judged.policy,
            body: StoredBody::whole(Bytes::from_static(body)),
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ifmatch-disk-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    /// A disk tier of `bytes` in a fresh [`scratch`] directory named for `name`.
    fn opened(name: &str, bytes: u64) -> (PathBuf, Arc<Disk>) {
        let dir = scratch(name);
        let disk = Disk::open(&dir, bytes).unwrap();
        (dir, disk)
    }

    fn write(disk: &Disk, key: &str, stored: &Stored) {
        let body = stored.body.bytes().unwrap();
        disk.write(key, stored, &body, disk.generation(key));
    }

    fn only_file(disk: &Disk, key: &str) -> PathBuf {
        let files = disk.files(key);
        assert_eq!(files.len(), 1);
        files[0].path.clone()
    }

    #[test]
    fn an_entry_survives_a_reopening_and_a_newer_variant_replaces_its_file() {
        let (dir, disk) = opened("reopen", 1 << 20);
        write(&disk, "h /a", &stored(b"first", ""));
        let first = only_file(&disk, "h /a");
        write(&disk, "h /a", &stored(b"second", ""));
        let second = only_file(&disk, "h /a");
        assert!(!first.exists(), "the replaced file is deleted");
        write(&disk, "h /a", &stored(b"gzip", "accept-encoding=gzip,\n"));
        drop(disk);
        fs::write(dir.join("tmp").join("left-by-a-kill"), b"half").unwrap();

        let disk = Disk::open(&dir, 1 << 20).unwrap();
        assert_eq!(fs::read_dir(dir.join("tmp")).unwrap().count(), 0);
        disk.wait_until_indexed();
        let files = disk.files("h /a");
        assert_eq!(files.len(), 2);
        let file = files.iter().find(|f| f.path == second).unwrap();
        let read = disk.read("h /a", file).unwrap();
        assert_eq!(read.body.bytes().unwrap(), "second");
        assert_eq!(read.validators["etag"], "\"v1\"");
        assert!(read.date.is_some());
        let now = SystemTime::now();
        let asked = Request::get("http://h/a").body(()).unwrap();
        assert!(matches!(
            read.policy.before_request(&asked, now),
            http_cache_semantics::BeforeRequest::Fresh(_)
        ));
        fs::remove_dir_all(&dir).unwrap();
    }

    /// The files of `key` in `dir`, found by their names.
    fn files_of(dir: &Path, key: &str) -> Vec<PathBuf> {
        let digest = key_digest(key);
        let sub = dir.join("entries").join(&digest[..2]);
        let mut found: Vec<PathBuf> = (fs::read_dir(sub).into_iter().flatten().flatten())
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with(&digest)
            })
            .collect();
        found.sort();
        found
    }

    #[test]
    fn what_is_forgotten_while_the_index_is_rebuilt_is_gone_from_disk_at_once() {
        let (dir, disk) = opened("rebuilt", 1 << 20);
        for key in ["h /a", "h /a2", "h /a3", "h /c/1", "h /c/2"] {
            write(&disk, key, &stored(b"kept", ""));
        }
        // A kill between placing a file and deleting the one it replaced leaves both.
        write(&disk, "h /b", &stored(b"first", ""));
        let first = only_file(&disk, "h /b");
        let kept = fs::read(&first).unwrap();
        write(&disk, "h /b", &stored(b"second", ""));
        fs::write(&first, kept).unwrap();
        assert_eq!(files_of(&dir, "h /b").len(), 2);
        // A file stamped later than the next start (a clock set back since), named as an
        // earlier version named them, is left over all the same.
        let c2 = only_file(&disk, "h /c/2");
        let later = format!("{}-{:x}-0", key_digest("h /c/2"), now_stamp() + (1 << 50));
        fs::rename(&c2, c2.with_file_name(later)).unwrap();
        drop(disk);

        // Not indexed yet: a key forgotten now loses its files now, as a write's answer must
        // not wait for the index and a kill must not bring them back.
        let (disk, subs) = Disk::unindexed(&dir, 1 << 20).unwrap();
        assert!(!disk.contains("h /a") && !disk.contains("h /b"));
        // Keys share generations by slot (a random hash): the key forgotten here is one of
        // the three written whose slot no other key of the test shares, or forgetting it
        // would forget them too.
        let others = ["h /b", "h /c/1", "h /c/2"];
        let forgotten = ["h /a", "h /a2", "h /a3"]
            .into_iter()
            .find(|key| !others.iter().any(|o| disk.generations.share_slot(key, o)))
            .expect("each of three keys sharing a slot with another: one chance in 40 million");
        disk.invalidate(forgotten, || {});
        assert!(files_of(&dir, forgotten).is_empty());
        disk.load(&subs);
        assert!(!disk.contains(forgotten));
        let b = disk.files("h /b");
        assert_eq!(b.len(), 1, "the newer of the two");
        assert_eq!(
            disk.read("h /b", &b[0]).unwrap().body.bytes().unwrap(),
            "second"
        );
        assert_eq!(files_of(&dir, "h /b").len(), 1, "the older is deleted");
        assert!(disk.contains("h /c/1") && disk.contains("h /c/2"));
        drop(disk);

        // A purge by prefix cannot know which files not indexed yet are its keys': it deletes
        // them all, and not what this process wrote.
        let (disk, subs) = Disk::unindexed(&dir, 1 << 20).unwrap();
        write(&disk, "h /d", &stored(b"new", ""));
        disk.invalidate_prefix("h /c/", || {});
        for key in ["h /b", "h /c/1", "h /c/2"] {
            assert!(files_of(&dir, key).is_empty(), "{key}");
        }
        assert_eq!(files_of(&dir, "h /d").len(), 1);
        disk.load(&subs);
        assert!(!disk.contains("h /c/1") && !disk.contains("h /b"));
        drop(disk);
        let disk = Disk::open(&dir, 1 << 20).unwrap();
        disk.wait_until_indexed();
        assert!(disk.contains("h /d"), "written after the purge");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_torn_or_damaged_file_is_never_read_and_is_deleted() {
        let (dir, disk) = opened("torn", 1 << 20);
        write(&disk, "h /a", &stored(b"0123456789", ""));
        let path = only_file(&disk, "h /a");
        let whole = fs::read(&path).unwrap();
        // Every prefix (a file torn at any byte), and every byte flipped.
        let mut damaged: Vec<Vec<u8>> = (0..whole.len()).map(|n| whole[..n].to_vec()).collect();
        for at in 0..whole.len() {
            let mut flipped = whole.clone();
            flipped[at] ^= 0x20;
            damaged.push(flipped);
        }
        for bytes in damaged {
            fs::write(&path, &bytes).unwrap();
            let file = OnDisk {
                path: path.clone(),
                size: bytes.len() as u64,
                stamp: stamp_of(&path),
                variant: String::new(),
                keyed: String::new(),
            };
            assert!(
                read_file(&path).is_err(),
                "{} bytes read as whole",
                bytes.len()
            );
            write(&disk, "h /a", &stored(b"0123456789", ""));
            let written = only_file(&disk, "h /a");
            fs::rename(&written, &path).unwrap();
            fs::write(&path, &bytes).unwrap();
            assert!(disk.read("h /a", &file).is_none());
            assert!(!disk.contains("h /a"), "forgotten");
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_write_that_an_invalidation_overtook_is_discarded() {
        let (dir, disk) = opened("overtaken", 1 << 20);
        let entry = stored(b"old", "");
        let generation = disk.generation("h /a");
        disk.invalidate("h /a", || {});
        disk.write("h /a", &entry, &Bytes::from_static(b"old"), generation);
        assert!(!disk.contains("h /a"));
        let files = fs::read_dir(dir.join("entries")).unwrap();
        let left: usize = files
            .map(|d| fs::read_dir(d.unwrap().path()).unwrap().count())
            .sum();
        assert_eq!(left, 0, "its file is deleted");
        assert_eq!(fs::read_dir(dir.join("tmp")).unwrap().count(), 0);
        assert!(!disk.restore("h /a", generation, || panic!("restored after a write")));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_tier_stays_within_its_size_deleting_what_it_evicts() {
        let (dir, disk) = opened("bounded", 64 << 10);
        static BODY: [u8; 4096] = [7; 4096];
        for n in 0..100 {
            write(&disk, &format!("h /{n}"), &stored(&BODY, ""));
        }
        let (files, bytes) = disk.held();
        assert!(bytes <= 64 << 10, "{bytes}");
        let on_disk: u64 = fs::read_dir(dir.join("entries"))
            .unwrap()
            .flat_map(|d| fs::read_dir(d.unwrap().path()).unwrap())
            .map(|f| f.unwrap().metadata().unwrap().len())
            .sum();
        assert!(
            on_disk <= 64 << 10,
            "{on_disk} bytes of files for {files} entries"
        );
        assert!(files >= 5, "{files}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
