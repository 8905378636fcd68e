//! `Prefer: return-content` / `return-no-content` (RFC 7240): whether Insert Entity and Create
//! Table answer 201 with what they wrote or 204 without it, and the `Preference-Applied` that
//! says the server honoured it (as Azure's Table service answers).

use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};

/// `Preference-Applied`, on an answer that honoured the request's `Prefer`.
pub(crate) const PREFERENCE_APPLIED: HeaderName = HeaderName::from_static("preference-applied");

/// What the client asked an insert to answer, if it said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Preference {
    /// `return-content`: 201 with the entity (an insert's default).
    Content,
    /// `return-no-content`: 204.
    NoContent,
}

impl Preference {
    /// The request's preference, if its `Prefer` names one.
    pub(crate) fn of(headers: &HeaderMap) -> Option<Self> {
        let prefer = headers.get("prefer")?.to_str().ok()?;
        let named = |token: &str| {
            (prefer.split([',', ';'])).any(|member| member.trim().eq_ignore_ascii_case(token))
        };
        let preferences = [
            ("return-no-content", Self::NoContent),
            ("return-content", Self::Content),
        ];
        preferences
            .into_iter()
            .find_map(|(token, preference)| named(token).then_some(preference))
    }

    /// Whether the answer carries what was written, by `preference` or, without one, by
    /// `default`.
    pub(crate) fn returns_content(preference: Option<Self>, default: bool) -> bool {
        preference.map_or(default, |p| p == Self::Content)
    }

    /// `Preference-Applied`'s value for it.
    pub(crate) fn applied(self) -> HeaderValue {
        HeaderValue::from_static(match self {
            Self::Content => "return-content",
            Self::NoContent => "return-no-content",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(value: &str) -> Option<Preference> {
        let mut headers = HeaderMap::new();
        headers.insert("prefer", value.parse().unwrap());
        Preference::of(&headers)
    }

    #[test]
    fn the_two_preferences_and_nothing_else() {
        assert_eq!(of("return-no-content"), Some(Preference::NoContent));
        assert_eq!(of("Return-Content"), Some(Preference::Content));
        assert_eq!(of("wait=5, return-no-content"), Some(Preference::NoContent));
        assert_eq!(of("respond-async"), None);
        assert_eq!(Preference::of(&HeaderMap::new()), None);
    }
}
