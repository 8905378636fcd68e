//! Cross-origin resource sharing as every Azure storage service applies it: the `<Cors>` rules
//! of the service's properties (Set Blob, Queue or Table Service Properties), a browser's
//! preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) answered from them
//! without credentials, and the `Access-Control-*` headers added to an actual request's answer
//! when its `Origin` matches a rule. The rules are evaluated in order, the first match wins,
//! as Azure's "CORS support for Azure Storage" page says. CORS is no authorization: a request
//! still needs its credentials.

use http::{HeaderMap, HeaderValue, Method, header};
use quick_xml::events::Event;

/// The most rules a service keeps.
pub const MAX_RULES: usize = 5;

/// The methods a rule may allow.
const METHODS: [&str; 8] = [
    "DELETE", "GET", "HEAD", "MERGE", "POST", "OPTIONS", "PUT", "PATCH",
];

/// One `<CorsRule>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    /// `AllowedOrigins`: origins, or `*` for any.
    pub origins: Vec<String>,
    /// `AllowedMethods`.
    pub methods: Vec<String>,
    /// `AllowedHeaders`: names, prefixes ending in `*`, or `*`.
    pub allowed_headers: Vec<String>,
    /// `ExposedHeaders`: what a browser may read of an answer.
    pub exposed_headers: Vec<String>,
    /// `MaxAgeInSeconds`: how long a preflight's answer may be cached.
    pub max_age: u64,
}

/// A service's CORS rules, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cors {
    /// The rules.
    pub rules: Vec<Rule>,
}

/// Why a preflight is refused: 400 when it is no preflight (no `Origin` or no
/// `Access-Control-Request-Method`), 403 `CorsPreflightFailure` when no rule allows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No `Origin` or `Access-Control-Request-Method`.
    NotPreflight,
    /// No rule matches (or the service has none).
    NoRule,
}

impl Cors {
    /// The rules of a service's properties (`<StorageServiceProperties>` text); none when it
    /// has no `<Cors>`. An error names what is wrong: more than five rules, a rule without
    /// its five elements, a method Azure does not allow, a maximum age that is no number.
    pub fn of_properties(xml: &str) -> Result<Self, String> {
        let mut reader = quick_xml::Reader::from_str(xml);
        let mut path: Vec<Vec<u8>> = Vec::new();
        let mut rules: Vec<(Rule, u8)> = Vec::new();
        let mut text = String::new();
        loop {
            let event = reader.read_event().map_err(|e| format!("not XML: {e}"))?;
            match event {
                Event::Start(e) => {
                    let name = e.local_name().as_ref().to_vec();
                    if path.len() == 2 && path[1] == b"Cors" && name == b"CorsRule" {
                        rules.push(Default::default());
                    }
                    path.push(name);
                    text.clear();
                }
                Event::Empty(e) if path.len() == 3 && path[2] == b"CorsRule" => {
                    if let Some((rule, seen)) = rules.last_mut() {
                        *seen |= field(rule, e.local_name().as_ref(), "")?;
                    }
                }
                Event::Text(t) => text.push_str(&t.decode().map_err(|e| e.to_string())?),
                Event::End(_) => {
                    let name = path.pop().unwrap_or_default();
                    if path.len() == 3
                        && path[2] == b"CorsRule"
                        && let Some((rule, seen)) = rules.last_mut()
                    {
                        *seen |= field(rule, &name, text.trim())?;
                    }
                    text.clear();
                }
                Event::Eof => break,
                _ => {}
            }
        }
        if rules.len() > MAX_RULES {
            return Err(format!("at most {MAX_RULES} CORS rules"));
        }
        if rules.iter().any(|(_, seen)| *seen != 0b1_1111) {
            return Err(
                "a CorsRule has AllowedOrigins, AllowedMethods, MaxAgeInSeconds, \
                        ExposedHeaders and AllowedHeaders"
                    .to_owned(),
            );
        }
        let rules = rules.into_iter().map(|(rule, _)| rule).collect();
        Ok(Self { rules })
    }

    /// The answer's headers to a preflight of `headers`, or why it is refused.
    pub fn preflight(&self, headers: &HeaderMap) -> Result<HeaderMap, Refused> {
        let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
        let (Some(origin), Some(method)) = (
            text(header::ORIGIN),
            text(header::ACCESS_CONTROL_REQUEST_METHOD),
        ) else {
            return Err(Refused::NotPreflight);
        };
        let asked: Vec<&str> = text(header::ACCESS_CONTROL_REQUEST_HEADERS)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .collect();
        let rule = (self.rules.iter())
            .find(|rule| {
                rule.allows(origin, method)
                    && asked
                        .iter()
                        .all(|name| matches(&rule.allowed_headers, name))
            })
            .ok_or(Refused::NoRule)?;
        let mut out = rule.origin_headers(origin);
        insert(&mut out, header::ACCESS_CONTROL_ALLOW_METHODS, method);
        if !asked.is_empty() {
            insert(
                &mut out,
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                &asked.join(","),
            );
        }
        let age = rule.max_age.to_string();
        insert(&mut out, header::ACCESS_CONTROL_MAX_AGE, &age);
        Ok(out)
    }

    /// Adds to `answer` the headers an actual request with an `Origin` earns: those of the
    /// first rule allowing its origin and method; with rules but none matching, `Vary:
    /// Origin` alone (the answer depends on it).
    pub fn decorate(&self, method: &Method, request: &HeaderMap, answer: &mut HeaderMap) {
        let Some(origin) = request.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
            return;
        };
        if self.rules.is_empty() {
            return;
        }
        let found = (self.rules.iter()).find(|rule| rule.allows(origin, method.as_str()));
        match found {
            Some(rule) => {
                answer.extend(rule.origin_headers(origin));
                if !rule.exposed_headers.is_empty() {
                    let exposed = rule.exposed_headers.join(",");
                    insert(answer, header::ACCESS_CONTROL_EXPOSE_HEADERS, &exposed);
                }
            }
            None => insert(answer, header::VARY, "Origin"),
        }
    }
}

impl Rule {
    fn allows(&self, origin: &str, method: &str) -> bool {
        let origin_ok = (self.origins.iter()).any(|o| o == "*" || o.eq_ignore_ascii_case(origin));
        origin_ok && self.methods.iter().any(|m| m == method)
    }

    /// `Access-Control-Allow-Origin` (`*` for a rule open to every origin, else the origin,
    /// with credentials allowed and `Vary: Origin`).
    fn origin_headers(&self, origin: &str) -> HeaderMap {
        let mut out = HeaderMap::new();
        if self.origins.iter().any(|o| o == "*") {
            insert(&mut out, header::ACCESS_CONTROL_ALLOW_ORIGIN, "*");
        } else {
            insert(&mut out, header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
            insert(&mut out, header::ACCESS_CONTROL_ALLOW_CREDENTIALS, "true");
            insert(&mut out, header::VARY, "Origin");
        }
        out
    }
}

/// Sets `rule`'s field `name` from `text`; answers the bit of the field set (0 for another
/// element).
fn field(rule: &mut Rule, name: &[u8], text: &str) -> Result<u8, String> {
    let list = || -> Vec<String> {
        (text.split(','))
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    };
    Ok(match name {
        b"AllowedOrigins" => {
            rule.origins = list();
            1
        }
        b"AllowedMethods" => {
            rule.methods = list();
            if let Some(wrong) = rule.methods.iter().find(|m| !METHODS.contains(&m.as_str())) {
                return Err(format!("{wrong:?} is no method a CORS rule allows"));
            }
            2
        }
        b"MaxAgeInSeconds" => {
            rule.max_age =
                (text.parse()).map_err(|_| format!("MaxAgeInSeconds {text:?} is no number"))?;
            4
        }
        b"ExposedHeaders" => {
            rule.exposed_headers = list();
            8
        }
        b"AllowedHeaders" => {
            rule.allowed_headers = list();
            16
        }
        _ => 0,
    })
}

/// Whether `name` is one of `allowed`: a name (any case), a prefix ending in `*`, or `*`.
fn matches(allowed: &[String], name: &str) -> bool {
    allowed.iter().any(|a| match a.strip_suffix('*') {
        Some(prefix) => {
            name.len() >= prefix.len() && name[..prefix.len()].eq_ignore_ascii_case(prefix)
        }
        None => a.eq_ignore_ascii_case(name),
    })
}

fn insert(headers: &mut HeaderMap, name: header::HeaderName, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        headers.insert(name, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROPERTIES: &str = "<?xml version=\"1.0\" encoding=\"utf-8\"?><StorageServiceProperties>\
        <Cors><CorsRule><AllowedOrigins>https://app.example</AllowedOrigins>\
        <AllowedMethods>GET,PUT</AllowedMethods><MaxAgeInSeconds>60</MaxAgeInSeconds>\
        <ExposedHeaders>x-ms-meta-*</ExposedHeaders><AllowedHeaders>x-ms-meta-*,content-type</AllowedHeaders>\
        </CorsRule><CorsRule><AllowedOrigins>*</AllowedOrigins><AllowedMethods>GET</AllowedMethods>\
        <MaxAgeInSeconds>5</MaxAgeInSeconds><ExposedHeaders/><AllowedHeaders/></CorsRule></Cors>\
        </StorageServiceProperties>";

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        (pairs.iter())
            .map(|(n, v)| (header::HeaderName::from_static(n), v.parse().unwrap()))
            .collect()
    }

    #[test]
    fn a_preflight_is_answered_by_the_first_rule_that_allows_it() {
        let cors = Cors::of_properties(PROPERTIES).unwrap();
        assert_eq!(cors.rules.len(), 2);
        let asked = headers(&[
            ("origin", "https://app.example"),
            ("access-control-request-method", "PUT"),
            (
                "access-control-request-headers",
                "x-ms-meta-a, Content-Type",
            ),
        ]);
        let out = cors.preflight(&asked).unwrap();
        assert_eq!(out["access-control-allow-origin"], "https://app.example");
        assert_eq!(out["access-control-allow-methods"], "PUT");
        assert_eq!(out["access-control-max-age"], "60");
        assert_eq!(out["access-control-allow-credentials"], "true");
        let other = headers(&[
            ("origin", "https://else.example"),
            ("access-control-request-method", "GET"),
        ]);
        assert_eq!(
            cors.preflight(&other).unwrap()["access-control-allow-origin"],
            "*"
        );
        let refused = headers(&[
            ("origin", "https://else.example"),
            ("access-control-request-method", "PUT"),
        ]);
        assert_eq!(cors.preflight(&refused), Err(Refused::NoRule));
        let header_refused = headers(&[
            ("origin", "https://app.example"),
            ("access-control-request-method", "PUT"),
            ("access-control-request-headers", "x-other"),
        ]);
        assert_eq!(cors.preflight(&header_refused), Err(Refused::NoRule));
        let no_method = headers(&[("origin", "https://app.example")]);
        assert_eq!(cors.preflight(&no_method), Err(Refused::NotPreflight));
        assert_eq!(Cors::default().preflight(&asked), Err(Refused::NoRule));
    }

    #[test]
    fn an_actual_request_earns_its_rules_headers() {
        let cors = Cors::of_properties(PROPERTIES).unwrap();
        let mut answer = HeaderMap::new();
        let request = headers(&[("origin", "https://app.example")]);
        cors.decorate(&Method::PUT, &request, &mut answer);
        assert_eq!(answer["access-control-allow-origin"], "https://app.example");
        assert_eq!(answer["access-control-expose-headers"], "x-ms-meta-*");
        let mut answer = HeaderMap::new();
        let request = headers(&[("origin", "https://else.example")]);
        cors.decorate(&Method::DELETE, &request, &mut answer);
        assert!(answer.get("access-control-allow-origin").is_none());
        assert_eq!(answer["vary"], "Origin");
        let mut answer = HeaderMap::new();
        cors.decorate(&Method::GET, &HeaderMap::new(), &mut answer);
        assert!(answer.is_empty(), "no Origin, no CORS");
    }

    #[test]
    fn rules_past_the_documented_limits_are_refused() {
        let rule = "<CorsRule><AllowedOrigins>*</AllowedOrigins><AllowedMethods>GET</AllowedMethods>\
            <MaxAgeInSeconds>1</MaxAgeInSeconds><ExposedHeaders/><AllowedHeaders/></CorsRule>";
        let with = |rules: &str| {
            format!("<StorageServiceProperties><Cors>{rules}</Cors></StorageServiceProperties>")
        };
        assert!(Cors::of_properties(&with(&rule.repeat(5))).is_ok());
        assert!(Cors::of_properties(&with(&rule.repeat(6))).is_err());
        let wrong_method = rule.replace(">GET<", ">TRACE<");
        assert!(Cors::of_properties(&with(&wrong_method)).is_err());
        let missing = rule.replace("<ExposedHeaders/>", "");
        assert!(Cors::of_properties(&with(&missing)).is_err());
        let age = rule.replace(">1<", ">soon<");
        assert!(Cors::of_properties(&with(&age)).is_err());
        assert_eq!(
            Cors::of_properties("<StorageServiceProperties/>").unwrap(),
            Cors::default()
        );
    }
}
