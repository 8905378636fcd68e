//! What an operator sees of a running `serve` or `proxy`: Prometheus text on a listener of its
//! own (`--metrics-listen`, off the data path), and an access log line per request
//! (`--access-log`).
//!
//! Per request, one short lock (the operation's row: its statuses and its latency histogram),
//! shared by the serving threads, and three atomic additions: under 1% of a 304's CPU with
//! two threads (`perf record`, docs/figures.md). (A few counter families and one histogram: the
//! exposition format is a dozen lines, not worth a dependency.)

use std::collections::BTreeMap;
use std::fmt::Write;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::Full;
use ifmatch_blob::lease::headers::LEASE_ACTION;
use ifmatch_core::keyed::HashMap;

/// The upper bounds of the latency histograms' buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5, 10.0,
];

/// A latency histogram with the buckets of [`BUCKETS`], then +Inf.
#[derive(Debug, Default)]
pub(crate) struct Histogram {
    buckets: [u64; BUCKETS.len() + 1],
    sum: Duration,
}

impl Histogram {
    pub(crate) fn observe(&mut self, latency: Duration) {
        let seconds = latency.as_secs_f64();
        let bucket = BUCKETS.partition_point(|&bound| bound < seconds);
        self.buckets[bucket] += 1;
        self.sum += latency;
    }

    /// The `_bucket`, `_sum` and `_count` lines of `name`, with `labels` (`key="value"`,
    /// comma-separated, or empty).
    pub(crate) fn render(&self, out: &mut String, name: &str, labels: &str) {
        let with = |extra: &str| match (labels.is_empty(), extra.is_empty()) {
            (true, true) => String::new(),
            (true, false) => format!("{{{extra}}}"),
            (false, true) => format!("{{{labels}}}"),
            (false, false) => format!("{{{labels},{extra}}}"),
        };
        let mut cumulative = 0;
        for (count, bound) in self.buckets.iter().zip(BUCKETS) {
            cumulative += count;
            let _ = writeln!(
                out,
                "{name}_bucket{} {cumulative}",
                with(&format!("le=\"{bound}\""))
            );
        }
        cumulative += self.buckets[BUCKETS.len()];
        let (all, sum) = (with(""), self.sum.as_secs_f64());
        let _ = writeln!(
            out,
            "{name}_bucket{} {cumulative}\n{name}_sum{all} {sum}\n{name}_count{all} {cumulative}",
            with("le=\"+Inf\"")
        );
    }
}

/// The `# HELP` and `# TYPE` lines of a family.
pub(crate) fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A counter family of one unlabelled sample.
pub(crate) fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    family(out, name, "counter", help);
    let _ = writeln!(out, "{name} {value}");
}

/// One operation's row.
#[derive(Debug, Default)]
struct Row {
    statuses: BTreeMap<u16, u64>,
    latency: Histogram,
}

/// What every server counts: requests by operation and status, their latency, bytes, lease
/// actions and connections.
#[derive(Debug, Default)]
pub struct Metrics {
    rows: Mutex<HashMap<&'static str, Row>>,
    leases: Mutex<BTreeMap<(&'static str, u16), u64>>,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    connections_open: AtomicI64,
    connections_total: AtomicU64,
    connections_refused: AtomicU64,
}

/// One request, as the access log and the counters see it.
#[derive(Debug)]
pub(crate) struct Seen<'a> {
    pub(crate) client: IpAddr,
    pub(crate) method: &'a Method,
    pub(crate) path: &'a str,
    /// The operation's name (Azure's, for the blob front; the method, for the proxy).
    pub(crate) operation: &'static str,
    /// The lease action, for a lease operation.
    pub(crate) lease_action: Option<&'static str>,
    pub(crate) status: StatusCode,
    /// Until the answer's head was ready.
    pub(crate) latency: Duration,
    /// As declared by `Content-Length` (both ways).
    pub(crate) bytes_in: u64,
    pub(crate) bytes_out: u64,
    pub(crate) request_id: Option<&'a str>,
}

impl Metrics {
    pub(crate) fn record(&self, seen: &Seen<'_>, access_log: bool) {
        let status = seen.status.as_u16();
        {
            let mut rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
            let row = rows.entry(seen.operation).or_default();
            *row.statuses.entry(status).or_default() += 1;
            row.latency.observe(seen.latency);
        }
        if let Some(action) = seen.lease_action {
            let mut leases = self.leases.lock().unwrap_or_else(|e| e.into_inner());
            *leases.entry((action, status)).or_default() += 1;
        }
        self.bytes_in.fetch_add(seen.bytes_in, Ordering::Relaxed);
        self.bytes_out.fetch_add(seen.bytes_out, Ordering::Relaxed);
        if access_log {
            tracing::info!(
                target: "ifmatch::access",
                client = %seen.client,
                method = %seen.method,
                path = seen.path,
                operation = seen.operation,
                lease_action = seen.lease_action,
                status,
                micros = u64::try_from(seen.latency.as_micros()).unwrap_or(u64::MAX),
                bytes_in = seen.bytes_in,
                bytes_out = seen.bytes_out,
                request_id = seen.request_id,
            );
        }
    }

    pub(crate) fn connection_opened(&self) {
        self.connections_open.fetch_add(1, Ordering::Relaxed);
        self.connections_total.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn connection_closed(&self) {
        self.connections_open.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn connection_refused(&self) {
        self.connections_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// How many requests answered `status`, across operations.
    pub fn answered(&self, status: StatusCode) -> u64 {
        let rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        let status = status.as_u16();
        rows.values()
            .filter_map(|row| row.statuses.get(&status))
            .sum()
    }

    /// The families every server shows, in the Prometheus text format.
    pub fn render(&self, out: &mut String) {
        let rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        let mut operations: Vec<_> = rows.iter().collect();
        operations.sort_by_key(|(name, _)| *name);
        let name = "ifmatch_requests_total";
        family(
            out,
            name,
            "counter",
            "Requests answered, by operation and status.",
        );
        for (operation, row) in &operations {
            for (status, count) in &row.statuses {
                let _ = writeln!(
                    out,
                    "{name}{{operation=\"{operation}\",status=\"{status}\"}} {count}"
                );
            }
        }
        let name = "ifmatch_request_duration_seconds";
        family(
            out,
            name,
            "histogram",
            "Time until the answer's head was ready, by operation.",
        );
        for (operation, row) in &operations {
            row.latency
                .render(out, name, &format!("operation=\"{operation}\""));
        }
        drop(rows);
        let name = "ifmatch_lease_actions_total";
        family(out, name, "counter", "Lease actions, by action and status.");
        let leases = self.leases.lock().unwrap_or_else(|e| e.into_inner());
        for ((action, status), count) in leases.iter() {
            let _ = writeln!(
                out,
                "{name}{{action=\"{action}\",status=\"{status}\"}} {count}"
            );
        }
        drop(leases);
        let name = "ifmatch_open_connections";
        family(out, name, "gauge", "Client connections open now.");
        let open = self.connections_open.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name} {open}");
        let counters = [
            (
                "ifmatch_request_bytes_total",
                "Request body bytes, as declared by Content-Length.",
                &self.bytes_in,
            ),
            (
                "ifmatch_response_bytes_total",
                "Response body bytes, as declared by Content-Length.",
                &self.bytes_out,
            ),
            (
                "ifmatch_connections_total",
                "Client connections accepted.",
                &self.connections_total,
            ),
            (
                "ifmatch_connections_refused_total",
                "Connections closed at once: every connection was busy at the cap.",
                &self.connections_refused,
            ),
        ];
        for (name, help, value) in counters {
            counter(out, name, help, value.load(Ordering::Relaxed));
        }
    }
}

/// The metrics page, or 404 without one.
pub(crate) fn page_response(page: Option<String>) -> http::Response<Full<Bytes>> {
    let Some(page) = page else {
        let mut response = http::Response::new(Full::new(Bytes::from_static(b"not found\n")));
        *response.status_mut() = StatusCode::NOT_FOUND;
        return response;
    };
    let mut response = http::Response::new(Full::new(Bytes::from(page)));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// The lease action a request asks for, as a label; none when it names none.
pub(crate) fn lease_action(method: &Method, headers: &HeaderMap) -> Option<&'static str> {
    // Every lease operation is a PUT: no other request looks for the field.
    if method != Method::PUT {
        return None;
    }
    let action = headers.get(LEASE_ACTION)?.to_str().unwrap_or("");
    let known = ["acquire", "renew", "change", "release", "break"]
        .into_iter()
        .find(|known| known.eq_ignore_ascii_case(action));
    Some(known.unwrap_or("other"))
}

/// A method's name with a `'static` lifetime, as a label.
pub(crate) fn method_name(method: &Method) -> &'static str {
    [
        Method::GET,
        Method::HEAD,
        Method::PUT,
        Method::POST,
        Method::DELETE,
        Method::PATCH,
        Method::OPTIONS,
    ]
    .iter()
    .zip(["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"])
    .find(|(known, _)| *known == method)
    .map_or("OTHER", |(_, name)| name)
}

/// `Content-Length` of a head, 0 when absent.
pub(crate) fn declared_length(headers: &HeaderMap) -> u64 {
    headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_action_is_read_from_a_put_alone() {
        let mut headers = HeaderMap::new();
        headers.insert(LEASE_ACTION, http::HeaderValue::from_static("Acquire"));
        assert_eq!(lease_action(&Method::PUT, &headers), Some("acquire"));
        assert_eq!(lease_action(&Method::GET, &headers), None);
        headers.insert(LEASE_ACTION, http::HeaderValue::from_static("steal"));
        assert_eq!(lease_action(&Method::PUT, &headers), Some("other"));
        assert_eq!(lease_action(&Method::PUT, &HeaderMap::new()), None);
    }

    #[test]
    fn a_histogram_counts_into_the_first_bucket_that_holds_it() {
        let mut histogram = Histogram::default();
        histogram.observe(Duration::from_micros(100));
        histogram.observe(Duration::from_millis(3));
        histogram.observe(Duration::from_secs(60));
        let mut out = String::new();
        histogram.render(&mut out, "h", "op=\"x\"");
        assert!(
            out.contains("h_bucket{op=\"x\",le=\"0.0001\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("h_bucket{op=\"x\",le=\"0.0025\"} 1\n"),
            "{out}"
        );
        assert!(out.contains("h_bucket{op=\"x\",le=\"0.005\"} 2\n"), "{out}");
        assert!(out.contains("h_bucket{op=\"x\",le=\"10\"} 2\n"), "{out}");
        assert!(out.contains("h_bucket{op=\"x\",le=\"+Inf\"} 3\n"), "{out}");
        assert!(out.contains("h_count{op=\"x\"} 3\n"), "{out}");
        let mut bare = String::new();
        histogram.render(&mut bare, "h", "");
        assert!(bare.contains("h_bucket{le=\"+Inf\"} 3\nh_sum "), "{bare}");
    }
}
