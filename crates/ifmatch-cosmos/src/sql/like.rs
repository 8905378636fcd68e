//! `LIKE`: `%` any run, `_` any one character, `[...]` a set or range, `[^...]` not in it, and
//! an `ESCAPE` character making the next one plain.

use super::meter::Meter;

/// The longest `LIKE` pattern matched, in characters.
pub(crate) const MAX_LIKE: usize = 1024;

/// A `LIKE` pattern's item.
#[derive(Clone, Copy, PartialEq)]
enum Pattern {
    /// `%`: any run.
    Any,
    /// `_`: any one character.
    One,
    /// A character as it is (escaped or plain).
    Char(char),
    /// `[abc]`, `[a-f]` or `[^abc]`: one character of (or not of) a set, by its index.
    Set(usize),
}

/// `LIKE`: `%` any run, `_` any one character, `[...]` a set or range (`[^...]` not in it),
/// and an `ESCAPE` character making the next one plain. Greedy, going back only to the last
/// `%`: each step is a unit of work, so a pattern that makes it go back often is charged for it.
pub(crate) fn like(
    value: &str,
    pattern: &str,
    escape: Option<char>,
    meter: &Meter,
) -> Option<bool> {
    meter.take(4 * (value.len() + pattern.len()))?;
    let v: Vec<char> = value.chars().collect();
    let (p, sets) = compile_like(pattern, escape)?;
    let fits = |item: Pattern, c: char| match item {
        Pattern::One => true,
        Pattern::Char(x) => x == c,
        Pattern::Set(at) => {
            let (negated, ranges): &(bool, Vec<(char, char)>) = &sets[at];
            ranges.iter().any(|(low, high)| (*low..=*high).contains(&c)) != *negated
        }
        Pattern::Any => false,
    };
    let (mut i, mut j) = (0, 0);
    // Where the last `%` was, and where in the value it is taken to end.
    let mut back: Option<(usize, usize)> = None;
    let mut steps = 0usize;
    while i < v.len() {
        steps += 1;
        if steps & 0xfff == 0 {
            meter.take(0x1000)?;
        }
        if j < p.len() && p[j] != Pattern::Any && fits(p[j], v[i]) {
            i += 1;
            j += 1;
        } else if j < p.len() && p[j] == Pattern::Any {
            back = Some((j, i));
            j += 1;
        } else if let Some((star, taken)) = back {
            back = Some((star, taken + 1));
            j = star + 1;
            i = taken + 1;
        } else {
            return Some(false);
        }
    }
    Some(p[j..].iter().all(|item| *item == Pattern::Any))
}

type Sets = Vec<(bool, Vec<(char, char)>)>;

/// A `LIKE` pattern's items, and its sets; `None` for one longer than [`MAX_LIKE`] or
/// malformed (an escape at its end, a set not closed), which matches nothing.
fn compile_like(pattern: &str, escape: Option<char>) -> Option<(Vec<Pattern>, Sets)> {
    let chars: Vec<char> = pattern.chars().collect();
    if chars.len() > MAX_LIKE {
        return None;
    }
    let (mut items, mut sets) = (Vec::new(), Vec::new());
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        at += 1;
        items.push(match c {
            c if Some(c) == escape => {
                let plain = *chars.get(at)?;
                at += 1;
                Pattern::Char(plain)
            }
            '%' => Pattern::Any,
            '_' => Pattern::One,
            '[' => {
                let close = chars[at..].iter().position(|c| *c == ']')? + at;
                let mut inner = &chars[at..close];
                at = close + 1;
                let negated = inner.first() == Some(&'^');
                if negated {
                    inner = &inner[1..];
                }
                let mut ranges = Vec::new();
                let mut k = 0;
                while k < inner.len() {
                    if k + 2 < inner.len() && inner[k + 1] == '-' {
                        ranges.push((inner[k], inner[k + 2]));
                        k += 3;
                    } else {
                        ranges.push((inner[k], inner[k]));
                        k += 1;
                    }
                }
                sets.push((negated, ranges));
                Pattern::Set(sets.len() - 1)
            }
            c => Pattern::Char(c),
        });
    }
    Some((items, sets))
}
