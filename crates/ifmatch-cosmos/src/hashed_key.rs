//! A partition key value's effective partition key (version 2 hashing), the hexadecimal
//! string by which the SDKs scope a feed to a partition key: MurmurHash3 (x64, 128 bits, seed
//! 0) of the value's binary form (a type byte, then a little-endian double for a number, or
//! the UTF-8 bytes and 0xFF for a string), its bytes reversed, the two top bits cleared.
//! Written from the algorithm, and checked against the values the Python SDK computes.

use serde_json::Value as Json;

/// The effective partition key of a one-path partition key `value`, in upper-case hex.
pub fn effective(value: &Json) -> String {
    let mut bytes = Vec::new();
    match value {
        Json::Bool(true) => bytes.push(0x03),
        Json::Bool(false) => bytes.push(0x02),
        Json::Null => bytes.push(0x01),
        Json::Number(n) => {
            bytes.push(0x05);
            bytes.extend_from_slice(&n.as_f64().unwrap_or_default().to_le_bytes());
        }
        Json::String(s) => {
            bytes.push(0x08);
            bytes.extend_from_slice(s.as_bytes());
            bytes.push(0xFF);
        }
        // `{}`, the value of a document without one, hashes as null does.
        _ => bytes.push(0x01),
    }
    let (h1, h2) = murmur3_x64_128(&bytes);
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&h1.to_le_bytes());
    out[8..].copy_from_slice(&h2.to_le_bytes());
    out.reverse();
    out[0] &= 0x3F;
    out.iter().map(|b| format!("{b:02X}")).collect()
}

/// MurmurHash3, x64 variant, 128 bits, seed 0 (Austin Appleby's public-domain algorithm).
fn murmur3_x64_128(data: &[u8]) -> (u64, u64) {
    const C1: u64 = 0x87c3_7b91_1142_53d5;
    const C2: u64 = 0x4cf5_ad43_2745_937f;
    let (mut h1, mut h2) = (0u64, 0u64);
    let blocks = data.len() / 16;
    for i in 0..blocks {
        let block = &data[i * 16..i * 16 + 16];
        let mut k1 = u64::from_le_bytes(block[..8].try_into().expect("8 bytes"));
        let mut k2 = u64::from_le_bytes(block[8..].try_into().expect("8 bytes"));
        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }
    let tail = &data[blocks * 16..];
    let (mut k1, mut k2) = (0u64, 0u64);
    for (i, byte) in tail.iter().enumerate() {
        match i {
            0..8 => k1 ^= u64::from(*byte) << (8 * i),
            _ => k2 ^= u64::from(*byte) << (8 * (i - 8)),
        }
    }
    if tail.len() > 8 {
        h2 ^= k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
    }
    if !tail.is_empty() {
        h1 ^= k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
    }
    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = mix(h1);
    h2 = mix(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

fn mix(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn effective_keys_are_the_sdks() {
        // As azure-cosmos 4.17.1's PartitionKey(kind="Hash", version=2) computes them.
        for (value, expected) in [
            (json!("ann"), "04240155678B652CA977BFD80F38037A"),
            (json!(""), "32E9366E637A71B4E710384B2F4970A0"),
            (json!("p0"), "03A4DE7195849FD7388755761E4E5CC0"),
            (json!(1), "20CD98B339BA78A5D0CF6953B87070B0"),
            (json!(1.5), "35C5DDEB6C795D16A9963C73C54E97BC"),
            (json!(-3), "30478B3D0E0AD5DBC95C665464636106"),
            (json!(true), "0E711127C5B5A8E4726AC6DD306A3E59"),
            (json!(false), "2FE1BE91E90A3439635E0E9E37361EF2"),
            (json!(null), "378867E4430E67857ACE5C908374FE16"),
            (json!("x".repeat(150)), "165D5EACD9E5ED8FE2683C0B57ED57CC"),
            (json!("ünï"), "37D1742E5E4FEB586EBD12C0D62B2B66"),
        ] {
            assert_eq!(effective(&value), expected, "{value}");
        }
    }
}
