//! Entity-tags and the lists of them carried by `If-Match` and `If-None-Match`
//! (RFC 9110 section 8.8.3 and 13.1.1-13.1.2).

use std::fmt;
use std::str::FromStr;

use http::HeaderValue;

/// The error for a value that is not a valid entity-tag or entity-tag list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid entity-tag syntax")]
#[non_exhaustive]
pub struct InvalidEntityTag;

/// An entity-tag: `"opaque"` (strong) or `W/"opaque"` (weak).
///
/// The opaque part is kept as bytes: RFC 9110 allows `obs-text` (bytes 0x80-0xFF) in it,
/// which need not be UTF-8. Tags are case-sensitive and compared byte for byte. A tag holds
/// its field form, made once: every answer that carries it (each 304 of a cached record)
/// shares it, with no copy and no check of its bytes again.
#[derive(Clone)]
pub struct EntityTag {
    weak: bool,
    /// `"opaque"` or `W/"opaque"`.
    field: HeaderValue,
}

impl EntityTag {
    /// A strong tag with this opaque part (without the quotes).
    pub fn strong(opaque: impl AsRef<[u8]>) -> Result<Self, InvalidEntityTag> {
        Self::new(false, opaque.as_ref())
    }

    /// A weak tag with this opaque part (without the quotes or `W/`).
    pub fn weak(opaque: impl AsRef<[u8]>) -> Result<Self, InvalidEntityTag> {
        Self::new(true, opaque.as_ref())
    }

    fn new(weak: bool, opaque: &[u8]) -> Result<Self, InvalidEntityTag> {
        if opaque.iter().all(|&b| is_etagc(b)) {
            Ok(Self::of_valid(weak, opaque))
        } else {
            Err(InvalidEntityTag)
        }
    }

    /// The tag of an opaque part already checked to be `etagc` bytes.
    fn of_valid(weak: bool, opaque: &[u8]) -> Self {
        // Exactly the tag's length: a `Vec` full to its capacity becomes `Bytes` without a
        // second allocation.
        let mut bytes = Vec::with_capacity(usize::from(weak) * 2 + opaque.len() + 2);
        if weak {
            bytes.extend_from_slice(b"W/");
        }
        bytes.push(b'"');
        bytes.extend_from_slice(opaque);
        bytes.push(b'"');
        Self {
            weak,
            field: HeaderValue::from_maybe_shared(bytes::Bytes::from(bytes))
                .expect("etagc bytes and quotes are valid field bytes"),
        }
    }

    /// Parses exactly one entity-tag, such as the value of an `ETag` field.
    /// Surrounding optional whitespace is allowed; anything else around the tag is not.
    pub fn parse(input: impl AsRef<[u8]>) -> Result<Self, InvalidEntityTag> {
        match parse_prefix(trim_ows(input.as_ref())) {
            Some((tag, [])) => Ok(tag.to_owned()),
            _ => Err(InvalidEntityTag),
        }
    }

    /// Parses the `ETag` field of a response.
    pub fn from_header(value: &HeaderValue) -> Result<Self, InvalidEntityTag> {
        Self::parse(value.as_bytes())
    }

    /// Whether the tag carries the weakness indicator `W/`.
    pub fn is_weak(&self) -> bool {
        self.weak
    }

    /// The opaque part, without quotes and without `W/`.
    pub fn opaque(&self) -> &[u8] {
        let field = self.field.as_bytes();
        let start = if self.weak { 3 } else { 1 };
        &field[start..field.len() - 1]
    }

    /// Strong comparison (RFC 9110 8.8.3.2): both strong and the opaque parts identical.
    pub fn strong_eq(&self, other: &Self) -> bool {
        !self.weak && !other.weak && self.opaque() == other.opaque()
    }

    /// Weak comparison (RFC 9110 8.8.3.2): the opaque parts identical, weakness ignored.
    pub fn weak_eq(&self, other: &Self) -> bool {
        self.opaque() == other.opaque()
    }

    /// Whether `field` is this strong tag as an `ETag` field writes it, and nothing else.
    pub(crate) fn is_written_as(&self, field: &[u8]) -> bool {
        !self.weak && self.field.as_bytes() == field
    }

    /// The tag as a field value, ready for an `ETag` header: shared, not copied.
    pub fn to_header_value(&self) -> HeaderValue {
        self.field.clone()
    }
}

/// Equal when both are weak or both strong and their opaque parts are the same bytes: their
/// field forms are then the same bytes.
impl PartialEq for EntityTag {
    fn eq(&self, other: &Self) -> bool {
        self.field.as_bytes() == other.field.as_bytes()
    }
}

impl Eq for EntityTag {}

impl std::hash::Hash for EntityTag {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.field.as_bytes().hash(state);
    }
}

impl fmt::Display for EntityTag {
    /// Writes the tag in its wire form. `obs-text` bytes are written lossily.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.field.as_bytes()))
    }
}

impl fmt::Debug for EntityTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for EntityTag {
    type Err = InvalidEntityTag;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl serde::Serialize for EntityTag {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for EntityTag {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The value of an `If-Match` or `If-None-Match` field: `*` or a list of entity-tags.
///
/// Several field lines of one field form one list (RFC 9110 5.3). Elements are separated by
/// commas outside quotes, so an opaque part may itself contain commas. Empty list elements
/// are skipped (RFC 9110 5.6.1). `*` must stand alone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EntityTagList {
    /// `*`: any current representation.
    Any,
    /// A list of tags; possibly empty when the field held only empty elements.
    Tags(Vec<EntityTag>),
}

impl EntityTagList {
    /// Parses the field lines of one field, in order, as one list.
    pub fn parse<I, B>(field_lines: I) -> Result<Self, InvalidEntityTag>
    where
        I: IntoIterator<Item = B>,
        B: AsRef<[u8]>,
    {
        let lines: Vec<B> = field_lines.into_iter().collect();
        let mut tags = Vec::new();
        let shape = scan_list(lines.iter().map(AsRef::as_ref), |tag| {
            tags.push(tag.to_owned())
        })?;
        Ok(if shape.any {
            Self::Any
        } else {
            Self::Tags(tags)
        })
    }

    /// Parses a one-line field value.
    pub fn parse_str(value: &str) -> Result<Self, InvalidEntityTag> {
        Self::parse([value])
    }

    /// The list as one field value: `*`, or the tags joined by `", "`.
    pub fn to_header_value(&self) -> HeaderValue {
        let bytes = match self {
            Self::Any => b"*".to_vec(),
            Self::Tags(tags) => {
                let mut out = Vec::new();
                for (i, tag) in tags.iter().enumerate() {
                    if i > 0 {
                        out.extend_from_slice(b", ");
                    }
                    out.extend_from_slice(tag.field.as_bytes());
                }
                out
            }
        };
        HeaderValue::from_maybe_shared(bytes::Bytes::from(bytes))
            .expect("tags and separators are valid field bytes")
    }

    /// Whether any listed tag strongly matches `current` (`*` matches any tag).
    pub fn matches_strong(&self, current: &EntityTag) -> bool {
        match self {
            Self::Any => true,
            Self::Tags(tags) => tags.iter().any(|t| t.strong_eq(current)),
        }
    }

    /// Whether any listed tag weakly matches `current` (`*` matches any tag).
    pub fn matches_weak(&self, current: &EntityTag) -> bool {
        match self {
            Self::Any => true,
            Self::Tags(tags) => tags.iter().any(|t| t.weak_eq(current)),
        }
    }
}

impl fmt::Display for EntityTagList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Any => f.write_str("*"),
            Self::Tags(tags) => {
                for (i, tag) in tags.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{tag}")?;
                }
                Ok(())
            }
        }
    }
}

/// An entity-tag borrowed from a field value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TagRef<'a> {
    weak: bool,
    opaque: &'a [u8],
}

impl TagRef<'_> {
    pub(crate) fn strong_eq(self, other: &EntityTag) -> bool {
        !self.weak && !other.weak && self.opaque == other.opaque()
    }

    pub(crate) fn weak_eq(self, other: &EntityTag) -> bool {
        self.opaque == other.opaque()
    }

    fn to_owned(self) -> EntityTag {
        EntityTag::of_valid(self.weak, self.opaque)
    }
}

/// What a scanned list held: `*`, or a number of tags.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ListShape {
    pub(crate) any: bool,
    pub(crate) tags: usize,
}

/// Scans the field lines of an `If-Match` / `If-None-Match` field as one list without
/// allocating, handing each tag to `visit`. Fails on invalid syntax, including `*` that does
/// not stand alone; tags before the fault have been visited by then.
pub(crate) fn scan_list<'a>(
    field_lines: impl IntoIterator<Item = &'a [u8]>,
    mut visit: impl FnMut(TagRef<'a>),
) -> Result<ListShape, InvalidEntityTag> {
    let mut stars = 0usize;
    let mut tags = 0usize;
    for line in field_lines {
        let mut rest = line;
        loop {
            rest = trim_ows(rest);
            match rest {
                [] => break,
                [b',', tail @ ..] => {
                    rest = tail;
                    continue;
                }
                [b'*', tail @ ..] => {
                    stars += 1;
                    rest = tail;
                }
                _ => {
                    let (tag, tail) = parse_prefix(rest).ok_or(InvalidEntityTag)?;
                    tags += 1;
                    visit(tag);
                    rest = tail;
                }
            }
            rest = trim_ows(rest);
            match rest {
                [] => break,
                [b',', tail @ ..] => rest = tail,
                _ => return Err(InvalidEntityTag),
            }
        }
    }
    match (stars, tags) {
        (0, _) => Ok(ListShape { any: false, tags }),
        (1, 0) => Ok(ListShape { any: true, tags: 0 }),
        _ => Err(InvalidEntityTag),
    }
}

/// `etagc = %x21 / %x23-7E / obs-text`
fn is_etagc(b: u8) -> bool {
    b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// Parses one entity-tag at the start of `input`, returning it and the rest.
fn parse_prefix(input: &[u8]) -> Option<(TagRef<'_>, &[u8])> {
    let (weak, quoted) = match input {
        [b'W', b'/', rest @ ..] => (true, rest),
        rest => (false, rest),
    };
    let body = quoted.strip_prefix(b"\"")?;
    // The closing quote, then every byte before it etagc (`"` is not one): the same as the
    // first byte that is not etagc being the quote, in a check without a branch a byte, which
    // the compiler makes wide (every conditional request scans a 64-digit tag here).
    let end = body.iter().position(|&b| b == b'"')?;
    let opaque = &body[..end];
    if !opaque.iter().fold(true, |all, &b| all & is_etagc(b)) {
        return None;
    }
    Some((TagRef { weak, opaque }, &body[end + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(list: &[(&str, bool)]) -> EntityTagList {
        EntityTagList::Tags(
            list.iter()
                .map(|&(o, weak)| {
                    if weak {
                        EntityTag::weak(o)
                    } else {
                        EntityTag::strong(o)
                    }
                    .unwrap()
                })
                .collect(),
        )
    }

    #[test]
    fn parses_single_tags() {
        let cases: &[(&str, Option<(&str, bool)>)] = &[
            (r#""abc""#, Some(("abc", false))),
            (r#"W/"abc""#, Some(("abc", true))),
            (r#""""#, Some(("", false))),
            (r#"  "a"  "#, Some(("a", false))),
            (r#""a,b""#, Some(("a,b", false))),
            (r#"w/"abc""#, None),
            (r#"abc"#, None),
            (r#""abc"#, None),
            (r#""ab"c""#, None),
            (r#""a b""#, None),
            (r#"W/ "a""#, None),
            (r#""a", "b""#, None),
            ("*", None),
            ("", None),
        ];
        for (input, want) in cases {
            let got = EntityTag::parse(input).ok();
            let want = want.map(|(o, weak)| {
                if weak {
                    EntityTag::weak(o)
                } else {
                    EntityTag::strong(o)
                }
                .unwrap()
            });
            assert_eq!(got, want, "input {input:?}");
        }
    }

    #[test]
    fn obs_text_is_allowed() {
        let tag = EntityTag::parse(b"\"caf\xe9\"").unwrap();
        assert_eq!(tag.opaque(), b"caf\xe9");
        assert_eq!(tag.to_header_value().as_bytes(), b"\"caf\xe9\"");
    }

    #[test]
    fn comparison_table_of_rfc_9110() {
        // RFC 9110 8.8.3.2, the four rows of the example table.
        let cases = [
            (r#"W/"1""#, r#"W/"1""#, false, true),
            (r#"W/"1""#, r#"W/"2""#, false, false),
            (r#"W/"1""#, r#""1""#, false, true),
            (r#""1""#, r#""1""#, true, true),
        ];
        for (a, b, strong, weak) in cases {
            let (a, b) = (EntityTag::parse(a).unwrap(), EntityTag::parse(b).unwrap());
            assert_eq!(a.strong_eq(&b), strong, "{a} strong {b}");
            assert_eq!(a.weak_eq(&b), weak, "{a} weak {b}");
        }
    }

    #[test]
    fn parses_lists() {
        let cases: &[(&[&str], Option<EntityTagList>)] = &[
            (&["*"], Some(EntityTagList::Any)),
            (&[" * "], Some(EntityTagList::Any)),
            (&[r#""a""#], Some(tags(&[("a", false)]))),
            (&[r#""a", W/"b""#], Some(tags(&[("a", false), ("b", true)]))),
            (
                &[r#""a,b", "c""#],
                Some(tags(&[("a,b", false), ("c", false)])),
            ),
            (
                &[r#""a""#, r#""b""#],
                Some(tags(&[("a", false), ("b", false)])),
            ),
            (
                &[r#",, "a" ,,"b","#],
                Some(tags(&[("a", false), ("b", false)])),
            ),
            (&[r#""a""b""#], None),
            (&[r#""a" x"#], None),
            (&[""], Some(EntityTagList::Tags(vec![]))),
            (&["*, \"a\""], None),
            (&["*", "*"], None),
            (&["*", r#""a""#], None),
            (&["a"], None),
        ];
        for (lines, want) in cases {
            assert_eq!(
                EntityTagList::parse(lines.iter()).ok(),
                *want,
                "lines {lines:?}"
            );
        }
    }

    #[test]
    fn lists_format_and_serde_round_trip() {
        let list = tags(&[("a,b", false), ("c", true)]);
        assert_eq!(list.to_header_value(), r#""a,b", W/"c""#);
        assert_eq!(
            EntityTagList::parse([list.to_header_value().as_bytes()]).unwrap(),
            list
        );
        let tag = EntityTag::weak("x").unwrap();
        let json = serde_json::to_string(&tag).unwrap();
        assert_eq!(json, r#""W/\"x\"""#);
        assert_eq!(serde_json::from_str::<EntityTag>(&json).unwrap(), tag);
    }
}
