//! Property tests: formatting then parsing round-trips, and no input panics the parsers or the
//! evaluators.

use std::time::{Duration, UNIX_EPOCH};

use http::{HeaderMap, HeaderValue, Method, header};
use ifmatch_core::precondition::{
    Outcome, Validators,
    rfc9110::{Target, evaluate},
};
use ifmatch_core::{EntityTag, EntityTagList, date::to_http_date};
use proptest::prelude::*;

/// Opaque parts: any etagc bytes, commas and obs-text included.
fn opaque() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![Just(0x21u8), 0x23u8..=0x7e, 0x80u8..=0xff, Just(b',')],
        0..12,
    )
}

fn entity_tag() -> impl Strategy<Value = EntityTag> {
    (any::<bool>(), opaque()).prop_map(|(weak, o)| {
        if weak {
            EntityTag::weak(&o)
        } else {
            EntityTag::strong(&o)
        }
        .unwrap()
    })
}

fn tag_list() -> impl Strategy<Value = EntityTagList> {
    prop_oneof![
        1 => Just(EntityTagList::Any),
        6 => prop::collection::vec(entity_tag(), 0..6).prop_map(EntityTagList::Tags),
    ]
}

/// Field values biased towards the characters that matter to the parsers.
fn field_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            4 => prop::sample::select(b"\"W/*, \t".to_vec()),
            2 => 0x21u8..=0x7e,
            1 => 0x80u8..=0xff,
        ],
        0..40,
    )
}

fn header_value(bytes: &[u8]) -> Option<HeaderValue> {
    HeaderValue::from_bytes(bytes).ok()
}

proptest! {
    #[test]
    fn single_tags_round_trip(tag in entity_tag()) {
        let value = tag.to_header_value();
        prop_assert_eq!(EntityTag::parse(value.as_bytes()).unwrap(), tag.clone());
        prop_assert!(tag.weak_eq(&tag));
        prop_assert_eq!(tag.strong_eq(&tag), !tag.is_weak());
    }

    #[test]
    fn tag_lists_round_trip(list in tag_list()) {
        let value = list.to_header_value();
        prop_assert_eq!(EntityTagList::parse([value.as_bytes()]).unwrap(), list);
    }

    #[test]
    fn lists_split_over_field_lines_are_one_list(tags in prop::collection::vec(entity_tag(), 1..6), cut in 0usize..6) {
        let cut = cut.min(tags.len());
        let lines = [
            EntityTagList::Tags(tags[..cut].to_vec()).to_header_value(),
            EntityTagList::Tags(tags[cut..].to_vec()).to_header_value(),
        ];
        let parsed = EntityTagList::parse(lines.iter().map(|v| v.as_bytes())).unwrap();
        prop_assert_eq!(parsed, EntityTagList::Tags(tags));
    }

    /// The evaluators match tags in place; they must agree with the owned list's matching.
    #[test]
    fn in_place_matching_agrees_with_owned_lists(
        list in tag_list(), other in entity_tag(), pick in any::<prop::sample::Index>(), from_list in any::<bool>(),
    ) {
        let current = match &list {
            EntityTagList::Tags(tags) if from_list && !tags.is_empty() => pick.get(tags).clone(),
            _ => other,
        };
        let validators = Validators::etag(current.clone());
        let mut if_match = HeaderMap::new();
        if_match.insert(header::IF_MATCH, list.to_header_value());
        let want = if list.matches_strong(&current) { Outcome::Proceed } else { Outcome::PreconditionFailed };
        prop_assert_eq!(evaluate(&Method::PUT, &if_match, Target::Current(&validators)), want);
        let mut if_none_match = HeaderMap::new();
        if_none_match.insert(header::IF_NONE_MATCH, list.to_header_value());
        let want = if list.matches_weak(&current) { Outcome::NotModified } else { Outcome::Proceed };
        prop_assert_eq!(evaluate(&Method::GET, &if_none_match, Target::Current(&validators)), want);
    }

    #[test]
    fn parsers_never_panic(bytes in field_bytes()) {
        let _ = EntityTag::parse(&bytes);
        let _ = EntityTagList::parse([&bytes]);
        let _ = EntityTagList::parse([&bytes, &bytes]);
    }

    #[test]
    fn evaluators_never_panic(
        im in field_bytes(), inm in field_bytes(), ir in field_bytes(),
        ims in "[ -~]{0,40}", ius in "[ -~]{0,40}",
        tag in entity_tag(), secs in 0u64..4_000_000_000, exists in any::<bool>(),
    ) {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            (header::IF_MATCH, header_value(&im)),
            (header::IF_NONE_MATCH, header_value(&inm)),
            (header::IF_RANGE, header_value(&ir)),
            (header::IF_MODIFIED_SINCE, header_value(ims.as_bytes())),
            (header::IF_UNMODIFIED_SINCE, header_value(ius.as_bytes())),
            (header::RANGE, Some(HeaderValue::from_static("bytes=0-0"))),
        ] {
            if let Some(value) = value {
                headers.append(name, value);
            }
        }
        let lm = to_http_date(UNIX_EPOCH + Duration::from_secs(secs));
        let current = Validators::new(Some(tag), Some(lm));
        let current = exists.then_some(&current);
        for method in [Method::GET, Method::HEAD, Method::PUT, Method::DELETE, Method::OPTIONS] {
            let _ = evaluate(&method, &headers, Target::of(&method, current));
        }
    }
}
