//! A partition key value's effective partition key (version 2 hashing), the hexadecimal
//! string by which the SDKs scope a feed to a partition key: MurmurHash3 (x64, 128 bits, seed
//! 0) of the value's binary form (a type byte, then a little-endian double for a number, or
//! the UTF-8 bytes and 0xFF for a string), its bytes reversed, the two top bits cleared.
//! Checked against the values the Python SDK computes.

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
    let hash = murmur3::murmur3_x64_128(&mut bytes.as_slice(), 0).expect("a slice reads whole");
    // Its two 64-bit halves, the first in the low bits, each little-endian: reversed whole.
    let mut out = hash.to_be_bytes();
    out[0] &= 0x3F;
    out.iter().map(|b| format!("{b:02X}")).collect()
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
