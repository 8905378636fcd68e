//! Names as object path segments that sort as the names do, so that the store's own ordered
//! listing lists records in name order.
//!
//! Letters but `z`, and digits, stay as they are; every other byte becomes an escape character
//! and its two uppercase hex digits. The escape character of a byte lies between the letters and
//! digits around that byte (`-` below the digits, `=` between digits and capitals, `_` between
//! capitals and small letters, `z` above `y`), so an escaped byte sorts against any other as the
//! byte does; the code has no ambiguous prefix, and a closing `!` (below everything) makes a name
//! sort before the names it begins. Every character is one an object path keeps as it is.
//! Plain ASCII names keep their length; other bytes take three characters.

/// The segment of `name`: [`open`], then the closing `!`.
pub(crate) fn encode(name: &str) -> String {
    let mut out = open(name);
    out.push('!');
    out
}

/// The encoding of `name` without its closing `!`: what the segment of every name that starts
/// with `name` starts with, and what sorts just before the segment of `name` itself.
pub(crate) fn open(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for &byte in name.as_bytes() {
        match escape_of(byte) {
            None => out.push(char::from(byte)),
            Some(escape) => {
                out.push(escape);
                out.push_str(&format!("{byte:02X}"));
            }
        }
    }
    out
}

/// The name a segment made by [`encode`] stands for; `None` for any other segment.
pub(crate) fn decode(segment: &str) -> Option<String> {
    let body = segment.strip_suffix('!')?;
    let mut bytes = Vec::with_capacity(body.len());
    let mut chars = body.bytes();
    while let Some(c) = chars.next() {
        if escape_of(c).is_none() {
            bytes.push(c);
            continue;
        }
        let hex = [chars.next()?, chars.next()?];
        let byte = u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?;
        (escape_of(byte) == Some(char::from(c))).then_some(())?;
        bytes.push(byte);
    }
    String::from_utf8(bytes).ok()
}

/// The escape character of `byte`, or `None` when it stands for itself.
fn escape_of(byte: u8) -> Option<char> {
    match byte {
        b'0'..=b'9' | b'A'..=b'Z' | b'a'..=b'y' => None,
        ..b'0' => Some('-'),
        b':'..b'A' => Some('='),
        b'['..b'a' => Some('_'),
        b'z'.. => Some('z'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pseudo-random names over an alphabet that holds every kind of byte: letters, digits,
    /// each escape character, the closing `!`, `/`, `.`, and letters beyond ASCII.
    fn names() -> Vec<String> {
        let alphabet = [
            "a", "y", "z", "A", "Z", "0", "9", "-", "=", "_", "!", "/", ".", " ", "~", "é", "日",
            "\u{7f}", "\u{1}",
        ];
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x2545_F491_4F6C_DD1D);
        let mut names: Vec<String> = (0..3000)
            .map(|_| {
                let len = rng.random_range(0..6);
                (0..len)
                    .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                    .collect()
            })
            .collect();
        names.push(String::new());
        names
    }

    #[test]
    fn segments_sort_as_their_names_and_decode_to_them() {
        let names = names();
        for name in &names {
            let segment = encode(name);
            assert_eq!(decode(&segment).as_deref(), Some(name.as_str()));
            let path = object_store::path::Path::from_iter(["x", &segment]);
            assert_eq!(
                path.as_ref(),
                format!("x/{segment}"),
                "kept as it is: {name:?}"
            );
        }
        let mut by_name = names.clone();
        by_name.sort();
        let mut by_segment = names.clone();
        by_segment.sort_by_key(|name| encode(name));
        assert_eq!(by_name, by_segment);
    }

    #[test]
    fn an_open_prefix_starts_every_name_it_begins_and_sorts_before_the_name() {
        let names = names();
        for a in names.iter().take(300) {
            for b in &names {
                assert_eq!(
                    encode(b).starts_with(&open(a)),
                    b.starts_with(a.as_str()),
                    "{a:?} {b:?}"
                );
                assert_eq!(open(a) < encode(b), a <= b, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn other_segments_are_no_name() {
        for segment in ["", "abc", "a-2!", "a-41!", "a-4G!", "-FF!"] {
            assert_eq!(decode(segment), None, "{segment:?}");
        }
    }
}
