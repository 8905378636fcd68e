//! The tokens of Cosmos SQL: words (keywords and names alike: which is which is the parser's
//! to say, since keywords are case-insensitive and names are not), numbers, strings in either
//! quote, parameters (`@name`) and symbols.

use super::error::SqlError;

/// One token.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Token {
    /// A keyword or a name, as written.
    Word(String),
    /// A whole number that fits 64 bits, kept exact.
    Integer(i64),
    Number(f64),
    Text(String),
    /// `@name`, with its `@`.
    Parameter(String),
    Symbol(&'static str),
}

/// Longest first where one begins another (`>>>`, `>>`, `>=`, `>`).
const SYMBOLS: [&str; 31] = [
    ">>>", "<<", ">>", "!=", "<>", "<=", ">=", "||", "??", "=", "<", ">", "+", "-", "*", "/", "%",
    "(", ")", "[", "]", "{", "}", ",", ".", ":", "?", "&", "|", "^", "~",
];

/// The tokens of `text`.
pub(crate) fn tokens(text: &str) -> Result<Vec<Token>, SqlError> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if text[i..].starts_with("--") {
            // A comment, to the end of the line.
            i = text[i..].find('\n').map_or(bytes.len(), |end| i + end);
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b'@' {
            let start = i;
            i += 1;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let word = text[start..i].to_owned();
            out.push(match c {
                b'@' if word.len() > 1 => Token::Parameter(word),
                b'@' => return Err(SqlError::new("'@' starts a parameter's name: @name")),
                _ => Token::Word(word),
            });
        } else if c.is_ascii_digit() {
            let start = i;
            if text[i..].starts_with("0x") || text[i..].starts_with("0X") {
                i += 2;
                while i < bytes.len() && bytes[i].is_ascii_hexdigit() {
                    i += 1;
                }
                let value = i64::from_str_radix(&text[start + 2..i], 16)
                    .map_err(|_| SqlError::new("a hexadecimal number out of range"))?;
                out.push(Token::Integer(value));
                continue;
            }
            while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
                i += 1;
            }
            if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
                i += 1;
                if i < bytes.len() && (bytes[i] == b'+' || bytes[i] == b'-') {
                    i += 1;
                }
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
            }
            let written = &text[start..i];
            if let Ok(whole) = written.parse::<i64>() {
                out.push(Token::Integer(whole));
                continue;
            }
            let number = written
                .parse::<f64>()
                .map_err(|_| SqlError::new(format!("{written} is not a number")))?;
            out.push(Token::Number(number));
        } else if c == b'\'' || c == b'"' {
            let (value, end) = string(text, i)?;
            out.push(Token::Text(value));
            i = end;
        } else if let Some(symbol) = SYMBOLS.iter().find(|s| text[i..].starts_with(**s)) {
            out.push(Token::Symbol(symbol));
            i += symbol.len();
        } else {
            let found = text[i..].chars().next().unwrap_or('?');
            return Err(SqlError::new(format!(
                "'{found}' is not part of Cosmos SQL"
            )));
        }
    }
    Ok(out)
}

/// The string starting at `start` (its quote) and the index after its closing quote.
fn string(text: &str, start: usize) -> Result<(String, usize), SqlError> {
    let quote = text.as_bytes()[start] as char;
    let mut out = String::new();
    let mut chars = text[start + 1..].char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            c if c == quote => return Ok((out, start + 1 + at + 1)),
            '\\' => match chars.next().map(|(_, c)| c) {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some('b') => out.push('\u{8}'),
                Some('f') => out.push('\u{c}'),
                Some('u') => {
                    let hex: String = (0..4)
                        .filter_map(|_| chars.next().map(|(_, c)| c))
                        .collect();
                    let code = u32::from_str_radix(&hex, 16)
                        .ok()
                        .and_then(char::from_u32)
                        .ok_or_else(|| SqlError::new("a \\u escape needs four hex digits"))?;
                    out.push(code);
                }
                Some(other) => out.push(other),
                None => break,
            },
            c => out.push(c),
        }
    }
    Err(SqlError::new("a string is not closed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_of_a_query() {
        let found = tokens("SELECT VALUE c[\"a b\"] FROM c WHERE c.n <> @n -- note\n").unwrap();
        assert_eq!(found[1], Token::Word("VALUE".into()));
        assert_eq!(found[4], Token::Text("a b".into()));
        assert_eq!(found[found.len() - 2], Token::Symbol("<>"));
        assert_eq!(found[found.len() - 1], Token::Parameter("@n".into()));
        assert_eq!(tokens("0x1F").unwrap(), vec![Token::Integer(31)]);
        assert_eq!(
            tokens("9223372036854775807").unwrap(),
            vec![Token::Integer(i64::MAX)]
        );
        assert_eq!(tokens("1.5e1").unwrap(), vec![Token::Number(15.0)]);
        assert_eq!(
            tokens(r"'it\'s'").unwrap(),
            vec![Token::Text("it's".into())]
        );
        assert!(tokens("SELECT ` FROM c").is_err());
        assert!(tokens("'open").is_err());
    }
}
