//! Blob index tags: a blob's key-value pairs, kept in its record (so a tag and the blob it names
//! change in one compare-and-swap), set with Set Blob Tags or `x-ms-tags` on an upload, and
//! tested by the conditional header `x-ms-if-tags`, evaluated in the one gate every operation
//! on a blob passes (`front/gate.rs`) against the record the operation changes.
//!
//! The rules, as Azure's reference gives them: at most 10 tags a blob; a key of 1 to 128
//! characters, a value of 0 to 256, each of letters, digits, space and `+ - . / : = _`
//! (400 `InvalidTag`; more than 10, 400 `TagsTooLarge`). A condition compares tags with
//! `=`, `<>`, `>`, `>=`, `<`, `<=`, the key in double quotes and the value in single ones,
//! joined by `AND` and `OR` (`AND` first) and grouped by parentheses; values compare as
//! strings, byte by byte. A key the blob has not makes its comparison false, `<>` included.
//! Find Blobs by Tags takes the narrower form Azure gives it: `AND` alone, no `<>`, and
//! `@container = 'name'` besides the tags.

use std::collections::BTreeMap;

use crate::error_code::ErrorCode;
use quick_xml::events::Event;

/// A blob's tags, by key.
pub type Tags = BTreeMap<String, String>;

/// The most tags a blob has.
pub const MAX_TAGS: usize = 10;
/// The longest key and value, in characters.
const MAX_KEY: usize = 128;
const MAX_VALUE: usize = 256;
/// The longest `x-ms-if-tags` condition read, in bytes, and the deepest nesting of its
/// parentheses: a condition's cost is bounded whatever it says.
const MAX_CONDITION: usize = 4096;
const MAX_DEPTH: usize = 16;

/// The conditional header.
pub const IF_TAGS: &str = "x-ms-if-tags";
/// The header that sets tags on an upload.
pub const TAGS: http::HeaderName = http::HeaderName::from_static("x-ms-tags");
/// The condition on a copy's source's tags (Copy Blob, Put Blob From URL, Append Block From
/// URL): 412 `SourceConditionNotMet` when false.
pub const SOURCE_IF_TAGS: &str = "x-ms-source-if-tags";
/// The header that tells how many tags a blob has, on reads.
pub const TAG_COUNT: &str = "x-ms-tag-count";

fn allowed(text: &str) -> bool {
    (text.chars()).all(|c| c.is_ascii_alphanumeric() || " +-./:=_".contains(c))
}

/// 400 `InvalidTag` unless every key and value keeps the rules; `TagsTooLarge` past 10.
pub fn check(tags: &Tags) -> Result<(), ErrorCode> {
    if tags.len() > MAX_TAGS {
        return Err(ErrorCode::TagsTooLarge);
    }
    let fits = |key: &String, value: &String| {
        (1..=MAX_KEY).contains(&key.chars().count())
            && value.chars().count() <= MAX_VALUE
            && allowed(key)
            && allowed(value)
    };
    match tags.iter().all(|(key, value)| fits(key, value)) {
        true => Ok(()),
        false => Err(ErrorCode::InvalidTag),
    }
}

/// The tags of `x-ms-tags` (`key=value&...`, form-encoded), checked; none without it.
pub fn from_header(headers: &http::HeaderMap) -> Result<Tags, ErrorCode> {
    let Some(value) = headers.get(TAGS) else {
        return Ok(Tags::new());
    };
    let text = value.to_str().map_err(|_| ErrorCode::InvalidTag)?;
    let mut tags = Tags::new();
    for (key, value) in form_urlencoded::parse(text.as_bytes()) {
        // A key given twice is not a set of tags.
        if tags.insert(key.into_owned(), value.into_owned()).is_some() {
            return Err(ErrorCode::InvalidTag);
        }
    }
    check(&tags)?;
    Ok(tags)
}

/// The body of Set Blob Tags: `<Tags><TagSet><Tag><Key>..</Key><Value>..</Value></Tag>..`,
/// checked.
pub fn parse(xml: &[u8]) -> Result<Tags, ErrorCode> {
    let invalid = ErrorCode::InvalidXmlDocument;
    let mut reader = quick_xml::Reader::from_reader(xml);
    reader.config_mut().trim_text(true);
    // The open elements' names, and the key and value of the tag being read.
    let mut path: Vec<Vec<u8>> = Vec::new();
    let (mut key, mut value): (Option<String>, Option<String>) = (None, None);
    let mut tags = Tags::new();
    loop {
        match reader.read_event().map_err(|_| invalid)? {
            Event::Decl(_) | Event::Comment(_) | Event::PI(_) => {}
            Event::Start(e) => {
                let name = e.local_name().as_ref().to_vec();
                let expected: &[u8] = match path.len() {
                    0 => b"Tags",
                    1 => b"TagSet",
                    2 => b"Tag",
                    3 if name == b"Key" || name == b"Value" => &name,
                    _ => return Err(invalid),
                };
                if name != expected {
                    return Err(invalid);
                }
                path.push(name);
            }
            Event::Empty(e) => match (path.len(), e.local_name().as_ref()) {
                (0, b"Tags") | (1, b"TagSet") => {
                    if path.is_empty() {
                        return Ok(tags);
                    }
                }
                (3, b"Value") => value = Some(String::new()),
                _ => return Err(invalid),
            },
            Event::Text(text) => {
                let text = text.decode().map_err(|_| invalid)?.into_owned();
                match path.last().map(Vec::as_slice) {
                    Some(b"Key") => key.get_or_insert_default().push_str(&text),
                    Some(b"Value") => value.get_or_insert_default().push_str(&text),
                    _ => return Err(invalid),
                }
            }
            // A character reference is its character; a named entity (`&amp;`, `&lt;`...)
            // stands for one no tag may have.
            Event::GeneralRef(reference) => {
                let resolved = reference.resolve_char_ref().map_err(|_| invalid)?;
                let c = resolved.ok_or(ErrorCode::InvalidTag)?;
                match path.last().map(Vec::as_slice) {
                    Some(b"Key") => key.get_or_insert_default().push(c),
                    Some(b"Value") => value.get_or_insert_default().push(c),
                    _ => return Err(invalid),
                }
            }
            Event::End(_) => {
                match path.pop().as_deref() {
                    Some(b"Key") => {
                        key.get_or_insert_default();
                    }
                    Some(b"Value") => {
                        value.get_or_insert_default();
                    }
                    Some(b"Tag") => {
                        let (Some(k), Some(v)) = (key.take(), value.take()) else {
                            return Err(invalid);
                        };
                        if tags.insert(k, v).is_some() {
                            return Err(ErrorCode::InvalidTag);
                        }
                        if tags.len() > MAX_TAGS {
                            return Err(ErrorCode::TagsTooLarge);
                        }
                    }
                    _ => {}
                }
                if path.is_empty() {
                    check(&tags)?;
                    return Ok(tags);
                }
            }
            _ => return Err(invalid),
        }
    }
}

/// The body of Get Blob Tags.
pub fn xml(tags: &Tags) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>{}",
        element(tags)
    )
}

/// The `<Tags>` element of `tags` (Get Blob Tags' body, each blob of a find).
pub fn element(tags: &Tags) -> String {
    let mut out = String::from("<Tags><TagSet>");
    for (key, value) in tags {
        // Keys and values are of characters XML need not escape (see `check`).
        out.push_str(&format!(
            "<Tag><Key>{key}</Key><Value>{value}</Value></Tag>"
        ));
    }
    out.push_str("</TagSet></Tags>");
    out
}

/// An `x-ms-if-tags` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// `"key" op 'value'`.
    Compare(String, Op, String),
    /// Both.
    And(Box<Condition>, Box<Condition>),
    /// Either.
    Or(Box<Condition>, Box<Condition>),
}

/// A condition's comparison: `=`, `<>`, `>`, `>=`, `<`, `<=`.
pub use ifmatch_azure::Comparison as Op;

impl Condition {
    /// Whether `tags` meet it.
    pub fn holds(&self, tags: &Tags) -> bool {
        match self {
            Self::Compare(key, op, value) => {
                (tags.get(key)).is_some_and(|have| op.holds(have.as_str().cmp(value.as_str())))
            }
            Self::And(a, b) => a.holds(tags) && b.holds(tags),
            Self::Or(a, b) => a.holds(tags) || b.holds(tags),
        }
    }

    /// Reads an `x-ms-if-tags` condition: 400 `InvalidHeaderValue` for one that is not.
    pub fn parse(text: &str) -> Result<Self, ErrorCode> {
        Self::read(text, false).ok_or(ErrorCode::InvalidHeaderValue)
    }

    /// Reads a Find Blobs by Tags expression (`AND` alone, no `<>`, `@container` allowed):
    /// 400 `InvalidQueryParameterValue` for one that is not.
    pub fn parse_find(text: &str) -> Result<Self, ErrorCode> {
        let found = Self::read(text, true).filter(Self::findable);
        found.ok_or(ErrorCode::InvalidQueryParameterValue)
    }

    fn read(text: &str, find: bool) -> Option<Self> {
        if text.len() > MAX_CONDITION {
            return None;
        }
        let mut parser = Parser {
            rest: text,
            depth: 0,
            find,
        };
        let condition = parser.or().ok()?;
        parser.rest.trim_start().is_empty().then_some(condition)
    }

    fn findable(&self) -> bool {
        match self {
            Self::Compare(_, op, _) => *op != Op::Ne,
            Self::And(a, b) => a.findable() && b.findable(),
            Self::Or(..) => false,
        }
    }

    /// The one container a find expression confines itself to (`@container = 'name'` among
    /// its terms), if it does: the others need not be read.
    pub fn container(&self) -> Option<&str> {
        match self {
            Self::Compare(key, Op::Eq, value) if key == CONTAINER => Some(value),
            Self::Compare(..) | Self::Or(..) => None,
            Self::And(a, b) => a.container().or(b.container()),
        }
    }

    /// The tag keys it names (not `@container`).
    pub fn keys(&self) -> Vec<&str> {
        match self {
            Self::Compare(key, ..) if key == CONTAINER => Vec::new(),
            Self::Compare(key, ..) => vec![key],
            Self::And(a, b) | Self::Or(a, b) => [a.keys(), b.keys()].concat(),
        }
    }
}

/// The name under which a Find expression's `@container` is compared: no tag key has an `@`.
pub const CONTAINER: &str = "@container";

/// Whether the request's `x-ms-if-tags`, if any, holds for `tags`: 412 `ConditionNotMet` when
/// it does not, 400 when it is not a condition.
pub fn gate(headers: &http::HeaderMap, tags: Option<&Tags>) -> Result<(), ErrorCode> {
    // By its name as a `HeaderName`: a `&str` is parsed and checked again on each lookup.
    const NAME: http::HeaderName = http::HeaderName::from_static(IF_TAGS);
    match meets(headers, NAME, tags)? {
        true => Ok(()),
        false => Err(ErrorCode::ConditionNotMet),
    }
}

/// Whether the condition in header `name`, if any, holds for `tags` (none: no tags); 400
/// `InvalidHeaderValue` when it is not a condition.
pub fn meets(
    headers: &http::HeaderMap,
    name: impl http::header::AsHeaderName,
    tags: Option<&Tags>,
) -> Result<bool, ErrorCode> {
    let Some(value) = headers.get(name) else {
        return Ok(true);
    };
    let text = value.to_str().map_err(|_| ErrorCode::InvalidHeaderValue)?;
    let condition = Condition::parse(text)?;
    Ok(condition.holds(tags.unwrap_or(&Tags::new())))
}

/// A recursive descent over the condition's text.
struct Parser<'a> {
    rest: &'a str,
    depth: usize,
    /// Whether `@container` may stand for a key.
    find: bool,
}

impl Parser<'_> {
    fn or(&mut self) -> Result<Condition, ErrorCode> {
        let mut left = self.and()?;
        while self.keyword("OR") {
            left = Condition::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Condition, ErrorCode> {
        let mut left = self.primary()?;
        while self.keyword("AND") {
            left = Condition::And(Box::new(left), Box::new(self.primary()?));
        }
        Ok(left)
    }

    fn primary(&mut self) -> Result<Condition, ErrorCode> {
        let bad = ErrorCode::InvalidHeaderValue;
        if self.symbol("(") {
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return Err(bad);
            }
            let inner = self.or()?;
            self.depth -= 1;
            return match self.symbol(")") {
                true => Ok(inner),
                false => Err(bad),
            };
        }
        let key = match self.find && self.symbol(CONTAINER) {
            true => CONTAINER.to_owned(),
            false => self.quoted('"')?,
        };
        let fits = (1..=MAX_KEY).contains(&key.chars().count()) && allowed(&key);
        if key != CONTAINER && !fits {
            return Err(bad);
        }
        let op = [
            ("<>", Op::Ne),
            (">=", Op::Ge),
            ("<=", Op::Le),
            ("=", Op::Eq),
            (">", Op::Gt),
            ("<", Op::Lt),
        ]
        .into_iter()
        .find(|(symbol, _)| self.symbol(symbol))
        .map(|(_, op)| op)
        .ok_or(bad)?;
        let value = self.quoted('\'')?;
        if value.chars().count() > MAX_VALUE || !allowed(&value) {
            return Err(bad);
        }
        Ok(Condition::Compare(key, op, value))
    }

    /// Text between two `quote`s.
    fn quoted(&mut self, quote: char) -> Result<String, ErrorCode> {
        let rest = self.rest.trim_start();
        let inner = rest
            .strip_prefix(quote)
            .ok_or(ErrorCode::InvalidHeaderValue)?;
        let end = inner.find(quote).ok_or(ErrorCode::InvalidHeaderValue)?;
        self.rest = &inner[end + 1..];
        Ok(inner[..end].to_owned())
    }

    fn symbol(&mut self, symbol: &str) -> bool {
        let rest = self.rest.trim_start();
        match rest.strip_prefix(symbol) {
            Some(after) => {
                self.rest = after;
                true
            }
            None => false,
        }
    }

    /// `word` (any case) followed by a space or a parenthesis.
    fn keyword(&mut self, word: &str) -> bool {
        let rest = self.rest.trim_start();
        let Some(head) = rest.get(..word.len()) else {
            return false;
        };
        let after = &rest[word.len()..];
        let ends = after.starts_with(|c: char| c.is_whitespace() || c == '(' || c == '"');
        if head.eq_ignore_ascii_case(word) && ends {
            self.rest = after;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> Tags {
        (pairs.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn conditions_compare_as_strings_with_and_before_or() {
        let blob = tags(&[("team", "a"), ("year", "2025")]);
        let holds = |text: &str| Condition::parse(text).unwrap().holds(&blob);
        assert!(holds("\"team\" = 'a'"));
        assert!(!holds("\"team\" = 'b'"));
        assert!(holds("\"team\"<>'b'"));
        assert!(holds("\"year\" >= '2025' AND \"year\" < '2026'"));
        assert!(!holds("\"year\" > '2025'"));
        assert!(holds("\"year\" <= '2025'"));
        // AND binds first: false OR (true AND true).
        assert!(holds(
            "\"team\" = 'b' OR \"team\" = 'a' AND \"year\" = '2025'"
        ));
        assert!(!holds(
            "(\"team\" = 'b' OR \"team\" = 'a') AND \"year\" = '2024'"
        ));
        assert!(holds("\"team\" = 'x' or (\"year\" = '2025')"));
        // A key the blob has not: every comparison false.
        assert!(!holds("\"owner\" <> 'a'"));
        assert!(
            !Condition::parse("\"team\" = 'a'")
                .unwrap()
                .holds(&Tags::new())
        );
    }

    #[test]
    fn what_is_not_a_condition_is_refused() {
        let deep = format!("{}\"a\" = 'b'{}", "(".repeat(17), ")".repeat(17));
        let long = format!("\"a\" = '{}'", "b".repeat(257));
        for bad in [
            "",
            "team = 'a'",
            "\"team\" == 'a'",
            "\"team\" = a",
            "\"team\" = 'a' AND",
            "\"team\" = 'a' XOR \"b\" = 'c'",
            "(\"team\" = 'a'",
            "\"team\" = 'a')",
            "\"\" = 'a'",
            "\"te;am\" = 'a'",
            "\"team\" = 'a'ANDx",
            &deep,
            &long,
        ] {
            assert_eq!(
                Condition::parse(bad),
                Err(ErrorCode::InvalidHeaderValue),
                "{bad}"
            );
        }
        let sixteen = format!("{}\"a\" = 'b'{}", "(".repeat(16), ")".repeat(16));
        assert!(Condition::parse(&sixteen).is_ok());
    }

    #[test]
    fn find_expressions_take_and_alone_and_the_container() {
        let found = Condition::parse_find("@container = 'box' AND \"team\" >= 'a'").unwrap();
        let mut blob = tags(&[("team", "b")]);
        assert!(!found.holds(&blob), "no @container given");
        blob.insert(CONTAINER.into(), "box".into());
        assert!(found.holds(&blob));
        assert_eq!(found.keys(), vec!["team"]);
        for bad in [
            "\"a\" = 'b' OR \"c\" = 'd'",
            "\"a\" <> 'b'",
            "",
            "@container",
        ] {
            assert_eq!(
                Condition::parse_find(bad),
                Err(ErrorCode::InvalidQueryParameterValue),
                "{bad}"
            );
        }
        // `@container` is Find's alone.
        assert_eq!(
            Condition::parse("@container = 'box'"),
            Err(ErrorCode::InvalidHeaderValue)
        );
    }

    #[test]
    fn tags_keep_azures_limits_one_past_each_refused() {
        let ten: Tags = (0..10).map(|n| (format!("k{n}"), "v".into())).collect();
        assert_eq!(check(&ten), Ok(()));
        let mut eleven = ten.clone();
        eleven.insert("k10".into(), "v".into());
        assert_eq!(check(&eleven), Err(ErrorCode::TagsTooLarge));
        let key = |len: usize| tags(&[(&"k".repeat(len), "v")]);
        assert_eq!(check(&key(128)), Ok(()));
        assert_eq!(check(&key(129)), Err(ErrorCode::InvalidTag));
        assert_eq!(check(&key(0)), Err(ErrorCode::InvalidTag));
        let value = |len: usize| tags(&[("k", &"v".repeat(len))]);
        assert_eq!(check(&value(0)), Ok(()));
        assert_eq!(check(&value(256)), Ok(()));
        assert_eq!(check(&value(257)), Err(ErrorCode::InvalidTag));
        assert_eq!(check(&tags(&[("a b+-./:=_9", "Z z+-./:=_0")])), Ok(()));
        for bad in ["a&b", "a<b", "caf\u{e9}", "a,b", "a\"b"] {
            assert_eq!(
                check(&tags(&[("k", bad)])),
                Err(ErrorCode::InvalidTag),
                "{bad}"
            );
            assert_eq!(
                check(&tags(&[(bad, "v")])),
                Err(ErrorCode::InvalidTag),
                "{bad}"
            );
        }
    }

    #[test]
    fn set_blob_tags_bodies_read_and_write_back() {
        let body = b"<?xml version=\"1.0\" encoding=\"utf-8\"?><Tags><TagSet>\
            <Tag><Key>team</Key><Value>a</Value></Tag><Tag><Key>empty</Key><Value /></Tag>\
            </TagSet></Tags>";
        let read = parse(body).unwrap();
        assert_eq!(read, tags(&[("team", "a"), ("empty", "")]));
        assert_eq!(parse(xml(&read).as_bytes()).unwrap(), read);
        assert_eq!(parse(b"<Tags><TagSet/></Tags>").unwrap(), Tags::new());
        assert_eq!(parse(b"<Tags/>").unwrap(), Tags::new());
        for bad in [
            &b"<Tags><TagSet><Tag><Key>a</Key></Tag></TagSet></Tags>"[..],
            b"<Tags><TagSet><Tag><Value>a</Value></Tag></TagSet></Tags>",
            b"<Tags><Other/></Tags>",
            b"<Tags><TagSet><Tag><Key>a</Key><Value>b</Value>",
            b"not xml",
        ] {
            assert_eq!(parse(bad), Err(ErrorCode::InvalidXmlDocument));
        }
        let twice = b"<Tags><TagSet><Tag><Key>a</Key><Value>1</Value></Tag>\
            <Tag><Key>a</Key><Value>2</Value></Tag></TagSet></Tags>";
        assert_eq!(parse(twice), Err(ErrorCode::InvalidTag));
        let referenced =
            b"<Tags><TagSet><Tag><Key>&#107;</Key><Value>a&#x2F;b</Value></Tag></TagSet></Tags>";
        assert_eq!(parse(referenced).unwrap(), tags(&[("k", "a/b")]));
        let named = b"<Tags><TagSet><Tag><Key>k</Key><Value>a&amp;b</Value></Tag></TagSet></Tags>";
        assert_eq!(parse(named), Err(ErrorCode::InvalidTag));
    }

    #[test]
    fn x_ms_tags_is_form_encoded() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(from_header(&headers), Ok(Tags::new()));
        headers.insert(TAGS, "team=a&path=x%2Fy&empty=".parse().unwrap());
        let read = from_header(&headers).unwrap();
        assert_eq!(read, tags(&[("team", "a"), ("path", "x/y"), ("empty", "")]));
        headers.insert(TAGS, "a=1&a=2".parse().unwrap());
        assert_eq!(from_header(&headers), Err(ErrorCode::InvalidTag));
        headers.insert(TAGS, "a=%26".parse().unwrap());
        assert_eq!(from_header(&headers), Err(ErrorCode::InvalidTag));
    }
}
