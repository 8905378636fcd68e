//! Helpers shared by the engine's table tests.

use http::{HeaderMap, HeaderName, HeaderValue};

/// A header map from field lines, in order; a name may repeat (several field lines).
pub(crate) fn headers(lines: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in lines {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}
