//! The records' journal (`DATA/journal`): every record commit is appended to it, and commits
//! that arrive together share one `fdatasync` (a group commit), where each record file was
//! synced alone. Under many writers a sync carries many commits; etcd's raft log and every
//! database's write-ahead log work so.
//!
//! ```text
//! block 0:   "ifmJ" | generation u64 | SHA-256(generation)
//! from 4096: entry*   entry: "ifmE" | generation u64 | length u32
//!                            | SHA-256(generation, length, body) | body
//!                     body:  0 | path length u16 | path | record file payload   (a put)
//!                            1 | path length u16 | path                          (a delete)
//!                            2 | path length u16 | path                (a directory's delete)
//! ```
//!
//! One thread owns the journal. It takes the commits waiting (at most [`MOST_GROUPED`]),
//! prepares those that need a new file (written to `tmp/`, unsynced: a full disk refuses the
//! commit before anything is journaled), appends them in one write and syncs it; only then does
//! it settle them and answer each. A commit is acknowledged once its entry is durable, and seen
//! by readers only then. Settling a new file renames it into place and a delete removes its
//! file, at once, so that a container's files name its records; an update that fits its file's
//! slots is held in memory ([`Journal::held`], where readers look first) and written to its
//! slot by the next checkpoint: a record updated a thousand times between two checkpoints is
//! written once, where each update cost an `open`, a `pwrite` and a `close`.
//!
//! A checkpoint writes the held updates to their files, makes the record files durable
//! (`syncfs`) and then starts a new generation in the header: the entries before it are passed
//! over from then on, and their room is written again (so the held updates take no more memory
//! than the entries that journaled them). One runs when the journal passes [`CHECKPOINT_AT`],
//! when the records are closed, and when the server starts, after replaying what the last run
//! journaled: every whole entry of the header's generation, in order, each put written whole
//! over its file and each delete (of a record, of a container's directory) done again, the
//! last entry of each file alone (applying one twice leaves what applying it once does). A
//! crash in the middle of a group leaves a torn tail whose checksum fails: replay stops there,
//! and none of that group's commits was acknowledged.
//!
//! A full disk: a slot written in place needs no new block, and the journal's room is written
//! again after a checkpoint; when even that fails, the journal is checkpointed and the group's
//! commits are written the way each record file was before the journal (a slot and its
//! `fdatasync`), so a counter or a lease still updates with the disk full.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, mpsc};
use std::thread;

use ifmatch_blob::StoreError;
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

use super::files::{TempFile, remove_file, sync_dir, tmp_path};
use super::record_file::{self, Failed, Slot};

const HEADER_MAGIC: &[u8; 4] = b"ifmJ";
const ENTRY_MAGIC: &[u8; 4] = b"ifmE";
/// Entries start on the block after the header's, so that rewriting the header never touches
/// a sector of an entry.
const START: u64 = 4096;
/// Magic, generation, length, SHA-256.
const ENTRY_HEADER: usize = 4 + 8 + 4 + 32;
/// The journal is checkpointed once its entries pass this many bytes: what a restart replays
/// at most, and the disk it takes.
pub(super) const CHECKPOINT_AT: u64 = 32 << 20;
/// The journal grows by this much at a time, written with zeros: an append then writes blocks
/// the file has, and its sync writes no metadata (a file growing at each append has its size
/// written with each sync).
const GROW: u64 = 1 << 20;
/// The first growths are smaller, each the size of the file so far: a server that writes a
/// few records takes a few blocks.
const GROW_FIRST: u64 = 64 << 10;
/// The most commits one write and one sync carry.
pub(super) const MOST_GROUPED: usize = 128;

/// A change of one record file, as journaled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Change {
    /// The file at `path` (under the data directory) holds `payload`; `current` is where its
    /// copy is now (none for a new file, or one written whole as JSON).
    Put {
        path: PathBuf,
        payload: Vec<u8>,
        current: Option<Slot>,
    },
    /// The file at `path` is removed.
    Delete { path: PathBuf },
    /// The directory at `path` is removed, with everything in it: by the committer once
    /// journaled (what it holds may be many files), by a replay.
    DeleteDir { path: PathBuf },
}

impl Change {
    fn path(&self) -> &Path {
        match self {
            Self::Put { path, .. } | Self::Delete { path } | Self::DeleteDir { path } => path,
        }
    }
}

/// The journal's writer: a thread that appends, syncs and settles the commits sent to it.
/// Dropping it checkpoints the journal and waits for the thread.
#[derive(Debug)]
pub(super) struct Journal {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<thread::JoinHandle<()>>,
    held: Arc<Mutex<Held>>,
}

/// The journaled updates not yet written to their files, by path: each file's last payload
/// and the slot it goes to.
type Held = HashMap<PathBuf, (Vec<u8>, Slot)>;

fn lock(held: &Mutex<Held>) -> MutexGuard<'_, Held> {
    held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a change's commit answers: the slot the file's copy is now in (none for a delete).
type Answer = Result<Option<Slot>, StoreError>;

/// A change to commit, and where its answer goes.
type Job = (Change, oneshot::Sender<Answer>);

impl Journal {
    /// Starts the writer of the journal of the data directory `root`, which
    /// [`recover`] has replayed.
    pub(super) fn start(root: &Path) -> io::Result<Self> {
        let mut file = JournalFile::open(root)?;
        let held = file.held.clone();
        let (jobs, waiting) = mpsc::channel();
        let thread = thread::Builder::new()
            .name("ifmatch-journal".into())
            .spawn(move || file.serve(&waiting))?;
        Ok(Self {
            jobs: Some(jobs),
            thread: Some(thread),
            held,
        })
    }

    /// The payload of the record file at `path` and its slot, if a committed update of it is
    /// held for the next checkpoint to write: newer than what the file holds.
    pub(super) fn held(&self, path: &Path) -> Option<(Vec<u8>, Slot)> {
        lock(&self.held).get(path).cloned()
    }

    /// Commits `change`: answered once its entry is durable and it is settled (seen by reads).
    pub(super) async fn commit(&self, change: Change) -> Answer {
        let (answer, answered) = oneshot::channel();
        self.send((change, answer))?;
        answered.await.map_err(gone)?
    }

    /// [`Journal::commit`], from a thread that may block.
    pub(super) fn commit_blocking(&self, change: Change) -> Answer {
        let (answer, answered) = oneshot::channel();
        self.send((change, answer))?;
        answered.blocking_recv().map_err(gone)?
    }

    fn send(&self, job: Job) -> Result<(), StoreError> {
        let jobs = self.jobs.as_ref().expect("the journal is open");
        jobs.send(job).map_err(gone)
    }
}

fn gone(error: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("the journal's writer stopped: {error}").into())
}

impl Drop for Journal {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Replays the journal of the data directory `root` onto its record files, makes them durable
/// and starts a new generation: what a server does before it reads a record. Answers how many
/// entries were replayed. Creates the journal if there is none.
pub(super) fn recover(root: &Path) -> io::Result<usize> {
    let mut file = JournalFile::open(root)?;
    let bytes = fs::read(file.path())?;
    let entries = entries(&bytes, file.generation);
    // Each entry holds its file whole: the last one of each file is what it holds, and files
    // later deleted are not made again (a full disk might have no room for them).
    let mut last = std::collections::HashMap::new();
    for (at, change) in entries.iter().enumerate() {
        last.insert(change.path(), at);
    }
    for (at, change) in entries.iter().enumerate() {
        if last[change.path()] == at {
            replay(root, change)?;
        }
    }
    if !entries.is_empty() {
        file.checkpoint()?;
    }
    Ok(entries.len())
}

/// The journal's file, as its writer keeps it.
struct JournalFile {
    root: PathBuf,
    file: File,
    generation: u64,
    /// Where the next group goes.
    tail: u64,
    /// The file's length, which the appends before [`GROW`] more fill.
    len: u64,
    /// A write or a checkpoint failed and no checkpoint succeeded since: entries after the
    /// tail may be torn, so nothing more is appended until one does.
    broken: bool,
    /// Shared with the readers, who look here before a file.
    held: Arc<Mutex<Held>>,
}

impl JournalFile {
    fn path_in(root: &Path) -> PathBuf {
        root.join("journal")
    }

    fn path(&self) -> PathBuf {
        Self::path_in(&self.root)
    }

    /// Opens the journal, creating it (with its first generation, durably) if missing.
    fn open(root: &Path) -> io::Result<Self> {
        let path = Self::path_in(root);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        let mut header = [0; HEADER_MAGIC.len() + 8 + 32];
        let read = file.read_at(&mut header, 0)?;
        let len = file.metadata()?.len();
        let mut journal = Self {
            root: root.to_owned(),
            file,
            generation: 0,
            tail: START,
            len,
            broken: false,
            held: Arc::default(),
        };
        match (read == header.len())
            .then(|| parse_header(&header))
            .flatten()
        {
            Some(generation) => journal.generation = generation,
            // New, or a header torn while a checkpoint wrote it, after that checkpoint had
            // made every record file durable: nothing in it is needed.
            None => {
                journal.start_generation(1)?;
                sync_dir(root)?;
            }
        }
        Ok(journal)
    }

    fn serve(&mut self, waiting: &mpsc::Receiver<Job>) {
        while let Ok(first) = waiting.recv() {
            let mut group = vec![first];
            while group.len() < MOST_GROUPED
                && let Ok(job) = waiting.try_recv()
            {
                group.push(job);
            }
            self.commit(group);
            if self.tail >= CHECKPOINT_AT
                && let Err(error) = self.checkpoint()
            {
                tracing::error!(%error, "checkpointing the records' journal");
            }
        }
        if self.tail > START
            && let Err(error) = self.checkpoint()
        {
            tracing::error!(%error, "checkpointing the records' journal on closing");
        }
    }

    /// Journals the group's changes in one write and one sync, then applies and answers them.
    fn commit(&mut self, group: Vec<(Change, oneshot::Sender<Answer>)>) {
        if group.is_empty() {
            return;
        }
        // A change that needs a new file gets it now, in tmp/: a disk too full for it refuses
        // the change before anything is journaled.
        let mut ready = Vec::with_capacity(group.len());
        for (change, answer) in group {
            match prepare(&self.root, &change) {
                Ok(staged) => ready.push((change, staged, answer)),
                Err(error) => {
                    let _ = answer.send(Err(error.into()));
                }
            }
        }
        let durably = match self.journal(&ready) {
            Ok(()) => false,
            // Checkpointed, the journal holds nothing: each change is made durable by itself,
            // as before the journal.
            Err(error) if self.checkpoint().is_ok() => {
                tracing::warn!(%error, "the records' journal has no room: syncing each record");
                true
            }
            Err(error) => {
                for (_, _, answer) in ready {
                    let message = format!("the records' journal failed: {error}");
                    let _ = answer.send(Err(StoreError::Unavailable(message.into())));
                }
                return;
            }
        };
        for (change, staged, answer) in ready {
            let _ = answer.send(self.settle(change, staged, durably));
        }
    }

    /// Makes a journaled change seen: an update that fits its file's slots is held for the
    /// next checkpoint to write (unless `durably`, when the journal had no room); any other
    /// change is applied to its files now.
    fn settle(&self, change: Change, staged: Option<Staged>, durably: bool) -> Answer {
        match change {
            Change::Put {
                path,
                payload,
                current: Some(current),
            } if staged.is_none() && !durably => {
                // Every update of a file until the checkpoint goes to the slot that does not
                // hold its durable copy: the checkpoint's one write there never tears that copy.
                let slot = match lock(&self.held).entry(path) {
                    Entry::Occupied(mut held) => {
                        let slot = current.next_in_place();
                        held.insert((payload, slot));
                        slot
                    }
                    Entry::Vacant(free) => free.insert((payload, current.next())).1,
                };
                Ok(Some(slot))
            }
            // Its committer reads the records in it once it has renamed it out of sight.
            Change::DeleteDir { path } => {
                self.write_held(|held| held.starts_with(&path))
                    .map_err(landed)?;
                Ok(None)
            }
            change => {
                lock(&self.held).remove(change.path());
                apply(&change, staged, durably)
            }
        }
    }

    /// Writes the held updates of the files `which` picks to their slots, unsynced; each is
    /// no longer held once written (a reader finds it in the file from then on). A file that
    /// is gone (removed behind the server's back) takes its held update with it, as an update
    /// written to it at once failed, and stops no checkpoint: the others are written.
    fn write_held(&self, which: impl Fn(&Path) -> bool) -> io::Result<()> {
        let paths: Vec<PathBuf> = lock(&self.held)
            .keys()
            .filter(|path| which(path))
            .cloned()
            .collect();
        for path in paths {
            let mut held = lock(&self.held);
            if let Some((payload, slot)) = held.get(&path) {
                match record_file::write(&path, *slot, payload, false) {
                    Ok(()) => {}
                    Err(Failed::Before(e)) if e.kind() == io::ErrorKind::NotFound => {
                        let record = path.display();
                        tracing::error!(%record, "a record file with an update to write is gone");
                    }
                    Err(Failed::Before(e) | Failed::During(e)) => return Err(e),
                }
                held.remove(&path);
            }
        }
        Ok(())
    }

    /// Appends the changes' entries in one write and one sync; when that fails, once more
    /// over the room a checkpoint frees (what a full disk leaves).
    fn journal(
        &mut self,
        ready: &[(Change, Option<Staged>, oneshot::Sender<Answer>)],
    ) -> io::Result<()> {
        let Err(error) = self.append(ready) else {
            return Ok(());
        };
        tracing::warn!(%error, "appending to the records' journal; checkpointing");
        self.checkpoint()?;
        self.append(ready)
    }

    fn append(
        &mut self,
        ready: &[(Change, Option<Staged>, oneshot::Sender<Answer>)],
    ) -> io::Result<()> {
        if self.broken {
            return Err(io::Error::other("a failed write awaits a checkpoint"));
        }
        let mut bytes = Vec::new();
        for (change, _, _) in ready {
            encode(&mut bytes, self.generation, change, &self.root);
        }
        let end = self.tail + bytes.len() as u64;
        let step = self.len.clamp(GROW_FIRST, GROW);
        let len = self.len.max(end.div_ceil(step) * step);
        let zeros = vec![0; (len - self.len) as usize];
        if let Err(error) = self.file.write_all_at(&zeros, self.len) {
            // What was written of the zeros would fill a disk that has no room to spare.
            let _ = self.file.set_len(self.len);
            return Err(error);
        }
        let written =
            (self.file.write_all_at(&bytes, self.tail)).and_then(|()| self.file.sync_data());
        match written {
            Ok(()) => {
                (self.tail, self.len) = (end, len);
                Ok(())
            }
            Err(error) => {
                self.broken = true;
                Err(error)
            }
        }
    }

    /// Writes the held updates, makes every record file durable, then starts the next
    /// generation: the entries written so far are passed over from then on.
    fn checkpoint(&mut self) -> io::Result<()> {
        let synced = (self.write_held(|_| true))
            .and_then(|()| syncfs(&self.file))
            .and_then(|()| self.start_generation(self.generation + 1));
        self.broken = synced.is_err();
        synced
    }

    fn start_generation(&mut self, generation: u64) -> io::Result<()> {
        let mut header = Vec::new();
        header.extend_from_slice(HEADER_MAGIC);
        header.extend_from_slice(&generation.to_le_bytes());
        header.extend_from_slice(&Sha256::digest(generation.to_le_bytes()));
        self.file.write_all_at(&header, 0)?;
        self.file.sync_data()?;
        self.generation = generation;
        self.tail = START;
        Ok(())
    }
}

fn parse_header(header: &[u8]) -> Option<u64> {
    let (magic, rest) = header.split_at(HEADER_MAGIC.len());
    let (generation, sum) = rest.split_at(8);
    let generation = u64::from_le_bytes(generation.try_into().ok()?);
    (magic == HEADER_MAGIC && Sha256::digest(generation.to_le_bytes())[..] == *sum)
        .then_some(generation)
}

/// `syncfs(2)` on the file system that holds `file`: every record file written since the last
/// checkpoint, and the directories that name them, durable at once.
fn syncfs(file: &File) -> io::Result<()> {
    Ok(rustix::fs::syncfs(file)?)
}

/// Appends `change`'s entry, of `generation`, to `out`; its path is taken relative to `root`.
fn encode(out: &mut Vec<u8>, generation: u64, change: &Change, root: &Path) {
    let (kind, path, payload) = match change {
        Change::Put { path, payload, .. } => (0, path, &payload[..]),
        Change::Delete { path } => (1, path, &[][..]),
        Change::DeleteDir { path } => (2, path, &[][..]),
    };
    let path = (path
        .strip_prefix(root)
        .expect("records live in the data directory"))
    .as_os_str()
    .as_encoded_bytes();
    // The header, its length and checksum filled in once the body is written after it.
    let start = out.len();
    out.extend_from_slice(ENTRY_MAGIC);
    out.extend_from_slice(&generation.to_le_bytes());
    out.resize(start + ENTRY_HEADER, 0);
    out.push(kind);
    out.extend_from_slice(&(path.len() as u16).to_le_bytes());
    out.extend_from_slice(path);
    out.extend_from_slice(payload);
    let body = start + ENTRY_HEADER;
    let length = (out.len() - body) as u32;
    let sum = record_file::checksum(generation, &out[body..]);
    out[start + 12..start + 16].copy_from_slice(&length.to_le_bytes());
    out[start + 16..body].copy_from_slice(&sum);
}

/// The whole entries of `generation` from the start of the journal `bytes`, in order, up to
/// the first that is not (a torn tail, or the older generation's room written again).
fn entries(bytes: &[u8], generation: u64) -> Vec<Change> {
    let mut out = Vec::new();
    let mut at = START as usize;
    while let Some((change, size)) = bytes
        .get(at..)
        .and_then(|rest| parse_entry(rest, generation))
    {
        out.push(change);
        at += size;
    }
    out
}

/// The change an entry at the start of `bytes` holds, and the entry's size.
fn parse_entry(bytes: &[u8], generation: u64) -> Option<(Change, usize)> {
    let header = bytes.get(..ENTRY_HEADER)?;
    let length = u32::from_le_bytes(header[12..16].try_into().ok()?) as usize;
    let body = bytes.get(ENTRY_HEADER..ENTRY_HEADER + length)?;
    let whole = &header[..4] == ENTRY_MAGIC
        && u64::from_le_bytes(header[4..12].try_into().ok()?) == generation
        && record_file::checksum(generation, body)[..] == header[16..];
    if !whole {
        return None;
    }
    let (&kind, rest) = body.split_first()?;
    let path_len = u16::from_le_bytes(rest.get(..2)?.try_into().ok()?) as usize;
    let path = Path::new(std::ffi::OsStr::from_bytes(rest.get(2..2 + path_len)?));
    // Its own file, checksummed; a path that would leave the directory is not one of its.
    if !path.components().all(|c| matches!(c, Component::Normal(_))) {
        return None;
    }
    let path = path.to_owned();
    let change = match kind {
        0 => Change::Put {
            path,
            payload: rest[2 + path_len..].to_vec(),
            current: None,
        },
        1 => Change::Delete { path },
        2 => Change::DeleteDir { path },
        _ => return None,
    };
    Some((change, ENTRY_HEADER + length))
}

/// A put whose file is new (or outgrew its slots) as its whole new file, written to `tmp/` and
/// not synced, with the directories it goes in: renamed into place once journaled.
fn prepare(root: &Path, change: &Change) -> io::Result<Option<Staged>> {
    let Change::Put {
        path,
        payload,
        current,
    } = change
    else {
        return Ok(None);
    };
    if current.is_some_and(|slot| slot.fits(payload.len())) {
        return Ok(None);
    }
    let parent = path.parent().expect("records live in a directory");
    fs::create_dir_all(parent)?;
    if path.ends_with("container.json") {
        fs::create_dir_all(parent.join("blobs"))?;
    }
    let (bytes, slot) = record_file::create(payload, *current);
    let staged = TempFile(tmp_path(root));
    fs::write(&staged.0, bytes)?;
    Ok(Some(Staged(staged, slot)))
}

/// A new record file written to `tmp/`, and where its copy is.
struct Staged(TempFile, Slot);

/// Applies a journaled change to its file, `durably` (synced, as without the journal) or not.
fn apply(change: &Change, staged: Option<Staged>, durably: bool) -> Answer {
    match change {
        Change::Put {
            path,
            payload,
            current,
        } => match (staged, current) {
            (Some(Staged(staged, slot)), _) => {
                if durably {
                    File::open(&staged.0)?.sync_all()?;
                }
                fs::rename(&staged.0, path).map_err(landed)?;
                std::mem::forget(staged);
                if durably {
                    sync_dir(path.parent().expect("in a directory")).map_err(landed)?;
                }
                Ok(Some(slot))
            }
            (None, Some(current)) => {
                match record_file::overwrite(path, *current, payload, durably) {
                    Ok(Some(written)) => Ok(Some(written)),
                    Ok(None) => unreachable!("prepared: the payload fits its slot"),
                    Err(Failed::Before(e)) if durably => Err(e.into()),
                    Err(Failed::Before(e) | Failed::During(e)) => Err(landed(e)),
                }
            }
            (None, None) => unreachable!("prepared: a new file is staged"),
        },
        Change::Delete { path } => {
            remove_file(path).map_err(landed)?;
            if durably {
                sync_dir(path.parent().expect("in a directory")).map_err(landed)?;
            }
            Ok(None)
        }
        // Its committer removes it.
        Change::DeleteDir { .. } => Ok(None),
    }
}

/// The change is journaled (or half made): whether it holds is known only to a read after.
fn landed(error: io::Error) -> StoreError {
    StoreError::Unavailable(Box::new(error))
}

/// Does again a change read back from the journal, over the data directory `root`: a put
/// writes the file whole (in its other slot when it fits, so that a full disk replays), a
/// delete removes it.
fn replay(root: &Path, change: &Change) -> io::Result<()> {
    match change {
        Change::Put { path, payload, .. } => {
            let path = root.join(path);
            let bytes = fs::read(&path).unwrap_or_default();
            let current = match record_file::read(&bytes) {
                // Applied before the crash, as it mostly is (a process killed loses no write
                // it made): left as it is.
                Ok((held, _)) if held == &payload[..] => return Ok(()),
                Ok((_, slot)) => slot,
                Err(_) => None,
            };
            let change = Change::Put {
                path: path.clone(),
                payload: payload.clone(),
                current,
            };
            let staged = prepare(root, &change)?;
            apply(&change, staged, false).map_err(io::Error::other)?;
        }
        Change::Delete { path } => remove_file(&root.join(path))?,
        // Out of sight at once; tmp/ is emptied at the next start if not now.
        Change::DeleteDir { path } => {
            let trash = tmp_path(root);
            match fs::rename(root.join(path), &trash) {
                Ok(()) => fs::remove_dir_all(&trash)?,
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
    }
    Ok(())
}
