//! Request units: what each answer charges (`x-ms-request-charge`), by a model of Azure's
//! published costs, the same for the same work on the same data (as Azure's are):
//!
//! - a point read, or a write (create, replace, upsert, patch, delete: of the document
//!   written, or deleted), costs what Azure's table of request units by document size says
//!   (the "understand request unit consumption" page: 1 KB read 1.00, write 4.95; 2 KB 1.04,
//!   6.29; ... 2 MB 291.80, 1,250.00), linearly between two of its sizes; under 1 KB as 1 KB;
//! - a query page costs [`QUERY_BASE`] to run, [`PER_EXAMINED`] for each document it reads
//!   and a point read's cost of the bytes it returns, by kilobyte ([`query`]); a page of a
//!   feed (the change feed, Read Documents) the same;
//! - anything else (accounts, databases, containers, users, permissions, offers): 1.
//!
//! A request refused before it ran (a 429 among them) costs nothing.

use std::sync::atomic::{AtomicU64, Ordering};

/// Azure's table: a document's size in KB, and what reading it and writing it cost.
const TABLE: [(f64, f64, f64); 12] = [
    (1.0, 1.00, 4.95),
    (2.0, 1.04, 6.29),
    (4.0, 1.14, 6.67),
    (8.0, 1.33, 7.04),
    (16.0, 1.67, 9.52),
    (32.0, 2.19, 11.23),
    (64.0, 4.76, 22.67),
    (128.0, 9.95, 48.19),
    (256.0, 20.28, 98.29),
    (512.0, 40.95, 184.57),
    (1024.0, 145.90, 625.00),
    (2048.0, 291.80, 1250.00),
];

/// What running a query costs before it reads a document: about what Azure charges the
/// smallest query (2.3 RU for one that returns a small document by an index).
pub const QUERY_BASE: f64 = 2.3;

/// What a query pays for each document it reads (and filters): a scan of 1,000 documents
/// costs about 30 RU more than a look-up of one, as Azure's scans do.
pub const PER_EXAMINED: f64 = 0.03;

/// What a metadata operation costs.
pub const METADATA: f64 = 1.0;

/// A point read of a document of `bytes`.
pub fn read(bytes: usize) -> f64 {
    by_size(bytes, |(_, read, _)| read)
}

/// A write of a document of `bytes`.
pub fn write(bytes: usize) -> f64 {
    by_size(bytes, |(_, _, write)| write)
}

/// A query page that read `examined` documents and returned `returned` bytes of results.
pub fn query(examined: usize, returned: usize) -> f64 {
    let returned = match returned {
        0 => 0.0,
        _ => read(returned),
    };
    QUERY_BASE + PER_EXAMINED * examined as f64 + returned
}

fn by_size(bytes: usize, cost: impl Fn((f64, f64, f64)) -> f64) -> f64 {
    let kb = (bytes as f64 / 1024.0).max(1.0);
    let (first, last) = (TABLE[0], TABLE[TABLE.len() - 1]);
    if kb <= first.0 {
        return cost(first);
    }
    for pair in TABLE.windows(2) {
        let (low, high) = (pair[0], pair[1]);
        if kb <= high.0 {
            let share = (kb - low.0) / (high.0 - low.0);
            return cost(low) + share * (cost(high) - cost(low));
        }
    }
    // Past Azure's largest document (2 MB): in proportion.
    cost(last) * kb / last.0
}

/// What one request is charged, added up as it is served: request units (in hundredths), and
/// for a query or a feed page the documents it read, whose cost [`Meter::total`] adds to that
/// of the bytes it returned.
#[derive(Debug, Default)]
pub struct Meter {
    hundredths: AtomicU64,
    /// Documents read by a query or a feed page, plus one (none: not one).
    examined: AtomicU64,
}

impl Meter {
    /// Adds `ru`.
    pub fn add(&self, ru: f64) {
        let hundredths = (ru * 100.0).round().max(0.0) as u64;
        self.hundredths.fetch_add(hundredths, Ordering::Relaxed);
    }

    /// The request reads as a query does, `documents` of them so far.
    pub fn examined(&self, documents: usize) {
        let first = self.examined.fetch_add(documents as u64, Ordering::Relaxed) == 0;
        if first {
            self.examined.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// What the request cost, its answer returning `returned` bytes.
    pub fn total(&self, returned: usize) -> f64 {
        let added = self.hundredths.load(Ordering::Relaxed) as f64 / 100.0;
        match self.examined.load(Ordering::Relaxed) {
            0 => added,
            plus_one => added + query(plus_one as usize - 1, returned),
        }
    }
}

/// `ru` as `x-ms-request-charge` carries it: two decimals at most.
pub fn header(ru: f64) -> String {
    let text = format!("{ru:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_cost_what_azures_table_says_and_between_its_sizes_in_proportion() {
        for (kb, reading, writing) in TABLE {
            let bytes = (kb * 1024.0) as usize;
            assert!((read(bytes) - reading).abs() < 1e-9, "{kb} KB read");
            assert!((write(bytes) - writing).abs() < 1e-9, "{kb} KB write");
        }
        assert_eq!(read(10), 1.0, "under 1 KB as 1 KB");
        assert_eq!(write(0), 4.95);
        assert!(
            (read(3 * 1024) - 1.09).abs() < 1e-9,
            "halfway from 2 to 4 KB"
        );
        assert!(
            (write(4096 * 1024) - 2500.0).abs() < 1e-9,
            "past 2 MB in proportion"
        );
    }

    #[test]
    fn a_query_pays_to_run_for_what_it_reads_and_for_what_it_returns() {
        assert_eq!(query(0, 0), QUERY_BASE);
        let one = query(1, 1024);
        assert!((one - 3.33).abs() < 1e-9, "{one}");
        let scan = query(1000, 1024);
        assert!((scan - one - 29.97).abs() < 1e-9, "{scan}");
    }

    #[test]
    fn a_meter_adds_what_was_done_and_a_querys_reading_to_what_it_returned() {
        let meter = Meter::default();
        meter.add(4.95);
        meter.add(1.0);
        assert_eq!(
            header(meter.total(10_000)),
            "5.95",
            "no query: the body costs nothing"
        );
        let query = Meter::default();
        query.examined(0);
        assert_eq!(query.total(0), QUERY_BASE, "a query of nothing still ran");
        query.examined(1000);
        assert!((query.total(1024) - super::query(1000, 1024)).abs() < 1e-9);
    }

    #[test]
    fn the_header_carries_two_decimals_at_most() {
        assert_eq!(header(1.0), "1");
        assert_eq!(header(2.304), "2.3");
        assert_eq!(header(0.0), "0");
    }
}
