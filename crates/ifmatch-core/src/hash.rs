//! The project's strong ETag: `"` + lowercase hex SHA-256 of the exact bytes + `"`.

use sha2::{Digest, Sha256};

use crate::etag::EntityTag;

/// A streaming hasher for the project's strong ETag.
///
/// Feed the representation's bytes in chunks of any size as they arrive, then
/// [`finish`](Self::finish). Nothing is buffered beyond one 64-byte SHA-256 block, so a body of
/// any size is hashed in constant memory.
///
/// Throughput: `sha2` picks the CPU's SHA extensions (x86 SHA-NI, ARMv8 SHA2) at run time and
/// hashes whole runs of blocks per call, so hand it the chunks you already have; copying them
/// into a staging buffer first only costs a memcpy.
///
/// ```
/// use ifmatch_core::{EtagHasher, strong_etag};
///
/// let mut hasher = EtagHasher::new();
/// hasher.update(b"hello ");
/// hasher.update(b"world");
/// let tag = hasher.finish();
/// assert_eq!(tag, strong_etag(b"hello world"));
/// assert_eq!(
///     tag.to_string(),
///     "\"b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9\""
/// );
/// ```
#[derive(Clone, Default)]
pub struct EtagHasher {
    sha: Sha256,
    len: u64,
}

impl EtagHasher {
    /// A hasher that has seen no bytes yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next chunk of the representation.
    pub fn update(&mut self, chunk: &[u8]) {
        self.sha.update(chunk);
        self.len += chunk.len() as u64;
    }

    /// How many bytes have been fed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no bytes have been fed yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The strong ETag of everything fed.
    pub fn finish(self) -> EntityTag {
        // Into a stack buffer: `hex::encode` goes through a per-character iterator and a String.
        let mut hex = [0u8; 64];
        hex::encode_to_slice(self.sha.finalize(), &mut hex).expect("64 hex digits for 32 bytes");
        EntityTag::strong(hex).expect("hex digits are etagc")
    }
}

impl std::io::Write for EtagHasher {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl std::fmt::Debug for EtagHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtagHasher")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// The strong ETag of `data`, hashed in one call.
pub fn strong_etag(data: &[u8]) -> EntityTag {
    let mut hasher = EtagHasher::new();
    hasher.update(data);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        // FIPS 180-2 test vectors.
        let cases: &[(&[u8], &str)] = &[
            (
                b"",
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
            (
                b"abc",
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
        ];
        for (data, hex) in cases {
            let tag = strong_etag(data);
            assert!(!tag.is_weak());
            assert_eq!(tag.opaque(), hex.as_bytes());
        }
    }

    #[test]
    fn chunking_does_not_change_the_tag() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let whole = strong_etag(&data);
        for chunk in [1, 7, 63, 64, 65, 4096] {
            let mut hasher = EtagHasher::new();
            data.chunks(chunk).for_each(|c| hasher.update(c));
            assert_eq!(hasher.len(), data.len() as u64);
            assert_eq!(hasher.finish(), whole, "chunk size {chunk}");
        }
    }
}
