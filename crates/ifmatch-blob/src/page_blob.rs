//! What a page blob is: a size, a sequence number, and the runs of pages that hold bytes, each
//! a part of an object one Put Page wrote. A page no run covers reads as zeros and costs no
//! storage; a write cuts the runs it overlaps and lays its own over them, so the record names
//! exactly the bytes a read returns. The rules of the dialect's ranges (512-byte pages, 4 MiB a
//! write) live here, as the differences Get Page Ranges answers with `prevsnapshot`.

use std::ops::Range;

use ifmatch_core::EntityTag;

/// A page: the unit of every range of a page blob.
pub const PAGE: u64 = 512;
/// The most bytes one Put Page writes: 4 MiB, as in Azure.
pub const MAX_WRITE: u64 = 4 << 20;
/// The largest page blob: 8 TiB, as in Azure.
pub const MAX_SIZE: u64 = 8 << 40;
/// The most runs a page blob's record holds. Each write may cut a run in two, and every write
/// rewrites the record: the bound keeps that rewrite small. Azure sets none; a write that
/// would pass it is refused (see `front/page_blobs.rs`).
pub const MAX_RUNS: usize = 10_000;

/// What a page blob's record keeps of it besides its size (the content's length).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Paged {
    /// Names the blob from its Put Blob on (a new random one each time), so that a page write
    /// is told from a new blob of the name: a write keeps no version, as an append keeps none.
    #[serde(default)]
    pub epoch: u64,
    /// `x-ms-blob-sequence-number`.
    #[serde(default)]
    pub sequence: u64,
    /// The runs that hold bytes, in order, none overlapping another.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<Run>,
    /// The destination of incremental copies: what it copies, and where it stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incremental: Option<Incremental>,
}

/// What an incremental copy's destination keeps of its copies (Incremental Copy Blob): it
/// takes no other write, and each copy must be of a later snapshot of the same blob.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Incremental {
    /// The source blob's URL, without its query.
    pub source: String,
    /// The id of the source's snapshot last copied.
    pub snapshot: String,
    /// The snapshot of this blob the last copy made (`x-ms-copy-destination-snapshot`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_snapshot: Option<String>,
}

/// Pages that hold bytes: `len` bytes from `at` in the blob, read from `skip` in `object`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Run {
    /// The first byte of the blob it holds.
    pub at: u64,
    /// How many bytes it holds (whole pages).
    pub len: u64,
    /// The object its bytes are in.
    pub object: String,
    /// The object's length (what a read of it and the check need).
    pub object_len: u64,
    /// Where in the object its bytes start.
    pub skip: u64,
    /// The strong tag of the whole object's bytes: what the check compares, and with `skip`
    /// what tells two runs' bytes alike (a difference from a snapshot).
    pub sha256: EntityTag,
}

impl Run {
    fn end(&self) -> u64 {
        self.at + self.len
    }

    /// This run's part from `from` to `to` (both within it).
    fn part(&self, from: u64, to: u64) -> Run {
        Run {
            at: from,
            len: to - from,
            skip: self.skip + (from - self.at),
            ..self.clone()
        }
    }

    /// What the byte at `at` (within the run) is: its object's bytes and its place in them.
    fn identity(&self, at: u64) -> (&EntityTag, u64) {
        (&self.sha256, self.skip + (at - self.at))
    }
}

/// A range of a page blob as the dialect gives it (`bytes=START-END`, both inclusive) checked
/// for pages: `START` a multiple of 512, `END + 1` one too. `None` when it is not one.
pub fn page_range(start: u64, end_inclusive: u64) -> Option<Range<u64>> {
    let end = end_inclusive.checked_add(1)?;
    (start < end && start.is_multiple_of(PAGE) && end.is_multiple_of(PAGE)).then_some(start..end)
}

/// [`page_range`] of a `Range` or `x-ms-range` header's value (`bytes=START-END`).
pub fn parse_page_range(value: &str) -> Option<Range<u64>> {
    let (start, end) = value.strip_prefix("bytes=")?.split_once('-')?;
    page_range(start.trim().parse().ok()?, end.trim().parse().ok()?)
}

impl Paged {
    /// Lays `run` over `range` (its bytes), or clears `range` (`None`): the runs it overlaps
    /// keep only their parts outside it.
    pub fn write(&mut self, range: Range<u64>, run: Option<Run>) {
        let first = self.runs.partition_point(|r| r.end() <= range.start);
        let last = self.runs.partition_point(|r| r.at < range.end);
        let mut kept: Vec<Run> = Vec::with_capacity(3);
        if let Some(left) = self.runs.get(first).filter(|r| r.at < range.start) {
            kept.push(left.part(left.at, range.start));
        }
        kept.extend(run);
        if let Some(right) = last
            .checked_sub(1)
            .and_then(|i| self.runs.get(i))
            .filter(|r| r.end() > range.end && first < last)
        {
            kept.push(right.part(range.end, right.end()));
        }
        self.runs.splice(first..last.max(first), kept);
    }

    /// Drops every byte from `size` on (a resize that shrinks the blob).
    pub fn truncate(&mut self, size: u64) {
        self.write(size..u64::MAX, None);
    }

    /// The ranges of `within` that hold bytes, adjacent runs joined.
    pub fn ranges(&self, within: Range<u64>) -> Vec<Range<u64>> {
        let mut out: Vec<Range<u64>> = Vec::new();
        for run in &self.runs {
            let (start, end) = (run.at.max(within.start), run.end().min(within.end));
            if start >= end {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.end == start => last.end = end,
                _ => out.push(start..end),
            }
        }
        out
    }

    /// How the blob differs from `earlier` (a snapshot of it) within `within`: the ranges
    /// whose bytes were written since (`changed`), and those that held bytes then and hold
    /// none now (`cleared`). Bytes written again alike are no change.
    pub fn diff(&self, earlier: &Paged, within: Range<u64>) -> Difference {
        let mut cuts: Vec<u64> = [within.start, within.end]
            .into_iter()
            .chain(self.runs.iter().flat_map(|r| [r.at, r.end()]))
            .chain(earlier.runs.iter().flat_map(|r| [r.at, r.end()]))
            .filter(|at| within.contains(at) || *at == within.end)
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        // The run of `runs` (from the `next`th on) that covers `start`, if any: each run
        // covers a segment between two cuts whole, or none of it.
        fn covering<'a>(runs: &'a [Run], next: &mut usize, start: u64) -> Option<&'a Run> {
            while runs.get(*next).is_some_and(|r| r.end() <= start) {
                *next += 1;
            }
            runs.get(*next).filter(|r| r.at <= start)
        }
        let (mut now, mut then) = (0, 0);
        let mut out = Difference::default();
        for pair in cuts.windows(2) {
            let (start, end) = (pair[0], pair[1]);
            let current = covering(&self.runs, &mut now, start);
            let before = covering(&earlier.runs, &mut then, start);
            let into = match (current, before) {
                (Some(c), Some(b)) if c.identity(start) == b.identity(start) => continue,
                (Some(_), _) => &mut out.changed,
                (None, Some(_)) => &mut out.cleared,
                (None, None) => continue,
            };
            match into.last_mut() {
                Some(last) if last.end == start => last.end = end,
                _ => into.push(start..end),
            }
        }
        out
    }

    /// What a read of `range` of a blob of this content reads, in order: a part of a run's
    /// object (its name, length and the part), or zeros (an empty name) where no run is.
    pub fn pieces_in(&self, range: Range<u64>) -> Vec<(String, u64, Range<u64>)> {
        let mut out = Vec::new();
        let mut at = range.start;
        let first = self.runs.partition_point(|r| r.end() <= range.start);
        for run in &self.runs[first..] {
            if run.at >= range.end {
                break;
            }
            let start = run.at.max(range.start);
            if at < start {
                out.push((String::new(), 0, at..start));
            }
            let end = run.end().min(range.end);
            let from = run.skip + (start - run.at);
            out.push((
                run.object.clone(),
                run.object_len,
                from..from + (end - start),
            ));
            at = end;
        }
        if at < range.end {
            out.push((String::new(), 0, at..range.end));
        }
        out
    }

    /// Each object the runs name once, with its length, in the order first named.
    pub fn objects(&self) -> Vec<(&str, u64)> {
        let mut seen = std::collections::HashSet::new();
        self.runs
            .iter()
            .filter(|r| seen.insert(r.object.as_str()))
            .map(|r| (r.object.as_str(), r.object_len))
            .collect()
    }

    /// The page blob's tag once `change` follows the state whose tag is `before`: a new value
    /// for every write, clear and resize, at the cost of one small hash (as an append blob's).
    pub fn chain(before: &EntityTag, change: &str) -> EntityTag {
        let mut all = before.to_header_value().as_bytes().to_vec();
        all.push(0);
        all.extend_from_slice(change.as_bytes());
        ifmatch_core::strong_etag(&all)
    }
}

/// What Get Page Ranges answers with `prevsnapshot`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Difference {
    /// Written since.
    pub changed: Vec<Range<u64>>,
    /// Cleared since.
    pub cleared: Vec<Range<u64>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(at: u64, len: u64, object: &str) -> Run {
        Run {
            at,
            len,
            object: object.to_owned(),
            object_len: len,
            skip: 0,
            sha256: ifmatch_core::strong_etag(object.as_bytes()),
        }
    }

    #[test]
    fn a_write_cuts_the_runs_it_overlaps() {
        let mut paged = Paged::default();
        paged.write(0..2048, Some(run(0, 2048, "a")));
        paged.write(512..1024, Some(run(512, 512, "b")));
        assert_eq!(paged.runs.len(), 3);
        assert_eq!(
            paged.pieces_in(0..2048),
            vec![
                ("a".to_owned(), 2048, 0..512),
                ("b".to_owned(), 512, 0..512),
                ("a".to_owned(), 2048, 1024..2048),
            ]
        );
        // One write over all of them leaves only itself.
        paged.write(0..4096, Some(run(0, 4096, "c")));
        assert_eq!(paged.runs, vec![run(0, 4096, "c")]);
        // A clear in the middle leaves zeros there.
        paged.write(1024..1536, None);
        assert_eq!(paged.ranges(0..8192), vec![0..1024, 1536..4096]);
        assert_eq!(
            paged.pieces_in(512..2048)[1],
            (String::new(), 0, 1024..1536),
            "a cleared page reads as zeros"
        );
        paged.truncate(1024);
        assert_eq!(paged.ranges(0..8192), vec![0..1024]);
        assert_eq!(paged.objects(), vec![("c", 4096)]);
    }

    #[test]
    fn a_write_between_runs_touches_neither() {
        let mut paged = Paged::default();
        paged.write(0..512, Some(run(0, 512, "a")));
        paged.write(1024..1536, Some(run(1024, 512, "b")));
        paged.write(512..1024, Some(run(512, 512, "c")));
        assert_eq!(paged.runs.len(), 3);
        assert_eq!(paged.ranges(0..4096), vec![0..1536]);
        paged.write(2048..2560, None);
        assert_eq!(paged.runs.len(), 3);
    }

    #[test]
    fn the_difference_names_what_was_written_and_cleared() {
        let mut earlier = Paged::default();
        earlier.write(0..2048, Some(run(0, 2048, "a")));
        let mut now = earlier.clone();
        now.write(512..1024, Some(run(512, 512, "b")));
        now.write(1536..2048, None);
        now.write(4096..4608, Some(run(4096, 512, "c")));
        let diff = now.diff(&earlier, 0..8192);
        assert_eq!(diff.changed, vec![512..1024, 4096..4608]);
        assert_eq!(diff.cleared, vec![1536..2048]);
        assert_eq!(now.diff(&now, 0..8192), Difference::default());
        // Within a range only.
        assert_eq!(now.diff(&earlier, 0..768).changed, vec![512..768]);
    }

    #[test]
    fn ranges_are_whole_pages() {
        assert_eq!(page_range(0, 511), Some(0..512));
        assert_eq!(page_range(512, 1023), Some(512..1024));
        assert_eq!(page_range(1, 512), None);
        assert_eq!(page_range(0, 512), None);
        assert_eq!(page_range(512, 511), None);
        assert_eq!(page_range(0, u64::MAX), None);
        assert_eq!(parse_page_range("bytes=512-1023"), Some(512..1024));
        assert_eq!(parse_page_range("bytes=512-"), None);
        assert_eq!(parse_page_range("512-1023"), None);
    }
}
