//! RFC 9110 section 13 conformance table for `precondition::rfc9110::evaluate`.
//!
//! Each row names the resource, the request's header field lines, and the expected outcome for
//! GET, for HEAD, and for a write; the write column is checked for PUT, POST, DELETE and PATCH.
//! So every row is six cases.

use std::time::{Duration, UNIX_EPOCH};

use http::{HeaderMap, HeaderName, HeaderValue, Method};
use ifmatch_core::EntityTag;
use ifmatch_core::date::{HttpDate, to_http_date};
use ifmatch_core::precondition::Outcome::{
    self, IgnoreRange as R, NotModified as N, PreconditionFailed as F, Proceed as P,
};
use ifmatch_core::precondition::Validators;
use ifmatch_core::precondition::rfc9110::{Target, evaluate};

/// Every kind of method a condition treats its own way: the reads, a write, a delete, a POST.
const METHODS: [Method; 5] = [
    Method::GET,
    Method::HEAD,
    Method::PUT,
    Method::DELETE,
    Method::POST,
];

/// Sun, 06 Nov 1994 08:49:37 GMT
const T: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
const T_850: &str = "Sunday, 06-Nov-94 08:49:37 GMT";
const T_ASCTIME: &str = "Sun Nov  6 08:49:37 1994";
const BEFORE: &str = "Sun, 06 Nov 1994 08:49:36 GMT";
const BEFORE_850: &str = "Sunday, 06-Nov-94 08:49:36 GMT";
const BEFORE_ASCTIME: &str = "Sun Nov  6 08:49:36 1994";
const AFTER: &str = "Sun, 06 Nov 1994 08:49:38 GMT";

#[derive(Clone, Copy, Debug)]
enum Res {
    /// `"abc"`, Last-Modified T (a strong date).
    Cur,
    /// `W/"abc"`, Last-Modified T.
    Weak,
    /// No ETag, Last-Modified T.
    NoTag,
    /// `"abc"`, no Last-Modified.
    NoDate,
    /// `"abc"`, Last-Modified T as a weak validator.
    WeakDate,
    /// `"a,b"` (a comma inside the opaque part), Last-Modified T.
    Comma,
    /// No representation; the write would create it.
    Absent,
}

fn t() -> HttpDate {
    to_http_date(UNIX_EPOCH + Duration::from_secs(784_111_777))
}

fn validators(res: Res) -> Option<Validators> {
    let tag = |s: &str| Some(EntityTag::parse(s).unwrap());
    Some(match res {
        Res::Cur => Validators::new(tag(r#""abc""#), Some(t())).with_strong_last_modified(),
        Res::Weak => Validators::new(tag(r#"W/"abc""#), Some(t())).with_strong_last_modified(),
        Res::NoTag => Validators::new(None, Some(t())).with_strong_last_modified(),
        Res::NoDate => Validators::new(tag(r#""abc""#), None),
        Res::WeakDate => Validators::new(tag(r#""abc""#), Some(t())),
        Res::Comma => Validators::new(tag(r#""a,b""#), Some(t())).with_strong_last_modified(),
        Res::Absent => return None,
    })
}

type Row = (
    &'static str,
    Res,
    &'static [(&'static str, &'static str)],
    Outcome,
    Outcome,
    Outcome,
);

const IM: &str = "if-match";
const INM: &str = "if-none-match";
const IMS: &str = "if-modified-since";
const IUS: &str = "if-unmodified-since";
const IR: &str = "if-range";
const RANGE: &str = "range";
const BYTES: &str = "bytes=0-1";

#[rustfmt::skip]
const ROWS: &[Row] = &[
    // name                                   resource      field lines                                         GET HEAD write
    ("no preconditions",                      Res::Cur,     &[],                                                 P, P, P),
    ("no preconditions, absent",              Res::Absent,  &[],                                                 P, P, P),
    // If-Match (13.1.1): strong comparison, * needs a representation, invalid is false.
    ("IM current tag",                        Res::Cur,     &[(IM, r#""abc""#)],                                 P, P, P),
    ("IM other tag",                          Res::Cur,     &[(IM, r#""xyz""#)],                                 F, F, F),
    ("IM list containing current",            Res::Cur,     &[(IM, r#""xyz", "abc""#)],                          P, P, P),
    ("IM list without current",               Res::Cur,     &[(IM, r#""xyz", "uvw""#)],                          F, F, F),
    ("IM star",                               Res::Cur,     &[(IM, "*")],                                        P, P, P),
    ("IM star, absent",                       Res::Absent,  &[(IM, "*")],                                        F, F, F),
    ("IM tag, absent",                        Res::Absent,  &[(IM, r#""abc""#)],                                 F, F, F),
    ("IM weak tag never matches strongly",    Res::Cur,     &[(IM, r#"W/"abc""#)],                               F, F, F),
    ("IM strong tag vs weak current",         Res::Weak,    &[(IM, r#""abc""#)],                                 F, F, F),
    ("IM weak vs weak current",               Res::Weak,    &[(IM, r#"W/"abc""#)],                               F, F, F),
    ("IM star vs weak current",               Res::Weak,    &[(IM, "*")],                                        P, P, P),
    ("IM tag, resource without tag",          Res::NoTag,   &[(IM, r#""abc""#)],                                 F, F, F),
    ("IM star, resource without tag",         Res::NoTag,   &[(IM, "*")],                                        P, P, P),
    ("IM unquoted is invalid",                Res::Cur,     &[(IM, "abc")],                                      F, F, F),
    ("IM star with tag is invalid",           Res::Cur,     &[(IM, r#"*, "abc""#)],                              F, F, F),
    ("IM unterminated quote is invalid",      Res::Cur,     &[(IM, r#""abc"#)],                                  F, F, F),
    ("IM empty field",                        Res::Cur,     &[(IM, "")],                                         F, F, F),
    ("IM tags are case-sensitive",            Res::Cur,     &[(IM, r#""ABC""#)],                                 F, F, F),
    ("IM comma inside quotes matches",        Res::Comma,   &[(IM, r#""a,b""#)],                                 P, P, P),
    ("IM comma-split parts do not match",     Res::Comma,   &[(IM, r#""a", "b""#)],                              F, F, F),
    ("IM comma tag vs plain resource",        Res::Cur,     &[(IM, r#""a,b""#)],                                 F, F, F),
    ("IM second field line matches",          Res::Cur,     &[(IM, r#""xyz""#), (IM, r#""abc""#)],               P, P, P),
    ("IM two lines, none match",              Res::Cur,     &[(IM, r#""xyz""#), (IM, r#""uvw""#)],               F, F, F),
    ("IM empty elements skipped",             Res::Cur,     &[(IM, r#" , ,"abc",, "#)],                          P, P, P),
    ("IM invalid second line poisons list",   Res::Cur,     &[(IM, r#""abc""#), (IM, "abc")],                    F, F, F),
    // If-Match decides over If-Unmodified-Since (13.2.2 step 2 is an else).
    ("IM match beats failing IUS",            Res::Cur,     &[(IM, r#""abc""#), (IUS, BEFORE)],                  P, P, P),
    ("IM mismatch with passing IUS",          Res::Cur,     &[(IM, r#""xyz""#), (IUS, AFTER)],                   F, F, F),
    ("IM star with failing IUS",              Res::Cur,     &[(IM, "*"), (IUS, BEFORE)],                         P, P, P),
    // If-Unmodified-Since (13.1.4).
    ("IUS equal to Last-Modified",            Res::Cur,     &[(IUS, T)],                                         P, P, P),
    ("IUS after Last-Modified",               Res::Cur,     &[(IUS, AFTER)],                                     P, P, P),
    ("IUS before Last-Modified",              Res::Cur,     &[(IUS, BEFORE)],                                    F, F, F),
    ("IUS RFC 850 form",                      Res::Cur,     &[(IUS, BEFORE_850)],                                F, F, F),
    ("IUS asctime form",                      Res::Cur,     &[(IUS, BEFORE_ASCTIME)],                            F, F, F),
    ("IUS without Last-Modified is ignored",  Res::NoDate,  &[(IUS, BEFORE)],                                    P, P, P),
    ("IUS on absent is ignored",              Res::Absent,  &[(IUS, BEFORE)],                                    P, P, P),
    ("IUS invalid date ignored",              Res::Cur,     &[(IUS, "last tuesday")],                            P, P, P),
    ("IUS two field lines ignored",           Res::Cur,     &[(IUS, BEFORE), (IUS, BEFORE)],                     P, P, P),
    ("IUS list on one line ignored",          Res::Cur,     &[(IUS, "Sun, 06 Nov 1994 08:49:36 GMT, Sun, 06 Nov 1994 08:49:36 GMT"), ], P, P, P),
    // If-None-Match (13.1.2): weak comparison; false is 304 for GET/HEAD, 412 otherwise.
    ("INM current tag",                       Res::Cur,     &[(INM, r#""abc""#)],                                N, N, F),
    ("INM weak form of current tag",          Res::Cur,     &[(INM, r#"W/"abc""#)],                              N, N, F),
    ("INM list with weak current (spec 2)",   Res::Cur,     &[(INM, r#""x", W/"abc""#)],                         N, N, F),
    ("INM other tag",                         Res::Cur,     &[(INM, r#""xyz""#)],                                P, P, P),
    ("INM list without current",              Res::Cur,     &[(INM, r#""xyz", W/"uvw""#)],                       P, P, P),
    ("INM star",                              Res::Cur,     &[(INM, "*")],                                       N, N, F),
    ("INM star, absent (create-only)",        Res::Absent,  &[(INM, "*")],                                       P, P, P),
    ("INM tag, absent",                       Res::Absent,  &[(INM, r#""abc""#)],                                P, P, P),
    ("INM strong tag vs weak current",        Res::Weak,    &[(INM, r#""abc""#)],                                N, N, F),
    ("INM star vs weak current",              Res::Weak,    &[(INM, "*")],                                       N, N, F),
    ("INM invalid names no tag",              Res::Cur,     &[(INM, "abc")],                                     P, P, P),
    ("INM star with tag is invalid",          Res::Cur,     &[(INM, r#"*, "abc""#)],                             P, P, P),
    ("INM second field line matches",         Res::Cur,     &[(INM, r#""x""#), (INM, r#""abc""#)],               N, N, F),
    ("INM tag, resource without tag",         Res::NoTag,   &[(INM, r#""abc""#)],                                P, P, P),
    ("INM star, resource without tag",        Res::NoTag,   &[(INM, "*")],                                       N, N, F),
    ("INM comma inside quotes",               Res::Comma,   &[(INM, r#""a,b""#)],                                N, N, F),
    ("INM comma-split parts",                 Res::Comma,   &[(INM, r#""a", "b""#)],                             P, P, P),
    ("INM case-sensitive",                    Res::Cur,     &[(INM, r#""ABC""#)],                                P, P, P),
    ("INM empty field",                       Res::Cur,     &[(INM, "")],                                        P, P, P),
    // If-None-Match makes If-Modified-Since ignored (13.1.3).
    ("INM other, IMS says unmodified (spec 3)", Res::Cur,   &[(INM, r#""xyz""#), (IMS, T)],                      P, P, P),
    ("INM current, IMS says modified",        Res::Cur,     &[(INM, r#""abc""#), (IMS, BEFORE)],                 N, N, F),
    ("INM invalid, IMS says unmodified",      Res::Cur,     &[(INM, "abc"), (IMS, T)],                           P, P, P),
    // If-Modified-Since (13.1.3): GET and HEAD only.
    ("IMS equal to Last-Modified",            Res::Cur,     &[(IMS, T)],                                         N, N, P),
    ("IMS after Last-Modified",               Res::Cur,     &[(IMS, AFTER)],                                     N, N, P),
    ("IMS before Last-Modified",              Res::Cur,     &[(IMS, BEFORE)],                                    P, P, P),
    ("IMS RFC 850 form",                      Res::Cur,     &[(IMS, T_850)],                                     N, N, P),
    ("IMS asctime form",                      Res::Cur,     &[(IMS, T_ASCTIME)],                                 N, N, P),
    ("IMS invalid date ignored",              Res::Cur,     &[(IMS, "1994-11-06")],                              P, P, P),
    ("IMS without Last-Modified ignored",     Res::NoDate,  &[(IMS, T)],                                         P, P, P),
    ("IMS two field lines ignored",           Res::Cur,     &[(IMS, T), (IMS, T)],                               P, P, P),
    ("IMS list on one line ignored",          Res::Cur,     &[(IMS, "Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:37 GMT")], P, P, P),
    ("IMS on absent ignored",                 Res::Absent,  &[(IMS, T)],                                         P, P, P),
    ("IMS with weak validator date",          Res::WeakDate,&[(IMS, T)],                                         N, N, P),
    // Combinations across the two groups.
    ("IM match and INM match",                Res::Cur,     &[(IM, r#""abc""#), (INM, r#""abc""#)],              N, N, F),
    ("IM match and INM other",                Res::Cur,     &[(IM, r#""abc""#), (INM, r#""xyz""#)],              P, P, P),
    ("IM mismatch and INM other",             Res::Cur,     &[(IM, r#""xyz""#), (INM, r#""xyz""#)],              F, F, F),
    ("IM star and INM star",                  Res::Cur,     &[(IM, "*"), (INM, "*")],                            N, N, F),
    ("IM star and INM star, absent",          Res::Absent,  &[(IM, "*"), (INM, "*")],                            F, F, F),
    ("IUS passes and IMS unmodified",         Res::Cur,     &[(IUS, T), (IMS, T)],                               N, N, P),
    ("IUS fails before IMS",                  Res::Cur,     &[(IUS, BEFORE), (IMS, BEFORE)],                     F, F, F),
    ("IUS passes and INM match",              Res::Cur,     &[(IUS, T), (INM, r#""abc""#)],                      N, N, F),
    ("IM match and IMS unmodified",           Res::Cur,     &[(IM, r#""abc""#), (IMS, T)],                       N, N, P),
    ("all four pass",                         Res::Cur,     &[(IM, r#""abc""#), (IUS, T), (INM, r#""x""#), (IMS, BEFORE)], P, P, P),
    // If-Range (13.1.5): GET with Range only; strong tag or strong date equal.
    ("IR current tag",                        Res::Cur,     &[(RANGE, BYTES), (IR, r#""abc""#)],                 P, P, P),
    ("IR old tag (spec 8)",                   Res::Cur,     &[(RANGE, BYTES), (IR, r#""old""#)],                 R, P, P),
    ("IR weak tag never matches",             Res::Cur,     &[(RANGE, BYTES), (IR, r#"W/"abc""#)],               R, P, P),
    ("IR tag vs weak current",                Res::Weak,    &[(RANGE, BYTES), (IR, r#""abc""#)],                 R, P, P),
    ("IR tag, resource without tag",          Res::NoTag,   &[(RANGE, BYTES), (IR, r#""abc""#)],                 R, P, P),
    ("IR comma tag",                          Res::Comma,   &[(RANGE, BYTES), (IR, r#""a,b""#)],                 P, P, P),
    ("IR date equal, strong",                 Res::Cur,     &[(RANGE, BYTES), (IR, T)],                          P, P, P),
    ("IR date equal, weak validator",         Res::WeakDate,&[(RANGE, BYTES), (IR, T)],                          R, P, P),
    ("IR date earlier",                       Res::Cur,     &[(RANGE, BYTES), (IR, BEFORE)],                     R, P, P),
    ("IR date later",                         Res::Cur,     &[(RANGE, BYTES), (IR, AFTER)],                      R, P, P),
    ("IR date, no Last-Modified",             Res::NoDate,  &[(RANGE, BYTES), (IR, T)],                          R, P, P),
    ("IR RFC 850 date equal",                 Res::Cur,     &[(RANGE, BYTES), (IR, T_850)],                      P, P, P),
    ("IR invalid value",                      Res::Cur,     &[(RANGE, BYTES), (IR, "garbage")],                  R, P, P),
    ("IR without Range ignored",              Res::Cur,     &[(IR, r#""old""#)],                                 P, P, P),
    ("Range without IR",                      Res::Cur,     &[(RANGE, BYTES)],                                   P, P, P),
    ("304 decided before If-Range",           Res::Cur,     &[(RANGE, BYTES), (IR, r#""old""#), (INM, r#""abc""#)], N, N, F),
    ("412 decided before If-Range",           Res::Cur,     &[(RANGE, BYTES), (IR, r#""abc""#), (IM, r#""xyz""#)], F, F, F),
    ("IR old tag with passing IM",            Res::Cur,     &[(RANGE, BYTES), (IR, r#""old""#), (IM, r#""abc""#)], R, P, P),
];

const WRITES: [Method; 4] = [Method::PUT, Method::POST, Method::DELETE, Method::PATCH];

fn target(validators: &Option<Validators>) -> Target<'_> {
    validators.as_ref().map_or(Target::Absent, Target::Current)
}

#[test]
fn conformance_table() {
    let mut cases = 0;
    let mut failures = Vec::new();
    for &(name, res, lines, get, head, write) in ROWS {
        let current = validators(res);
        let map = headers(lines);
        let methods = [(Method::GET, get), (Method::HEAD, head)]
            .into_iter()
            .chain(WRITES.iter().map(|m| (m.clone(), write)));
        for (method, want) in methods {
            cases += 1;
            let got = evaluate(&method, &map, target(&current));
            if got != want {
                failures.push(format!(
                    "{name} [{method} on {res:?}]: got {got:?}, want {want:?}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {cases} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(cases >= 150, "only {cases} cases");
}

#[test]
fn preconditions_are_ignored_for_connect_options_trace() {
    let current = validators(Res::Cur);
    for lines in [
        &[(IM, r#""xyz""#)][..],
        &[(INM, r#""abc""#)],
        &[(IUS, BEFORE)],
        &[(IMS, T)],
        &[(RANGE, BYTES), (IR, r#""old""#)],
    ] {
        for method in [Method::CONNECT, Method::OPTIONS, Method::TRACE] {
            assert_eq!(
                evaluate(&method, &headers(lines), target(&current)),
                P,
                "{method} {lines:?}"
            );
        }
    }
}

#[test]
fn preconditions_are_ignored_when_the_answer_would_not_be_2xx() {
    // 13.2.1: a 404 (or 405, 401...) stays what it is, whatever the conditions say.
    for lines in [
        &[(IM, r#""xyz""#)][..],
        &[(IM, "*")],
        &[(INM, "*")],
        &[(IUS, BEFORE)],
        &[(IMS, T)],
    ] {
        for method in METHODS {
            assert_eq!(
                evaluate(&method, &headers(lines), Target::Failing),
                P,
                "{method} {lines:?}"
            );
        }
    }
}

#[test]
fn target_of_maps_missing_resources_by_method() {
    let if_match_any = headers(&[(IM, "*")]);
    // A GET, HEAD or DELETE of a missing resource is a 404: preconditions ignored.
    for method in [Method::GET, Method::HEAD, Method::DELETE] {
        assert_eq!(
            evaluate(&method, &if_match_any, Target::of(&method, None)),
            P,
            "{method}"
        );
    }
    // A PUT, POST or PATCH would create it: If-Match * is false.
    for method in [Method::PUT, Method::POST, Method::PATCH] {
        assert_eq!(
            evaluate(&method, &if_match_any, Target::of(&method, None)),
            F,
            "{method}"
        );
    }
    let current = validators(Res::Cur).unwrap();
    assert!(matches!(
        Target::of(&Method::GET, Some(&current)),
        Target::Current(_)
    ));
}

#[test]
fn whole_second_comparison() {
    // A Last-Modified taken from a clock with sub-second precision compares at whole seconds.
    let lm = to_http_date(UNIX_EPOCH + Duration::from_millis(784_111_777_900));
    let current = Validators::new(None, Some(lm));
    assert_eq!(
        evaluate(
            &Method::GET,
            &headers(&[(IMS, T)]),
            Target::Current(&current)
        ),
        N
    );
    assert_eq!(
        evaluate(
            &Method::PUT,
            &headers(&[(IUS, T)]),
            Target::Current(&current)
        ),
        P
    );
}

/// A header map from field lines, in order; a name may repeat (several field lines).
fn headers(lines: &[(&str, &str)]) -> HeaderMap {
    (lines.iter())
        .map(|(name, value)| {
            (
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            )
        })
        .collect()
}
