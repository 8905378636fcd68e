//! A file of staged blocks: the blocks Put Block staged for one blob under one epoch (its
//! record's [`Staging`](ifmatch_blob::Staging)), one entry of [`ENTRY`] bytes each, appended in
//! the order they came, so that staging a block writes that block's entry alone, however many
//! the file holds.
//!
//! ```text
//! entry: "ifmB" | length u16 | the block's JSON | zeros | SHA-256 of all that
//! ```
//!
//! An entry is written at the end of the last whole entry and acknowledged once `fdatasync`
//! returns. A crash or a full disk in the middle of one leaves a part of an entry, which the
//! next append writes over, or a whole entry that fails its checksum: neither was acknowledged,
//! and a reader passes over both. The number of entries is the file's length over [`ENTRY`]:
//! the limit of a blob's staged blocks is checked without reading them.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use ifmatch_blob::Block;
use sha2::{Digest, Sha256};

const MAGIC: &[u8; 4] = b"ifmB";
/// The size of every entry: a block's JSON (a block id is at most 88 characters, an object's
/// name 32, its tag 66) fits with room to spare.
pub const ENTRY: usize = 512;
const DIGEST: usize = 32;
const PAYLOAD: usize = ENTRY - MAGIC.len() - 2 - DIGEST;

/// The entry of `block`; `None` if its JSON does not fit (block ids are validated long before).
pub fn entry(block: &Block) -> Option<[u8; ENTRY]> {
    let json = serde_json::to_vec(block).ok()?;
    if json.len() > PAYLOAD {
        return None;
    }
    let mut out = [0u8; ENTRY];
    out[..4].copy_from_slice(MAGIC);
    out[4..6].copy_from_slice(&(json.len() as u16).to_le_bytes());
    out[6..6 + json.len()].copy_from_slice(&json);
    let digest = Sha256::digest(&out[..ENTRY - DIGEST]);
    out[ENTRY - DIGEST..].copy_from_slice(&digest);
    Some(out)
}

/// The blocks of a file's bytes, in order: every whole entry whose checksum holds.
pub fn blocks(bytes: &[u8]) -> Vec<Block> {
    bytes
        .chunks_exact(ENTRY)
        .filter_map(|entry| {
            let len = usize::from(u16::from_le_bytes([entry[4], entry[5]]));
            let ok = &entry[..4] == MAGIC
                && len <= PAYLOAD
                && Sha256::digest(&entry[..ENTRY - DIGEST])[..] == entry[ENTRY - DIGEST..];
            ok.then(|| serde_json::from_slice(&entry[6..6 + len]).ok())
                .flatten()
        })
        .collect()
}

/// Appends `block` to the file at `path` (created if missing, and then `created` is true: its
/// directory must be synced), durably, unless it holds `max` entries already: `Ok(None)`.
/// The caller holds the file's lock.
pub fn append(path: &Path, block: &Block, max: usize) -> io::Result<Option<bool>> {
    let entry = entry(block)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the block does not fit"))?;
    let file = OpenOptions::new().read(true).write(true).open(path);
    let (file, created) = match file {
        Ok(file) => (file, false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => (File::create_new(path)?, true),
        Err(e) => return Err(e),
    };
    // Over any part of an entry a failed append left.
    let whole = file.metadata()?.len() / ENTRY as u64;
    if whole >= max as u64 {
        return Ok(None);
    }
    file.write_all_at(&entry, whole * ENTRY as u64)?;
    file.sync_data()?;
    Ok(Some(created))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ifmatch_core::strong_etag;

    fn block(i: usize) -> Block {
        Block {
            id: format!("{i:088}"),
            object: format!("{i:032x}"),
            len: u64::MAX,
            sha256: strong_etag(&i.to_le_bytes()),
            staged: u64::MAX,
        }
    }

    #[test]
    fn the_longest_block_fits_and_entries_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("staged");
        assert_eq!(append(&path, &block(0), 10).unwrap(), Some(true));
        assert_eq!(append(&path, &block(1), 10).unwrap(), Some(false));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 2 * ENTRY);
        assert_eq!(blocks(&bytes), [block(0), block(1)]);
        assert_eq!(append(&path, &block(2), 2).unwrap(), None, "full");
        assert_eq!(std::fs::read(&path).unwrap().len(), 2 * ENTRY);
    }

    #[test]
    fn a_torn_entry_is_passed_over_and_a_partial_one_written_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("staged");
        for i in 0..3 {
            append(&path, &block(i), 10).unwrap();
        }
        let whole = std::fs::read(&path).unwrap();
        // Any byte of the middle entry damaged: the two around it still read.
        for at in ENTRY..2 * ENTRY {
            let mut torn = whole.clone();
            torn[at] ^= 0x40;
            assert_eq!(blocks(&torn), [block(0), block(2)], "byte {at}");
        }
        // Every prefix of an entry being appended: the entries before it, then the append
        // writes over what the failed one left.
        for cut in 0..ENTRY {
            std::fs::write(&path, &whole[..2 * ENTRY + cut]).unwrap();
            assert_eq!(blocks(&std::fs::read(&path).unwrap()), [block(0), block(1)]);
            append(&path, &block(7), 10).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(bytes.len(), 3 * ENTRY);
            assert_eq!(blocks(&bytes), [block(0), block(1), block(7)]);
        }
    }
}
