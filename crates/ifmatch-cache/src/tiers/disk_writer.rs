//! The disk tier's writes: made by a thread of its own, in the order the answers became whole,
//! from a queue bounded in bytes. An answer that would overflow the queue is not written (it
//! stays in the memory tier, and is fetched again once memory lets it go) and is counted.
//!
//! A write costs a file's creation, its bytes and a rename (most of it in the kernel), and
//! misses can come faster than a disk takes them. Each write on a blocking task of the runtime
//! of its own, as before, was a thread per write in flight (110 of them under a miss load on
//! 2 cores, contending for the directories' locks) and, behind a slow disk, a backlog that grew
//! without bound, each entry holding its answer after the memory tier had let it go.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};

use bytes::Bytes;

use crate::stored::entry::Stored;

/// The most bytes of answers waiting to be written.
pub(crate) const QUEUE_BYTES: u64 = 64 << 20;

/// The most answers waiting to be written, whatever their size.
const QUEUE_ANSWERS: usize = 4096;

/// One answer to write: under its key, if the key's generation is still the one it was
/// stored under (see `Disk::write` in `disk.rs`).
struct Job {
    key: String,
    stored: Arc<Stored>,
    body: Bytes,
    generation: u64,
}

/// The queue of writes, and what became of them.
pub(crate) struct DiskWriter {
    jobs: SyncSender<Job>,
    queued: Arc<AtomicU64>,
    /// Answers not written, the queue being full.
    pub(crate) skipped: AtomicU64,
}

/// The other end of a [`DiskWriter`]'s queue, to be emptied by its thread.
pub(crate) struct Queue {
    jobs: Receiver<Job>,
    queued: Arc<AtomicU64>,
}

/// A writer, and the queue it fills.
pub(crate) fn queue() -> (DiskWriter, Queue) {
    let (jobs, queue) = std::sync::mpsc::sync_channel(QUEUE_ANSWERS);
    let queued = Arc::new(AtomicU64::new(0));
    let writer = DiskWriter {
        jobs,
        queued: queued.clone(),
        skipped: AtomicU64::new(0),
    };
    (
        writer,
        Queue {
            jobs: queue,
            queued,
        },
    )
}

impl DiskWriter {
    /// Queues `stored` (whose body is whole: `body`) to be written under `key` if `key`'s
    /// generation is still `generation` then; skips it if the queue is full.
    pub(crate) fn write(&self, key: &str, stored: Arc<Stored>, body: Bytes, generation: u64) {
        let size = weight(&body);
        // One answer is always taken into an empty queue, whatever its size.
        let before = self.queued.fetch_add(size, Ordering::AcqRel);
        let job = Job {
            key: key.to_owned(),
            stored,
            body,
            generation,
        };
        let sent = (before + size <= QUEUE_BYTES || before == 0) && self.jobs.try_send(job).is_ok();
        if !sent {
            self.queued.fetch_sub(size, Ordering::AcqRel);
            self.skipped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Bytes of answers waiting to be written.
    #[cfg(test)]
    fn queued(&self) -> u64 {
        self.queued.load(Ordering::Acquire)
    }
}

impl Queue {
    /// Starts the thread that writes what is queued with `write` (the key, the answer, its
    /// body, the key's generation when it was stored), until `write` says the disk tier (which
    /// holds the writer) is gone.
    pub(crate) fn start<W>(self, write: W) -> std::io::Result<()>
    where
        W: Fn(&str, &Stored, &Bytes, u64) -> bool + Send + 'static,
    {
        std::thread::Builder::new()
            .name("ifmatch-cache-writer".to_owned())
            .spawn(move || {
                while let Ok(job) = self.jobs.recv() {
                    if !write(&job.key, &job.stored, &job.body, job.generation) {
                        return;
                    }
                    self.queued.fetch_sub(weight(&job.body), Ordering::AcqRel);
                }
            })
            .map(drop)
    }
}

/// What an answer counts for in the queue: its body, and a little for the rest.
fn weight(body: &Bytes) -> u64 {
    body.len() as u64 + 1024
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::tiers::disk::Disk;
    use crate::tiers::disk::tests::stored;

    fn wait_for(what: impl Fn() -> bool) {
        let start = Instant::now();
        while !what() {
            assert!(start.elapsed() < Duration::from_secs(10), "not in 10 s");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_disk_that_lags_costs_writes_not_memory() {
        let dir = std::env::temp_dir().join(format!("ifmatch-writer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let disk = Disk::open(&dir, 1 << 30).unwrap();
        let one = Bytes::from(vec![b'x'; 1 << 20]);
        let answer = Arc::new(stored(b"", ""));
        let queue = |n: usize| {
            for i in 0..n {
                let key = format!("h /{i}");
                (disk.writer).write(&key, answer.clone(), one.clone(), disk.generation(&key));
            }
        };
        // A disk that takes nothing: the writer stalls before placing its first file.
        let stalled = disk.stall();
        queue(200);
        let held = disk.writer.queued();
        assert!(held <= QUEUE_BYTES, "{held} bytes queued");
        assert!(held >= QUEUE_BYTES - (2 << 20), "{held} bytes queued");
        let skipped = disk.writer.skipped.load(Ordering::Relaxed);
        assert!((130..=140).contains(&skipped), "{skipped} skipped of 200");
        drop(stalled);
        wait_for(|| disk.writer.queued() == 0);
        assert_eq!(disk.writes.load(Ordering::Relaxed), 200 - skipped);
        // Caught up, it takes answers again.
        queue(1);
        wait_for(|| disk.writer.queued() == 0);
        assert_eq!(disk.writes.load(Ordering::Relaxed), 201 - skipped);
        // Its thread holds the tier only while writing: dropped, the tier ends, and so does
        // the thread, its queue closed.
        let weak = Arc::downgrade(&disk);
        drop(disk);
        assert!(weak.upgrade().is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
