//! `Range: bytes=...` (RFC 9110 14.1.2), one range at a time.

use std::ops::Range;

/// What a `Range` field asks of a representation of `len` bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ByteRange {
    /// No usable range: send the whole representation (absent, not `bytes`, several ranges,
    /// or bad syntax; a server may ignore any of these).
    Whole,
    /// These bytes, end exclusive, within the representation.
    Part(Range<u64>),
    /// The range starts at or past the end: 416.
    Unsatisfiable,
}

impl ByteRange {
    /// Reads one field value against a representation of `len` bytes.
    pub fn parse(value: &str, len: u64) -> Self {
        let Some(spec) = value.trim().strip_prefix("bytes=") else {
            return Self::Whole;
        };
        if spec.contains(',') {
            return Self::Whole;
        }
        let Some((first, last)) = spec.trim().split_once('-') else {
            return Self::Whole;
        };
        let number = |s: &str| -> Option<u64> {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok())?
        };
        match (first.trim(), last.trim()) {
            ("", suffix) => match number(suffix) {
                None => Self::Whole,
                Some(0) => Self::Unsatisfiable,
                Some(_) if len == 0 => Self::Unsatisfiable,
                Some(n) => Self::Part(len.saturating_sub(n)..len),
            },
            (first, last) => {
                let Some(start) = number(first) else {
                    return Self::Whole;
                };
                let end = match last {
                    "" => None,
                    last => match number(last) {
                        Some(end) if end >= start => Some(end),
                        _ => return Self::Whole,
                    },
                };
                if start >= len {
                    return Self::Unsatisfiable;
                }
                Self::Part(start..end.map_or(len, |end| end.min(len - 1) + 1))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ByteRange::{self, *};

    #[test]
    fn ranges() {
        let cases: &[(&str, u64, ByteRange)] = &[
            ("bytes=0-0", 10, Part(0..1)),
            ("bytes=0-9", 10, Part(0..10)),
            ("bytes=2-5", 10, Part(2..6)),
            ("bytes=5-100", 10, Part(5..10)),
            ("bytes=5-", 10, Part(5..10)),
            ("bytes=-3", 10, Part(7..10)),
            ("bytes=-30", 10, Part(0..10)),
            ("bytes=10-", 10, Unsatisfiable),
            ("bytes=10-20", 10, Unsatisfiable),
            ("bytes=0-", 0, Unsatisfiable),
            ("bytes=-5", 0, Unsatisfiable),
            ("bytes=-0", 10, Unsatisfiable),
            ("bytes=5-2", 10, Whole),
            ("bytes=0-1,3-4", 10, Whole),
            ("bytes=a-b", 10, Whole),
            ("bytes=+1-2", 10, Whole),
            ("items=0-1", 10, Whole),
            ("bytes=", 10, Whole),
            ("bytes=-", 10, Whole),
        ];
        for (value, len, want) in cases {
            assert_eq!(ByteRange::parse(value, *len), *want, "{value} of {len}");
        }
    }
}
