//! A record's file: two slots, each able to hold a whole checksummed copy of the record, so
//! that an update is one write in place and one `fdatasync`, where replacing the file costs two
//! fsyncs (the new file, then the directory that names it). LMDB keeps its two meta pages so.
//!
//! ```text
//! slot 0 at 0, slot 1 at S (S a multiple of 4096; the file is 2S bytes)
//! slot:  "ifmR" | sequence u64 | length u32 | SHA-256(sequence, length, payload) | payload | zeros
//! ```
//!
//! An update writes the slot that does not hold the current copy, with the next sequence
//! number, and is acknowledged once `fdatasync` returns; a reader takes the valid slot with the
//! highest sequence number. A crash in the middle of the write leaves that slot torn, which its
//! checksum shows, and the other slot still holds the copy acknowledged before. The slots are
//! 4096-byte aligned, so writing one never touches a disk sector of the other, and the file's
//! blocks are all written when it is created, so an update allocates nothing on a file system
//! that overwrites in place (ext4, XFS): it cannot fail for a full disk there. A record that
//! outgrows its slots is written to a new, larger file that replaces the old one.
//!
//! A file that starts with `{` is a record written whole as JSON, as before this format: it is
//! read as it is, and replaced by a slotted file at its next update.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use sha2::{Digest, Sha256};

const MAGIC: &[u8; 4] = b"ifmR";
/// Magic, sequence number, length, SHA-256.
const HEADER: usize = 4 + 8 + 4 + 32;
/// Slots start on this boundary: a block of the file system, a sector of the disk.
const ALIGN: usize = 4096;

/// Where a record file's current copy is, so that the next update goes to the other slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    index: u64,
    sequence: u64,
    size: u64,
}

impl Slot {
    /// Whether a payload of `len` bytes fits in a slot of this file.
    pub fn fits(&self, len: usize) -> bool {
        HEADER + len <= self.size as usize
    }

    /// Where the copy after this one goes: the other slot, numbered next.
    pub fn next(self) -> Self {
        Self {
            index: 1 - self.index,
            sequence: self.sequence + 1,
            size: self.size,
        }
    }

    /// The copy after this one in the same slot, numbered next: for a copy that replaces
    /// another never written to the file.
    pub fn next_in_place(self) -> Self {
        Self {
            sequence: self.sequence + 1,
            ..self
        }
    }
}

/// The payload of a record file (the record's JSON) and the slot that held it; no slot for a
/// file written whole as JSON. An error says why neither slot holds a whole copy.
pub fn read(bytes: &[u8]) -> Result<(&[u8], Option<Slot>), String> {
    if bytes.first() == Some(&b'{') {
        return Ok((bytes, None));
    }
    let size = bytes.len() / 2;
    if !bytes.len().is_multiple_of(2 * ALIGN) || size == 0 {
        return Err(format!(
            "{} bytes: not a record file (two slots of a multiple of {ALIGN} bytes)",
            bytes.len()
        ));
    }
    let found = (0..2)
        .filter_map(|index| {
            let slot = &bytes[index * size..][..size];
            let (sequence, payload) = parse(slot)?;
            let size = size as u64;
            let index = index as u64;
            Some((
                payload,
                Slot {
                    index,
                    sequence,
                    size,
                },
            ))
        })
        .max_by_key(|(_, slot)| slot.sequence);
    match found {
        Some((payload, slot)) => Ok((payload, Some(slot))),
        None => Err("neither slot holds a whole copy (both torn or overwritten)".into()),
    }
}

/// Why the copy [`read`] takes is not the newest one written, if it is not: the other slot
/// holds bytes that are no whole copy and do not say they are an older one (a write torn by
/// a crash, or bits that rotted). The reader cannot tell the two apart and serves the copy
/// before; `ifmatch check` names the record, so an operator can.
pub fn fell_back(bytes: &[u8]) -> Option<String> {
    let Ok((_, Some(taken))) = read(bytes) else {
        return None;
    };
    let size = taken.size as usize;
    let other = &bytes[(1 - taken.index as usize) * size..][..size];
    if parse(other).is_some() || other.iter().all(|&b| b == 0) {
        return None;
    }
    let sequence = (&other[..4] == MAGIC)
        .then(|| u64::from_le_bytes(other[4..12].try_into().expect("8 bytes")));
    match sequence {
        // An older copy that rotted: the newest is whole.
        Some(sequence) if sequence < taken.sequence => None,
        _ => Some(format!(
            "its newest copy (slot {}) fails its checksum: copy {} (slot {}) is served instead,              an acknowledged write may be lost (a torn write or bit rot)",
            1 - taken.index,
            taken.sequence,
            taken.index
        )),
    }
}

/// A slot's sequence number and payload, if it holds a whole copy.
fn parse(slot: &[u8]) -> Option<(u64, &[u8])> {
    let (header, rest) = slot.split_at(HEADER);
    if &header[..4] != MAGIC {
        return None;
    }
    let sequence = u64::from_le_bytes(header[4..12].try_into().ok()?);
    let len = u32::from_le_bytes(header[12..16].try_into().ok()?) as usize;
    let payload = rest.get(..len)?;
    (checksum(sequence, payload) == header[16..HEADER]).then_some((sequence, payload))
}

/// The SHA-256 of a numbered payload, as a slot keeps it (and the journal's entries, framed
/// the same way).
pub(super) fn checksum(sequence: u64, payload: &[u8]) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(sequence.to_le_bytes());
    hash.update((payload.len() as u32).to_le_bytes());
    hash.update(payload);
    hash.finalize().into()
}

/// A slot holding `payload` as copy number `sequence`, `size` bytes long.
fn encode(sequence: u64, payload: &[u8], size: usize) -> Vec<u8> {
    let mut slot = Vec::with_capacity(size);
    slot.extend_from_slice(MAGIC);
    slot.extend_from_slice(&sequence.to_le_bytes());
    slot.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    slot.extend_from_slice(&checksum(sequence, payload));
    slot.extend_from_slice(payload);
    slot.resize(size, 0);
    slot
}

/// A whole new file holding `payload` in its first slot, its second slot empty; the sequence
/// goes on from `after` (the file it replaces). The file's bytes and where its copy is.
pub fn create(payload: &[u8], after: Option<Slot>) -> (Vec<u8>, Slot) {
    let size = (HEADER + payload.len()).div_ceil(ALIGN) * ALIGN;
    let sequence = after.map_or(1, |slot| slot.sequence + 1);
    let mut file = encode(sequence, payload, size);
    file.resize(2 * size, 0);
    let size = size as u64;
    (
        file,
        Slot {
            index: 0,
            sequence,
            size,
        },
    )
}

/// Writes `payload` over the slot of the file at `path` that does not hold `current`, then,
/// `durably`, `fdatasync`s it: the update is durable when this returns `Ok(Some(_))`, with
/// where the copy now is. `Ok(None)` when the payload does not fit a slot (nothing was
/// written: the caller writes a new file with [`create`]). An error of the write or the sync
/// leaves the file holding either copy.
pub fn overwrite(
    path: &Path,
    current: Slot,
    payload: &[u8],
    durably: bool,
) -> Result<Option<Slot>, Failed> {
    if !current.fits(payload.len()) {
        return Ok(None);
    }
    let next = current.next();
    write(path, next, payload, durably)?;
    Ok(Some(next))
}

/// Writes `payload` as the copy `slot` names, over that slot of the file at `path` (whose
/// slots it fits), then, `durably`, `fdatasync`s it.
pub fn write(path: &Path, slot: Slot, payload: &[u8], durably: bool) -> Result<(), Failed> {
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(Failed::Before)?;
    let bytes = encode(slot.sequence, payload, slot.size as usize);
    file.write_all_at(&bytes, slot.index * slot.size)
        .and_then(|()| if durably { file.sync_data() } else { Ok(()) })
        .map_err(Failed::During)
}

/// Why [`overwrite`] failed: before anything was written, or while writing or syncing (the
/// new copy may be on disk or not).
#[derive(Debug)]
pub enum Failed {
    /// Opening the file failed: nothing was written.
    Before(io::Error),
    /// Writing or syncing failed: the file holds the old copy or the new one.
    During(io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, bytes: &[u8]) {
        std::fs::write(path, bytes).unwrap();
    }

    /// A new record file holding `payload`, in a directory of its own: the directory (removed
    /// when dropped), the file's path, its bytes and its slot.
    fn new_file(payload: &[u8]) -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>, Slot) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r");
        let (bytes, slot) = create(payload, None);
        write(&path, &bytes);
        (dir, path, bytes, slot)
    }

    #[test]
    fn updates_alternate_slots_and_the_newest_whole_copy_wins() {
        let (_dir, path, bytes, mut slot) = new_file(b"{\"v\":1}");
        assert_eq!(bytes.len(), 2 * ALIGN);
        for v in 2..6 {
            let payload = format!("{{\"v\":{v}}}");
            slot = overwrite(&path, slot, payload.as_bytes(), true)
                .unwrap()
                .unwrap();
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(read(&bytes).unwrap(), (payload.as_bytes(), Some(slot)));
            assert_eq!(slot.index, (v as u64 - 1) % 2);
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 2 * ALIGN as u64);
    }

    #[test]
    fn a_fall_back_to_the_older_copy_is_named_and_an_older_copy_rotting_is_not() {
        let (_dir, path, bytes, slot) = new_file(b"{\"v\":1}");
        assert_eq!(fell_back(&bytes), None, "a new file's empty second slot");
        let slot = overwrite(&path, slot, b"{\"v\":2}", true).unwrap().unwrap();
        let whole = std::fs::read(&path).unwrap();
        assert_eq!(fell_back(&whole), None);
        let newest = (slot.index * slot.size) as usize;
        let older = ((1 - slot.index) * slot.size) as usize;
        for at in [0, 5, HEADER - 1, HEADER, HEADER + 3] {
            let mut rotten = whole.clone();
            rotten[newest + at] ^= 0x01;
            assert_eq!(read(&rotten).unwrap().0, b"{\"v\":1}");
            let said = fell_back(&rotten).unwrap_or_else(|| panic!("byte {at}"));
            assert!(said.contains("copy 1"), "{said}");
            let mut rotten = whole.clone();
            rotten[older + HEADER + 2] ^= 0x01;
            assert_eq!(
                fell_back(&rotten),
                None,
                "the older copy rotted: the newest is whole"
            );
        }
    }

    /// A crash in the middle of an update: whatever part of the newer slot reached the disk,
    /// the reader gets the copy before it.
    #[test]
    fn a_torn_slot_falls_back_to_the_copy_before() {
        let (_dir, path, _, slot) = new_file(b"{\"v\":1}");
        overwrite(&path, slot, b"{\"v\":2}", true).unwrap().unwrap();
        let good = std::fs::read(&path).unwrap();
        // v2 in slot 1: tear it at every byte of its header and payload.
        for at in ALIGN..ALIGN + HEADER + 7 {
            let mut torn = good.clone();
            torn[at] ^= 0x40;
            let (payload, slot) = read(&torn).unwrap();
            assert_eq!(payload, b"{\"v\":1}", "flipped byte {at}");
            assert_eq!(slot.unwrap().index, 0);
        }
        // Both torn: damage, said as such.
        let mut torn = good.clone();
        torn[5] ^= 1;
        torn[ALIGN + 5] ^= 1;
        assert!(read(&torn).unwrap_err().contains("neither slot"));
        // The next update after a fall back overwrites the torn slot, not the good one.
        let mut torn = good;
        torn[ALIGN + HEADER] ^= 1;
        write(&path, &torn);
        let (_, slot) = read(&torn).unwrap();
        let next = overwrite(&path, slot.unwrap(), b"{\"v\":3}", true)
            .unwrap()
            .unwrap();
        assert_eq!(next.index, 1);
        assert_eq!(
            read(&std::fs::read(&path).unwrap()).unwrap().0,
            b"{\"v\":3}"
        );
    }

    /// A power cut in the middle of an update leaves any prefix of its sectors on the disk:
    /// the reader gets the old copy or the new one, whole.
    #[test]
    fn any_prefix_of_an_update_reads_as_the_old_copy_or_the_new() {
        let (_dir, path, _, slot) = new_file(&[b'o'; 3000]);
        // Sequence 2 goes to slot 1, sequence 3 back over slot 0 (the older copy).
        let slot = overwrite(&path, slot, b"\"two\"", true).unwrap().unwrap();
        let disk = std::fs::read(&path).unwrap();
        overwrite(&path, slot, b"\"three\"", true).unwrap().unwrap();
        let written = std::fs::read(&path).unwrap();
        for sectors in 0..=ALIGN / 512 {
            let mut torn = disk.clone();
            torn[..sectors * 512].copy_from_slice(&written[..sectors * 512]);
            let (payload, _) = read(&torn).unwrap();
            let whole = sectors * 512 >= HEADER + 7;
            assert_eq!(payload, if whole { &b"\"three\""[..] } else { b"\"two\"" });
        }
    }

    #[test]
    fn a_payload_larger_than_its_slot_asks_for_a_new_file() {
        let (_dir, path, bytes, slot) = new_file(b"{}");
        let large = vec![b' '; ALIGN];
        assert_eq!(overwrite(&path, slot, &large, true).unwrap(), None);
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "nothing written");
        let (bytes, next) = create(&large, Some(slot));
        assert_eq!(bytes.len(), 4 * ALIGN);
        assert_eq!(next.sequence, 2);
        assert_eq!(read(&bytes).unwrap(), (&large[..], Some(next)));
    }

    #[test]
    fn json_written_whole_is_read_as_it_is_and_anything_else_is_damage() {
        assert_eq!(read(b"{\"a\":1}").unwrap(), (&b"{\"a\":1}"[..], None));
        assert!(read(b"").is_err());
        assert!(read(b"garbage").is_err());
        assert!(read(&[0; 2 * ALIGN]).is_err());
    }
}
