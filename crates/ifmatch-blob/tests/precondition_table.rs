//! Blob-dialect conformance table for `precondition::blob::evaluate`
//! (`shared/spec/conditional-requests.md`, "Blob dialect").

use crate::common;

use common::headers;

use std::time::{Duration, UNIX_EPOCH};

use ifmatch_blob::ErrorCode::{
    self, BlobAlreadyExists, ConditionNotMet as CNM, MultipleConditionHeadersNotSupported as MULTI,
    UnsupportedHeader,
};
use ifmatch_blob::precondition::{Operation, evaluate};
use ifmatch_core::precondition::Outcome::{IgnoreRange, NotModified, Proceed};
use ifmatch_core::precondition::{Outcome, Validators};
use ifmatch_core::{EntityTag, date::to_http_date};

const T: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
const BEFORE: &str = "Sun, 06 Nov 1994 08:49:36 GMT";
const AFTER: &str = "Sun, 06 Nov 1994 08:49:38 GMT";

const IM: &str = "if-match";
const INM: &str = "if-none-match";
const IMS: &str = "if-modified-since";
const IUS: &str = "if-unmodified-since";

const OK: Result<Outcome, ErrorCode> = Ok(Proceed);
const NM: Result<Outcome, ErrorCode> = Ok(NotModified);
const FAIL: Result<Outcome, ErrorCode> = Err(CNM);
const MANY: Result<Outcome, ErrorCode> = Err(MULTI);

use Operation::{Container as C, Put, Read, Write};

/// (name, operation, blob exists, field lines, expected)
type Row = (
    &'static str,
    Operation,
    bool,
    &'static [(&'static str, &'static str)],
    Result<Outcome, ErrorCode>,
);

#[rustfmt::skip]
const ROWS: &[Row] = &[
    // Reads: If-Match AND If-Unmodified-Since AND (If-None-Match OR If-Modified-Since).
    ("read, no conditions",                       Read, true,  &[],                                         OK),
    ("read, IM current",                          Read, true,  &[(IM, r#""abc""#)],                         OK),
    ("read, IM other",                            Read, true,  &[(IM, r#""xyz""#)],                         FAIL),
    ("read, IM list containing current",          Read, true,  &[(IM, r#""xyz", "abc""#)],                  OK),
    ("read, IM star",                             Read, true,  &[(IM, "*")],                                OK),
    ("read, IM on missing blob before 404",       Read, false, &[(IM, r#""abc""#)],                         FAIL),
    ("read, IM star on missing blob",             Read, false, &[(IM, "*")],                                FAIL),
    ("read, missing blob, no conditions",         Read, false, &[],                                         OK),
    ("read, missing blob, INM",                   Read, false, &[(INM, r#""abc""#)],                        OK),
    ("read, missing blob, IUS",                   Read, false, &[(IUS, BEFORE)],                            OK),
    ("read, INM current (spec 1)",                Read, true,  &[(INM, r#""abc""#)],                        NM),
    ("read, INM weak current (spec 2)",           Read, true,  &[(INM, r#""x", W/"abc""#)],                 NM),
    ("read, INM list without current",            Read, true,  &[(INM, r#""x", "y""#)],                     OK),
    ("read, INM star",                            Read, true,  &[(INM, "*")],                               NM),
    ("read, IMS equal (not modified)",            Read, true,  &[(IMS, T)],                                 NM),
    ("read, IMS after",                           Read, true,  &[(IMS, AFTER)],                             NM),
    ("read, IMS before",                          Read, true,  &[(IMS, BEFORE)],                            OK),
    ("read, IUS equal passes",                    Read, true,  &[(IUS, T)],                                 OK),
    ("read, IUS before fails",                    Read, true,  &[(IUS, BEFORE)],                            FAIL),
    ("read, INM match OR IMS modified: proceeds", Read, true,  &[(INM, r#""abc""#), (IMS, BEFORE)],         OK),
    ("read, INM other OR IMS unmodified",         Read, true,  &[(INM, r#""xyz""#), (IMS, T)],              OK),
    ("read, INM match and IMS unmodified",        Read, true,  &[(INM, r#""abc""#), (IMS, T)],              NM),
    ("read, IM match AND IUS failing",            Read, true,  &[(IM, r#""abc""#), (IUS, BEFORE)],          FAIL),
    ("read, IM match AND IUS passing",            Read, true,  &[(IM, r#""abc""#), (IUS, T)],               OK),
    ("read, IM other and INM other",              Read, true,  &[(IM, r#""xyz""#), (INM, r#""xyz""#)],      FAIL),
    ("read, 412 beats 304",                       Read, true,  &[(IUS, BEFORE), (INM, r#""abc""#)],         FAIL),
    ("read, all four pass",                       Read, true,  &[(IM, r#""abc""#), (IUS, T), (INM, r#""x""#), (IMS, BEFORE)], OK),
    ("read, invalid IMS ignored",                 Read, true,  &[(IMS, "soon")],                            OK),
    ("read, Range with old If-Range (spec 8)",    Read, true,  &[("range", "bytes=0-1"), ("if-range", r#""old""#)], Ok(IgnoreRange)),
    ("read, Range with current If-Range",         Read, true,  &[("range", "bytes=0-1"), ("if-range", r#""abc""#)], OK),
    // Put Blob: at most one condition, the two pairs excepted; create-only is 409.
    ("put, no conditions: last writer wins",      Put,  true,  &[],                                         OK),
    ("put, no conditions, new blob",              Put,  false, &[],                                         OK),
    ("put, INM star on new blob",                 Put,  false, &[(INM, "*")],                               OK),
    ("put, INM star on existing blob (spec 5)",   Put,  true,  &[(INM, "*")],                               Err(BlobAlreadyExists)),
    ("put, IM current",                           Put,  true,  &[(IM, r#""abc""#)],                         OK),
    ("put, IM previous tag (spec 4)",             Put,  true,  &[(IM, r#""xyz""#)],                         FAIL),
    ("put, IM star on new blob",                  Put,  false, &[(IM, "*")],                                FAIL),
    ("put, IM tag on new blob",                   Put,  false, &[(IM, r#""abc""#)],                         FAIL),
    ("put, IM star on existing blob",             Put,  true,  &[(IM, "*")],                                OK),
    ("put, IM and INM (spec 7)",                  Put,  true,  &[(IM, r#""abc""#), (INM, r#""xyz""#)],      MANY),
    ("put, IM decides over failing IUS",          Put,  true,  &[(IM, r#""abc""#), (IUS, BEFORE)],          OK),
    ("put, IM fails with passing IUS",            Put,  true,  &[(IM, r#""xyz""#), (IUS, AFTER)],           FAIL),
    ("put, INM decides over failing IMS",         Put,  true,  &[(INM, r#""xyz""#), (IMS, AFTER)],          OK),
    ("put, INM fails with passing IMS",           Put,  true,  &[(INM, r#""abc""#), (IMS, BEFORE)],         FAIL),
    ("put, two tags in IM",                       Put,  true,  &[(IM, r#""abc", "xyz""#)],                  MANY),
    ("put, two IM field lines",                   Put,  true,  &[(IM, r#""abc""#), (IM, r#""xyz""#)],       MANY),
    ("put, two tags in INM",                      Put,  true,  &[(INM, r#""x", "y""#)],                     MANY),
    ("put, IUS and IMS",                          Put,  true,  &[(IUS, T), (IMS, BEFORE)],                  MANY),
    ("put, IM and IMS",                           Put,  true,  &[(IM, r#""abc""#), (IMS, BEFORE)],          MANY),
    ("put, INM and IUS",                          Put,  true,  &[(INM, r#""x""#), (IUS, T)],                MANY),
    ("put, IM, IUS and INM",                      Put,  true,  &[(IM, r#""abc""#), (IUS, T), (INM, r#""x""#)], MANY),
    ("put, IUS equal passes",                     Put,  true,  &[(IUS, T)],                                 OK),
    ("put, IUS before fails",                     Put,  true,  &[(IUS, BEFORE)],                            FAIL),
    ("put, IMS equal fails",                      Put,  true,  &[(IMS, T)],                                 FAIL),
    ("put, IMS before passes",                    Put,  true,  &[(IMS, BEFORE)],                            OK),
    ("put, INM current fails",                    Put,  true,  &[(INM, r#""abc""#)],                        FAIL),
    ("put, INM other passes",                     Put,  true,  &[(INM, r#""xyz""#)],                        OK),
    ("put, IMS on new blob ignored",              Put,  false, &[(IMS, T)],                                 OK),
    ("put, invalid IM never matches",             Put,  true,  &[(IM, "abc")],                              FAIL),
    // Other blob writes: Delete, Lease, Set metadata.
    ("delete, IM star on existing (spec 6)",      Write, true, &[(IM, "*")],                                OK),
    ("delete, IM current",                        Write, true, &[(IM, r#""abc""#)],                         OK),
    ("delete, IM other",                          Write, true, &[(IM, r#""xyz""#)],                         FAIL),
    ("delete, INM star on existing is 412",       Write, true, &[(INM, "*")],                               FAIL),
    ("delete, IM star on missing",                Write, false, &[(IM, "*")],                               FAIL),
    ("delete, missing, no conditions",            Write, false, &[],                                        OK),
    ("delete, IM and INM",                        Write, true, &[(IM, r#""abc""#), (INM, r#""abc""#)],      MANY),
    ("delete, IMS equal fails",                   Write, true, &[(IMS, T)],                                 FAIL),
    // Containers: dates only.
    ("container, no conditions",                  C,    true,  &[],                                         OK),
    ("container, IMS before",                     C,    true,  &[(IMS, BEFORE)],                            OK),
    ("container, IMS equal fails",                C,    true,  &[(IMS, T)],                                 FAIL),
    ("container, IUS before fails",               C,    true,  &[(IUS, BEFORE)],                            FAIL),
    ("container, IUS equal passes",               C,    true,  &[(IUS, T)],                                 OK),
    ("container, IUS and IMS both pass",          C,    true,  &[(IUS, T), (IMS, BEFORE)],                  OK),
    ("container, If-Match unsupported",           C,    true,  &[(IM, r#""abc""#)],                         Err(UnsupportedHeader)),
    ("container, If-None-Match unsupported",      C,    true,  &[(INM, "*")],                               Err(UnsupportedHeader)),
];

#[test]
fn conformance_table() {
    let lm = to_http_date(UNIX_EPOCH + Duration::from_secs(784_111_777));
    let current = Validators::new(Some(EntityTag::strong("abc").unwrap()), Some(lm));
    let mut failures = Vec::new();
    for &(name, operation, exists, lines, want) in ROWS {
        let got = evaluate(operation, &headers(lines), exists.then_some(&current));
        if got != want {
            failures.push(format!("{name}: got {got:?}, want {want:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        ROWS.len(),
        failures.join("\n")
    );
    assert!(ROWS.len() >= 40);
}

#[test]
fn a_blob_write_never_answers_304() {
    let lm = to_http_date(UNIX_EPOCH + Duration::from_secs(784_111_777));
    let current = Validators::new(Some(EntityTag::strong("abc").unwrap()), Some(lm));
    for lines in [&[(INM, r#""abc""#)][..], &[(IMS, T)], &[(INM, "*")]] {
        for op in [Put, Write, C] {
            let got = evaluate(op, &headers(lines), Some(&current));
            assert_ne!(got, Ok(NotModified), "{op:?} {lines:?}");
        }
    }
}
