//! The system functions served, each a variant of [`Function`] resolved when its query is
//! parsed (so an evaluation never looks a name up): its name, the fewest and the most
//! arguments it takes, and its group, declared once below. What each computes:
//! `functions.rs`, and `spatial.rs`, `text.rs`, `vector.rs` for theirs.

/// What a function works on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Group {
    Math,
    Integer,
    String,
    /// Strings looked for in strings.
    Search,
    Array,
    /// Two arrays as sets.
    Set,
    /// An array's numbers taken together.
    ArrayNumbers,
    Type,
    Conditional,
    Date,
    Item,
    Spatial,
    Text,
    Vector,
}

/// Declares [`Function`] and its table from `(NAME, FEWEST, MOST, GROUP)` rows.
macro_rules! functions {
    ($(($name:ident, $min:literal, $max:literal, $group:ident)),* $(,)?) => {
        /// A system function, spelled as Cosmos spells it (so a reader finds it by its name).
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Function {
            $(
                #[doc = stringify!($name)]
                $name
            ),*
        }

        /// Every function, in the order of its variants: its name, arity and group.
        const ALL: &[(Function, &str, usize, usize, Group)] =
            &[$((Function::$name, stringify!($name), $min, $max, Group::$group)),*];
    };
}

functions! {
    // Math.
    (ABS, 1, 1, Math),
    (ACOS, 1, 1, Math),
    (ASIN, 1, 1, Math),
    (ATAN, 1, 1, Math),
    (ATN2, 2, 2, Math),
    (CEILING, 1, 1, Math),
    (COS, 1, 1, Math),
    (COT, 1, 1, Math),
    (DEGREES, 1, 1, Math),
    (EXP, 1, 1, Math),
    (FLOOR, 1, 1, Math),
    (LOG, 1, 2, Math),
    (LOG10, 1, 1, Math),
    (NUMBERBIN, 1, 2, Math),
    (PI, 0, 0, Math),
    (POWER, 2, 2, Math),
    (RADIANS, 1, 1, Math),
    (RAND, 0, 0, Math),
    (ROUND, 1, 1, Math),
    (SIGN, 1, 1, Math),
    (SIN, 1, 1, Math),
    (SQRT, 1, 1, Math),
    (SQUARE, 1, 1, Math),
    (TAN, 1, 1, Math),
    (TRUNC, 1, 1, Math),
    // Integers, 64 bits.
    (INTADD, 2, 2, Integer),
    (INTBITAND, 2, 2, Integer),
    (INTBITLEFTSHIFT, 2, 2, Integer),
    (INTBITNOT, 1, 1, Integer),
    (INTBITOR, 2, 2, Integer),
    (INTBITRIGHTSHIFT, 2, 2, Integer),
    (INTBITXOR, 2, 2, Integer),
    (INTDIV, 2, 2, Integer),
    (INTMOD, 2, 2, Integer),
    (INTMUL, 2, 2, Integer),
    (INTSUB, 2, 2, Integer),
    // Strings.
    (CONCAT, 2, 64, String),
    (CONTAINS, 2, 3, Search),
    (CONTAINS_ALL_CI, 2, 64, Search),
    (CONTAINS_ALL_CS, 2, 64, Search),
    (CONTAINS_ANY_CI, 2, 64, Search),
    (CONTAINS_ANY_CS, 2, 64, Search),
    (ENDSWITH, 2, 3, Search),
    (INDEX_OF, 2, 3, Search),
    (LASTINDEXOF, 2, 2, Search),
    (LASTSUBSTRINGAFTER, 2, 2, Search),
    (LASTSUBSTRINGBEFORE, 2, 2, Search),
    (LEFT, 2, 2, String),
    (LENGTH, 1, 1, String),
    (LOWER, 1, 1, String),
    (LTRIM, 1, 2, String),
    (REGEXMATCH, 2, 3, Search),
    (REPLACE, 3, 3, String),
    (REPLICATE, 2, 2, String),
    (REVERSE, 1, 1, String),
    (RIGHT, 2, 2, String),
    (RTRIM, 1, 2, String),
    (STARTSWITH, 2, 3, Search),
    (STRINGEQUALS, 2, 3, Search),
    (STRINGJOIN, 2, 2, String),
    (STRINGSPLIT, 2, 2, String),
    (STRINGTOARRAY, 1, 1, String),
    (STRINGTOBOOLEAN, 1, 1, String),
    (STRINGTONULL, 1, 1, String),
    (STRINGTONUMBER, 1, 1, String),
    (STRINGTOOBJECT, 1, 1, String),
    (SUBSTRING, 3, 3, String),
    (SUBSTRINGAFTER, 2, 2, Search),
    (SUBSTRINGBEFORE, 2, 2, Search),
    (TOSTRING, 1, 1, String),
    (TRIM, 1, 2, String),
    (UPPER, 1, 1, String),
    // Arrays and items.
    (ARRAY_CONCAT, 2, 64, Array),
    (ARRAY_CONTAINS, 2, 3, Array),
    (ARRAY_CONTAINS_ALL, 2, 64, Array),
    (ARRAY_CONTAINS_ANY, 2, 64, Array),
    (ARRAY_AVG, 1, 1, ArrayNumbers),
    (ARRAY_LENGTH, 1, 1, Array),
    (ARRAY_MAX, 1, 1, ArrayNumbers),
    (ARRAY_MEDIAN, 1, 1, ArrayNumbers),
    (ARRAY_MIN, 1, 1, ArrayNumbers),
    (ARRAY_SLICE, 2, 3, Array),
    (ARRAY_SUM, 1, 1, ArrayNumbers),
    (OBJECTTOARRAY, 1, 3, Array),
    (SETDIFFERENCE, 2, 2, Set),
    (SETEQUAL, 2, 2, Set),
    (SETINTERSECT, 2, 2, Set),
    (SETUNION, 2, 2, Set),
    // Types.
    (IS_ARRAY, 1, 1, Type),
    (IS_BOOL, 1, 1, Type),
    (IS_DEFINED, 1, 1, Type),
    (IS_FINITE_NUMBER, 1, 1, Type),
    (IS_INTEGER, 1, 1, Type),
    (IS_NULL, 1, 1, Type),
    (IS_NUMBER, 1, 1, Type),
    (IS_OBJECT, 1, 1, Type),
    (IS_PRIMITIVE, 1, 1, Type),
    (IS_STRING, 1, 1, Type),
    // Conditional.
    (CHOOSE, 2, 64, Conditional),
    (IIF, 3, 3, Conditional),
    // Date and time.
    (AGO, 2, 2, Date),
    (DATETIMEADD, 3, 3, Date),
    (DATETIMEBIN, 2, 4, Date),
    (DATETIMEDIFF, 3, 3, Date),
    (DATETIMEFORMAT, 2, 2, Date),
    (DATETIMEFROMPARTS, 3, 7, Date),
    (DATETIMEPART, 2, 2, Date),
    (DATETIMETOTICKS, 1, 1, Date),
    (DATETIMETOTIMESTAMP, 1, 1, Date),
    (DAY, 1, 1, Date),
    (GETCURRENTDATETIME, 0, 0, Date),
    (GETCURRENTDATETIMESTATIC, 0, 0, Date),
    (GETCURRENTTICKS, 0, 0, Date),
    (GETCURRENTTICKSSTATIC, 0, 0, Date),
    (GETCURRENTTIMESTAMP, 0, 0, Date),
    (GETCURRENTTIMESTAMPSTATIC, 0, 0, Date),
    (IS_DATETIME, 1, 1, Date),
    (MONTH, 1, 1, Date),
    (NOW, 0, 2, Date),
    (TICKSTODATETIME, 1, 1, Date),
    (TIMESTAMPTODATETIME, 1, 1, Date),
    (YEAR, 1, 1, Date),
    // Items.
    (DOCUMENTID, 1, 1, Item),
    // Spatial (GeoJSON on a sphere; see `spatial.rs`).
    (ST_AREA, 1, 1, Spatial),
    (ST_DISTANCE, 2, 2, Spatial),
    (ST_INTERSECTS, 2, 2, Spatial),
    (ST_ISVALID, 1, 1, Spatial),
    (ST_ISVALIDDETAILED, 1, 1, Spatial),
    (ST_WITHIN, 2, 2, Spatial),
    // Full-text search (see `text.rs`).
    (FULLTEXTCONTAINS, 2, 2, Text),
    (FULLTEXTCONTAINSALL, 2, 64, Text),
    (FULLTEXTCONTAINSANY, 2, 64, Text),
    (FULLTEXTSCORE, 2, 64, Text),
    (RRF, 2, 64, Text),
    // Vector search (see `vector.rs`).
    (VECTORDISTANCE, 2, 4, Vector),
}

impl Function {
    /// The function named `name` (any case), with the fewest and the most arguments it takes.
    pub(crate) fn named(name: &str) -> Option<(Self, usize, usize)> {
        let upper = name.to_ascii_uppercase();
        (ALL.iter())
            .find(|(_, named, ..)| *named == upper)
            .map(|&(function, _, min, max, _)| (function, min, max))
    }

    /// Its name, in capitals.
    pub fn name(self) -> &'static str {
        ALL[self as usize].1
    }

    /// What it works on.
    pub(crate) fn group(self) -> Group {
        ALL[self as usize].4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_function_is_found_by_its_name_and_knows_it() {
        for &(function, name, min, max, _) in ALL {
            assert_eq!(function.name(), name);
            assert_eq!(
                Function::named(&name.to_ascii_lowercase()),
                Some((function, min, max))
            );
        }
        assert_eq!(Function::named("NOSUCHFUNCTION"), None);
    }
}
