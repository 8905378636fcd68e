//! The Avro the change feed is written in: an object container file (Avro 1.11's "Object
//! Container Files": the magic, the schema in the header, one block of records, the sync
//! marker), uncompressed, and the binary encodings of the types its schema uses.
//!
//! Written here rather than with the `apache-avro` crate: the feed writes one fixed schema and
//! never reads, which takes the few encodings below, while that crate (its schema parser,
//! codecs and serde layer) would grow the Worker, already at its size goal.

/// An Avro `long` (and `int`): zig-zag, then little-endian base-128.
pub(crate) fn long(out: &mut Vec<u8>, value: i64) {
    let mut n = ((value << 1) ^ (value >> 63)) as u64;
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Avro `bytes`: the length, then the bytes.
pub(crate) fn bytes(out: &mut Vec<u8>, value: &[u8]) {
    long(out, value.len() as i64);
    out.extend_from_slice(value);
}

/// An Avro `string`: its UTF-8 as `bytes`.
pub(crate) fn string(out: &mut Vec<u8>, value: &str) {
    bytes(out, value.as_bytes());
}

/// An Avro `map` of strings: one block of its entries, then the empty block that ends it.
pub(crate) fn string_map<'a>(
    out: &mut Vec<u8>,
    entries: impl ExactSizeIterator<Item = (&'a str, &'a str)>,
) {
    if entries.len() > 0 {
        long(out, entries.len() as i64);
        for (key, value) in entries {
            string(out, key);
            string(out, value);
        }
    }
    long(out, 0);
}

/// An object container file of the records `encoded` (each already in `schema`'s binary
/// encoding), in one block, ended by `sync`: the same records and sync give the same bytes.
pub(crate) fn container(schema: &str, sync: [u8; 16], encoded: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"Obj\x01".to_vec();
    // The header's metadata: a map of bytes.
    long(&mut out, 2);
    string(&mut out, "avro.schema");
    bytes(&mut out, schema.as_bytes());
    string(&mut out, "avro.codec");
    bytes(&mut out, b"null");
    long(&mut out, 0);
    out.extend_from_slice(&sync);
    if !encoded.is_empty() {
        long(&mut out, encoded.len() as i64);
        long(&mut out, encoded.iter().map(Vec::len).sum::<usize>() as i64);
        for record in encoded {
            out.extend_from_slice(record);
        }
        out.extend_from_slice(&sync);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longs_are_zigzag_varints() {
        let encoded = |v: i64| {
            let mut out = Vec::new();
            long(&mut out, v);
            out
        };
        // The specification's table.
        assert_eq!(encoded(0), [0x00]);
        assert_eq!(encoded(-1), [0x01]);
        assert_eq!(encoded(1), [0x02]);
        assert_eq!(encoded(-64), [0x7f]);
        assert_eq!(encoded(64), [0x80, 0x01]);
        assert_eq!(encoded(i64::MIN).len(), 10);
    }

    #[test]
    fn a_container_starts_with_the_magic_and_ends_with_its_sync() {
        let file = container("\"string\"", [7; 16], &[vec![2, b'h']]);
        assert!(file.starts_with(b"Obj\x01"));
        assert!(file.ends_with(&[7; 16]));
        let empty = container("\"string\"", [7; 16], &[]);
        assert_eq!(empty.iter().filter(|&&b| b == 7).count(), 16);
    }
}
