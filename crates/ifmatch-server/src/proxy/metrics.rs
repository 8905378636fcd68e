//! What the proxy counts for `/metrics`, beside what every server counts: the origin's side
//! and the shared cache's.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use ifmatch_cache::{CacheReport, SharedCacheHandle};

use crate::metrics::{self, Histogram, Metrics};

/// The shared cache's lines of `/metrics`.
fn render_cache(out: &mut String, report: &CacheReport) {
    let counters = [
        (
            "ifmatch_cache_hits_total",
            "Answers served from the shared cache while fresh.",
            report.hits,
        ),
        (
            "ifmatch_cache_misses_total",
            "Requests the shared cache asked the origin for.",
            report.misses,
        ),
        (
            "ifmatch_cache_stale_served_total",
            "Stale answers served (while revalidating, or in place of a failure).",
            report.stale_served,
        ),
        (
            "ifmatch_cache_collapsed_total",
            "Requests that waited for another of their URL and were served what it stored.",
            report.collapsed,
        ),
        (
            "ifmatch_cache_bytes_from_cache_total",
            "Body bytes served from the shared cache.",
            report.bytes_from_cache,
        ),
        (
            "ifmatch_cache_bytes_from_origin_total",
            "Body bytes the origin declared for what it answered through the cache.",
            report.bytes_from_origin,
        ),
        (
            "ifmatch_cache_evictions_total",
            "Entries evicted from the memory tier for room.",
            report.evictions,
        ),
        (
            "ifmatch_cache_disk_hits_total",
            "Answers read back from the disk tier into memory.",
            report.disk_hits,
        ),
        (
            "ifmatch_cache_disk_writes_total",
            "Answers written to the disk tier.",
            report.disk_writes,
        ),
        (
            "ifmatch_cache_disk_errors_total",
            "Writes to and reads from the disk tier that failed (a full disk, a torn file).",
            report.disk_errors,
        ),
        (
            "ifmatch_cache_disk_skipped_total",
            "Answers not written to the disk tier, its queue of writes being full.",
            report.disk_skipped,
        ),
    ];
    for (name, help, value) in counters {
        metrics::counter(out, name, help, value);
    }
    let name = "ifmatch_cache_revalidations_total";
    metrics::family(
        out,
        name,
        "counter",
        "Revalidations with the origin, by outcome.",
    );
    for (outcome, value) in [
        ("not_modified", report.revalidated_not_modified),
        ("modified", report.revalidated_modified),
        ("failed", report.revalidation_failed),
    ] {
        let _ = writeln!(out, "{name}{{outcome=\"{outcome}\"}} {value}");
    }
    metrics::family(
        out,
        "ifmatch_cache_disk_indexing",
        "gauge",
        "1 while the disk tier indexes the files a previous process left (their URLs are misses until then).",
    );
    let _ = writeln!(
        out,
        "ifmatch_cache_disk_indexing {}",
        u8::from(report.disk_indexing)
    );
    for (name, help, memory, disk) in [
        (
            "ifmatch_cache_entries",
            "The URLs each tier holds answers of.",
            report.entries,
            report.disk_entries,
        ),
        (
            "ifmatch_cache_bytes",
            "Bytes each tier's entries take.",
            report.bytes,
            report.disk_bytes,
        ),
    ] {
        metrics::family(out, name, "gauge", help);
        let _ = writeln!(out, "{name}{{tier=\"memory\"}} {memory}");
        let _ = writeln!(out, "{name}{{tier=\"disk\"}} {disk}");
    }
}

/// What the proxy counts, for `/metrics`: what every server counts (requests by method and
/// status, latency, bytes, connections), and the origin's side.
#[derive(Debug, Default)]
pub struct ProxyMetrics {
    pub(super) served: Arc<Metrics>,
    pub(super) not_modified_from_cache: AtomicU64,
    pub(super) upstream_requests: AtomicU64,
    pub(super) upstream_errors: AtomicU64,
    pub(super) upstream_timeouts: AtomicU64,
    /// Upstream latency, until the response head.
    upstream_latency: Mutex<Histogram>,
    /// The shared cache, for its counters.
    pub(super) cache: OnceLock<SharedCacheHandle>,
}

impl ProxyMetrics {
    pub(super) fn observe(&self, latency: Duration) {
        (self.upstream_latency.lock())
            .unwrap_or_else(|e| e.into_inner())
            .observe(latency);
    }

    /// The Prometheus text exposition format.
    pub fn render(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = String::new();
        self.served.render(&mut out);
        let counters = [
            (
                "ifmatch_not_modified_from_cache_total",
                "304s answered from the cache, without reaching the origin.",
                &self.not_modified_from_cache,
            ),
            (
                "ifmatch_upstream_requests_total",
                "Requests sent to the origin.",
                &self.upstream_requests,
            ),
            (
                "ifmatch_upstream_errors_total",
                "Requests the origin could not be reached for (502).",
                &self.upstream_errors,
            ),
            (
                "ifmatch_upstream_timeouts_total",
                "Requests the origin did not answer in time (504).",
                &self.upstream_timeouts,
            ),
        ];
        for (name, help, value) in counters {
            metrics::counter(&mut out, name, help, get(value));
        }
        let name = "ifmatch_upstream_latency_seconds";
        metrics::family(
            &mut out,
            name,
            "histogram",
            "Time until the origin's response head.",
        );
        (self.upstream_latency.lock())
            .unwrap_or_else(|e| e.into_inner())
            .render(&mut out, name, "");
        if let Some(cache) = self.cache.get() {
            render_cache(&mut out, &cache.report());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metrics_render_as_prometheus_text() {
        let metrics = ProxyMetrics::default();
        metrics.observe(Duration::from_millis(3));
        metrics.observe(Duration::from_secs(11));
        let text = metrics.render();
        assert!(text.contains("ifmatch_upstream_latency_seconds_bucket{le=\"0.005\"} 1\n"));
        assert!(text.contains("ifmatch_upstream_latency_seconds_bucket{le=\"10\"} 1\n"));
        assert!(text.contains("ifmatch_upstream_latency_seconds_bucket{le=\"+Inf\"} 2\n"));
        assert!(text.contains("ifmatch_upstream_latency_seconds_count 2\n"));
        assert!(text.contains("ifmatch_upstream_requests_total 0\n"));
        assert!(text.contains("# TYPE ifmatch_requests_total counter\n"));
    }
}
