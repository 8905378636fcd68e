//! The `$filter` of Query Entities and Query Tables: the part of OData's expression language
//! the Table service takes, parsed into a [`Filter`] and evaluated against an [`Entity`].
//!
//! ```text
//! filter     = or
//! or         = and *( "or" and )
//! and        = not *( "and" not )
//! not        = "not" not / primary
//! primary    = "(" or ")" / operand [ op operand ]     ; a lone operand must be boolean
//! op         = "eq" / "ne" / "gt" / "ge" / "lt" / "le"
//! operand    = property / literal
//! literal    = 'text' ('' for a quote) / datetime'...' / guid'...' / X'hex' / binary'hex'
//!            / integer [ "L" ] / decimal / "true" / "false"
//! ```
//!
//! As the service evaluates it: a comparison of a property the entity does not have, or of
//! values of unrelated types (a string against a number), matches nothing, `ne` included;
//! strings compare by their bytes. At most [`MAX_COMPARISONS`] comparisons, as Azure allows,
//! and a bounded nesting: a hostile filter is refused before it costs anything.

use ifmatch_azure::Comparison as Op;

use crate::value::{DateTime, Entity, Value};

/// The most comparisons a filter may hold (Azure's limit).
pub const MAX_COMPARISONS: usize = 15;

/// The deepest nesting of parentheses and `not` a filter may hold.
const MAX_DEPTH: usize = 32;

/// Why a `$filter` was refused: the service answers 400 `InvalidInput`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid $filter at byte {at}: {what}")]
pub struct FilterError {
    /// Where in the filter.
    pub at: usize,
    /// What was wrong.
    pub what: &'static str,
}

/// A parsed `$filter`.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    expression: Expression,
}

#[derive(Debug, Clone, PartialEq)]
enum Expression {
    And(Box<Expression>, Box<Expression>),
    Or(Box<Expression>, Box<Expression>),
    Not(Box<Expression>),
    Compare(Operand, Op, Operand),
    /// A lone boolean operand: a property (`IsActive`) or `true` / `false`.
    Is(Operand),
}

#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Property(String),
    Literal(Value),
}

impl Filter {
    /// Parses `text`, the decoded value of `$filter`.
    pub fn parse(text: &str) -> Result<Self, FilterError> {
        let mut parser = Parser {
            tokens: tokens(text)?,
            next: 0,
            comparisons: 0,
            end: text.len(),
        };
        let expression = parser.or(0)?;
        match parser.tokens.get(parser.next) {
            None => Ok(Self { expression }),
            Some((at, _)) => Err(FilterError {
                at: *at,
                what: "more follows a whole expression",
            }),
        }
    }

    /// Whether `entity` is one the filter selects.
    pub fn matches(&self, entity: &Entity) -> bool {
        self.expression.holds(entity)
    }

    /// The partition the filter is limited to, when it says `PartitionKey eq '...'` at its top
    /// level (alone, or as one side of an `and`): a query reads that partition only.
    pub fn partition(&self) -> Option<&str> {
        self.expression.partition()
    }
}

impl Expression {
    fn holds(&self, entity: &Entity) -> bool {
        match self {
            Self::And(a, b) => a.holds(entity) && b.holds(entity),
            Self::Or(a, b) => a.holds(entity) || b.holds(entity),
            Self::Not(a) => !a.holds(entity),
            Self::Is(operand) => operand.value(entity) == Some(Value::Boolean(true)),
            Self::Compare(left, op, right) => {
                let (Some(left), Some(right)) = (left.value(entity), right.value(entity)) else {
                    return false;
                };
                left.compare(&right)
                    .is_some_and(|ordering| op.holds(ordering))
            }
        }
    }

    fn partition(&self) -> Option<&str> {
        match self {
            Self::And(a, b) => a.partition().or_else(|| b.partition()),
            Self::Compare(
                Operand::Property(name),
                Op::Eq,
                Operand::Literal(Value::String(key)),
            )
            | Self::Compare(
                Operand::Literal(Value::String(key)),
                Op::Eq,
                Operand::Property(name),
            ) if name == "PartitionKey" => Some(key),
            _ => None,
        }
    }
}

impl Operand {
    fn value(&self, entity: &Entity) -> Option<Value> {
        match self {
            Self::Property(name) => entity.get(name),
            Self::Literal(value) => Some(value.clone()),
        }
    }
}

/// The comparison an OData word names.
fn comparison(word: &str) -> Option<Op> {
    Some(match word {
        "eq" => Op::Eq,
        "ne" => Op::Ne,
        "gt" => Op::Gt,
        "ge" => Op::Ge,
        "lt" => Op::Lt,
        "le" => Op::Le,
        _ => return None,
    })
}

/// A token, and the byte it starts at.
type Spanned = (usize, Token);

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Open,
    Close,
    /// A word: a keyword, an operator or a property name.
    Word(String),
    Literal(Value),
}

/// `text` cut into tokens.
fn tokens(text: &str) -> Result<Vec<Spanned>, FilterError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    while at < b.len() {
        let start = at;
        let fail = |what| Err(FilterError { at: start, what });
        match b[at] {
            b' ' | b'\t' | b'\r' | b'\n' => at += 1,
            b'(' => (out.push((at, Token::Open)), at += 1).1,
            b')' => (out.push((at, Token::Close)), at += 1).1,
            b'\'' => {
                let (text, end) = quoted(text, at).ok_or(FilterError {
                    at,
                    what: "a string is not closed",
                })?;
                out.push((at, Token::Literal(Value::String(text))));
                at = end;
            }
            b'-' | b'0'..=b'9' => {
                let end = (at + 1..b.len())
                    .find(|i| !(b[*i].is_ascii_alphanumeric() || b".+-".contains(&b[*i])))
                    .unwrap_or(b.len());
                let Some(value) = number(&text[at..end]) else {
                    return fail("not a number");
                };
                out.push((at, Token::Literal(value)));
                at = end;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let end = (at..b.len())
                    .find(|i| !(b[*i].is_ascii_alphanumeric() || b[*i] == b'_'))
                    .unwrap_or(b.len());
                let word = &text[at..end];
                at = end;
                if b.get(at) != Some(&b'\'') {
                    out.push((start, Token::Word(word.to_owned())));
                    continue;
                }
                // A typed literal: its prefix, then a quoted text.
                let Some((quoted, end)) = quoted(text, at) else {
                    return fail("a literal is not closed");
                };
                let Some(value) = typed(word, &quoted) else {
                    return fail("not a literal of its type");
                };
                out.push((start, Token::Literal(value)));
                at = end;
            }
            _ => return fail("a character a filter does not have"),
        }
    }
    Ok(out)
}

/// The text of the quoted string at `at` (`''` for a quote), and the byte after it.
fn quoted(text: &str, at: usize) -> Option<(String, usize)> {
    let mut out = String::new();
    let mut rest = text[at + 1..].char_indices();
    while let Some((i, c)) = rest.next() {
        if c != '\'' {
            out.push(c);
            continue;
        }
        let end = at + 1 + i + 1;
        if text.as_bytes().get(end) != Some(&b'\'') {
            return Some((out, end));
        }
        out.push('\'');
        rest.next();
    }
    None
}

/// A number literal: an `Int32`, an `Int64` (with `L`, or too large for 32 bits), or a
/// `Double` (with a point or an exponent).
fn number(text: &str) -> Option<Value> {
    if let Some(digits) = text.strip_suffix('L') {
        return digits.parse().ok().map(Value::Int64);
    }
    if text.contains(['.', 'e', 'E']) {
        let x: f64 = text.parse().ok()?;
        return x.is_finite().then_some(Value::Double(x));
    }
    let n: i64 = text.parse().ok()?;
    Some(i32::try_from(n).map_or(Value::Int64(n), Value::Int32))
}

/// The literal `prefix'text'`.
fn typed(prefix: &str, text: &str) -> Option<Value> {
    match prefix {
        "datetime" => DateTime::parse(text).map(Value::DateTime),
        "guid" => guid(text).map(Value::Guid),
        "X" | "binary" => hex(text).map(Value::Binary),
        _ => None,
    }
}

/// A GUID in its 8-4-4-4-12 form, lowercase.
pub(crate) fn guid(text: &str) -> Option<String> {
    let groups: Vec<&str> = text.split('-').collect();
    let lengths = groups.iter().map(|g| g.len()).collect::<Vec<_>>();
    let hex = groups
        .iter()
        .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()));
    (lengths == [8, 4, 4, 4, 12] && hex).then(|| text.to_ascii_lowercase())
}

/// Bytes from pairs of hexadecimal digits.
fn hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let digit = |b: u8| (b as char).to_digit(16);
    let pairs = text.as_bytes().chunks(2);
    pairs
        .map(|p| Some((digit(p[0])? * 16 + digit(p[1])?) as u8))
        .collect()
}

struct Parser {
    tokens: Vec<Spanned>,
    next: usize,
    comparisons: usize,
    /// The filter's length: where an error at its end is.
    end: usize,
}

impl Parser {
    fn or(&mut self, depth: usize) -> Result<Expression, FilterError> {
        let mut left = self.and(depth)?;
        while self.word("or") {
            left = Expression::Or(Box::new(left), Box::new(self.and(depth)?));
        }
        Ok(left)
    }

    fn and(&mut self, depth: usize) -> Result<Expression, FilterError> {
        let mut left = self.not(depth)?;
        while self.word("and") {
            left = Expression::And(Box::new(left), Box::new(self.not(depth)?));
        }
        Ok(left)
    }

    fn not(&mut self, depth: usize) -> Result<Expression, FilterError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        if self.word("not") {
            return Ok(Expression::Not(Box::new(self.not(depth + 1)?)));
        }
        if self.token() == Some(&Token::Open) {
            self.next += 1;
            let inner = self.or(depth + 1)?;
            if self.token() != Some(&Token::Close) {
                return Err(self.error("a parenthesis is not closed"));
            }
            self.next += 1;
            return Ok(inner);
        }
        let left = self.operand()?;
        let Some(op) = self.op() else {
            return Ok(Expression::Is(left));
        };
        let right = self.operand()?;
        self.comparisons += 1;
        if self.comparisons > MAX_COMPARISONS {
            return Err(self.error("more than 15 comparisons"));
        }
        Ok(Expression::Compare(left, op, right))
    }

    fn operand(&mut self) -> Result<Operand, FilterError> {
        let operand = match self.token() {
            Some(Token::Literal(value)) => Operand::Literal(value.clone()),
            Some(Token::Word(word)) if word == "true" || word == "false" => {
                Operand::Literal(Value::Boolean(word == "true"))
            }
            Some(Token::Word(word)) if !is_keyword(word) => Operand::Property(word.clone()),
            _ => return Err(self.error("a property or a literal is expected")),
        };
        self.next += 1;
        Ok(operand)
    }

    fn op(&mut self) -> Option<Op> {
        let Some(Token::Word(word)) = self.token() else {
            return None;
        };
        let op = comparison(word)?;
        self.next += 1;
        Some(op)
    }

    /// Takes the keyword `word` if it comes next.
    fn word(&mut self, word: &str) -> bool {
        let next = matches!(self.token(), Some(Token::Word(w)) if w == word);
        self.next += usize::from(next);
        next
    }

    fn token(&self) -> Option<&Token> {
        self.tokens.get(self.next).map(|(_, token)| token)
    }

    fn error(&self, what: &'static str) -> FilterError {
        let at = self.tokens.get(self.next).map_or(self.end, |(at, _)| *at);
        FilterError { at, what }
    }
}

fn is_keyword(word: &str) -> bool {
    matches!(word, "and" | "or" | "not") || comparison(word).is_some()
}

#[cfg(test)]
mod tests {

    use super::*;

    fn entity() -> Entity {
        let at = DateTime::parse("2026-11-24T10:00:00Z").unwrap();
        let properties = [
            ("Name", Value::String("O'Brien".to_owned())),
            ("Age", Value::Int32(42)),
            ("Big", Value::Int64(5_000_000_000)),
            ("Score", Value::Double(2.5)),
            ("Active", Value::Boolean(true)),
            ("Away", Value::Boolean(false)),
            (
                "Born",
                Value::DateTime(DateTime::parse("1984-03-05T10:00:00Z").unwrap()),
            ),
            (
                "Id",
                Value::Guid("c9da6455-213d-42c9-9a79-3e9149a57833".to_owned()),
            ),
            ("Bits", Value::Binary(vec![0x0f, 0xa0])),
        ];
        Entity::new("p1", "r042", at, properties)
    }

    #[test]
    fn filters_select_as_the_service_does() {
        let entity = entity();
        let cases: &[(&str, bool)] = &[
            ("PartitionKey eq 'p1'", true),
            ("PartitionKey eq 'p2'", false),
            (
                "PartitionKey eq 'p1' and RowKey ge 'r000' and RowKey lt 'r100'",
                true,
            ),
            ("RowKey gt 'r042'", false),
            ("'p1' eq PartitionKey", true),
            ("Name eq 'O''Brien'", true),
            ("Age eq 42", true),
            ("Age gt 41 and Age le 42", true),
            ("Age eq 42L", true),
            ("Big gt 4000000000", true),
            ("Big eq 5000000000L", true),
            ("Score lt 3", true),
            ("Score eq 2.5", true),
            ("Score gt 2.5e0", false),
            ("Active", true),
            ("Away", false),
            ("not Away", true),
            ("Active eq true", true),
            ("Active ne true", false),
            ("Born lt datetime'1990-01-01T00:00:00Z'", true),
            ("Born eq datetime'1984-03-05T12:00:00+02:00'", true),
            ("Timestamp ge datetime'2026-11-24T00:00:00Z'", true),
            ("Id eq guid'C9DA6455-213D-42C9-9A79-3E9149A57833'", true),
            ("Bits eq X'0FA0'", true),
            ("Bits eq binary'0fa0'", true),
            ("Bits ne X'0FA1'", true),
            // Not there, or not comparable: no match, `ne` included.
            ("Missing eq 'x'", false),
            ("Missing ne 'x'", false),
            ("not (Missing eq 'x')", true),
            ("Age eq '42'", false),
            ("Age ne '42'", false),
            ("Name gt 5", false),
            ("(Age eq 1 or Age eq 42) and not (Name eq 'x')", true),
            ("Age eq 1 or Age eq 2 and Age eq 42", false),
            ("(Age eq 1 or Age eq 2) or Age eq 42", true),
            ("true", true),
            ("false or Active", true),
            ("  Age\teq 42 ", true),
            ("Age eq -3", false),
        ];
        for (text, want) in cases {
            let filter = Filter::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(filter.matches(&entity), *want, "{text}");
        }
    }

    #[test]
    fn malformed_filters_are_refused_with_where() {
        let too_many = vec!["Age eq 1"; MAX_COMPARISONS + 1].join(" or ");
        let fifteen = vec!["Age eq 1"; MAX_COMPARISONS].join(" or ");
        assert!(Filter::parse(&fifteen).is_ok());
        let deep = format!("{}Active{}", "(".repeat(40), ")".repeat(40));
        let cases: &[(&str, usize)] = &[
            ("", 0),
            ("Age eq", 6),
            ("Age eq 42 and", 13),
            ("eq 42", 0),
            ("(Age eq 42", 10),
            ("Age eq 42)", 9),
            ("Name eq 'open", 8),
            ("Age eq 42 Age", 10),
            ("Born lt datetime'1990-13-01T00:00:00Z'", 8),
            ("Id eq guid'not-a-guid'", 6),
            ("Bits eq X'0FA'", 8),
            ("Born lt time'x'", 8),
            ("Age eq 4x2", 7),
            ("Age eq 1.5.5", 7),
            ("Age eq 99999999999999999999", 7),
            ("Age == 42", 4),
            ("Age eq 42 and and Age eq 1", 14),
            ("not", 3),
            // Refused at the comparison past the limit, and at the parenthesis past the depth.
            (&too_many, too_many.len()),
            (&deep, MAX_DEPTH + 1),
        ];
        for (text, at) in cases {
            let error = Filter::parse(text).expect_err(text);
            assert_eq!(error.at, *at, "{text}: {error}");
        }
    }

    #[test]
    fn a_filter_naming_one_partition_says_which() {
        let cases: &[(&str, Option<&str>)] = &[
            ("PartitionKey eq 'p1'", Some("p1")),
            ("RowKey gt 'a' and PartitionKey eq 'p1'", Some("p1")),
            ("'p1' eq PartitionKey and Age gt 3", Some("p1")),
            ("PartitionKey eq 'p1' or PartitionKey eq 'p2'", None),
            ("not (PartitionKey eq 'p1')", None),
            ("PartitionKey ge 'p1'", None),
            ("Age eq 3", None),
        ];
        for (text, want) in cases {
            assert_eq!(Filter::parse(text).unwrap().partition(), *want, "{text}");
        }
    }
}
