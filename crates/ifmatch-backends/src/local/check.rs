//! `ifmatch check`: every record of an embedded data directory against its object (or the bytes
//! it keeps itself), the `fsck` of the blob front.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Read};
use std::path::Path;

use ifmatch_blob::Record;
use ifmatch_core::EtagHasher;

use super::dir::{BlobFile, DataDir, Mode, read_record};
use super::record_file;

/// What [`check`] found.
#[derive(Debug, Default)]
pub struct Report {
    /// Containers checked.
    pub containers: u64,
    /// Blobs whose object exists, has the record's length and hashes to its ETag.
    pub blobs: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Objects no record names (left by a crash; the server sweeps them). Not damage.
    pub orphans: u64,
    /// Every damage found, one line each, naming the files.
    pub damage: Vec<String>,
}

/// Verifies every record of the embedded data directory `root` against its object: the object
/// exists, has the length the record says and hashes to the record's ETag. Records that do
/// not parse, and records moved to `damaged/`, are damage too. Takes the directory's lock
/// (shared), so it refuses to run beside a server.
pub fn check(root: &Path) -> io::Result<Report> {
    let dir = DataDir::open_to_check(root)?;
    if dir.mode() == Mode::Shared {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is shared by instances whose records are in Redis; check verifies the data \
                 directory of an embedded server",
                root.display()
            ),
        ));
    }
    let mut report = Report::default();
    let mut named = HashSet::new();
    for container in fs::read_dir(dir.containers_dir())? {
        let container = container?.path();
        let record = container.join("container.json");
        fell_back(&record, &mut report);
        match read_record::<Record>(&record) {
            Ok(Some(_)) => report.containers += 1,
            Ok(None) => report.damage.push(format!("{}: missing", record.display())),
            Err(e) => report.damage.push(e.to_string()),
        }
        let Ok(blobs) = fs::read_dir(container.join("blobs")) else {
            continue;
        };
        for entry in blobs {
            let path = entry?.path();
            check_blob(&dir, &container, &path, &mut named, &mut report);
        }
    }
    for entry in fs::read_dir(dir.objects_dir())? {
        if !named.contains(entry?.file_name().to_string_lossy().as_ref()) {
            report.orphans += 1;
        }
    }
    if let Ok(damaged) = fs::read_dir(dir.root().join("damaged")) {
        for entry in damaged {
            report.damage.push(format!(
                "{}: a damaged record the server moved aside",
                entry?.path().display()
            ));
        }
    }
    Ok(report)
}

/// Checks the blob record at `path` of the container directory `container` against its
/// objects (those it names joined to `named`), into `report`.
fn check_blob(
    dir: &DataDir,
    container: &Path,
    path: &Path,
    named: &mut HashSet<String>,
    report: &mut Report,
) {
    fell_back(path, report);
    let file = match read_record::<BlobFile>(path) {
        Ok(Some((file, _))) => file,
        Ok(None) => return,
        Err(e) => {
            report.damage.push(e.to_string());
            return;
        }
    };
    named.extend(file.record.objects().map(str::to_owned));
    let what = format!("blob {:?} (record {})", file.name, path.display());
    // Staged blocks, each its own object with its own tag: those an earlier version
    // kept in the record, and those of the set it names.
    let mut staged = file.record.uncommitted.clone();
    let name = container.file_name().unwrap_or_default().to_string_lossy();
    let key = ifmatch_blob::Key::Blob(name.into_owned(), file.name.clone());
    let set = |epoch: u64, report: &mut Report| -> Vec<ifmatch_blob::Block> {
        let set = dir.staged_path(&key, epoch).expect("a blob's key");
        match fs::read(&set) {
            Ok(bytes) => super::staged_file::blocks(&bytes),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                report.damage.push(format!("{}: {e}", set.display()));
                Vec::new()
            }
        }
    };
    if let Some(staging) = file.record.staging {
        staged.extend(set(staging.epoch, report));
    }
    // An append blob's blocks are the entries of its append set its record leads to.
    let appended = file.record.content.as_ref().and_then(|c| c.append);
    let append_blocks = appended.map(|appended| {
        let entries = set(appended.epoch, report);
        named.extend(entries.iter().map(|b| b.object.clone()));
        appended.resolve(entries, file.record.bytes_tag())
    });
    named.extend(staged.iter().map(|b| b.object.clone()));
    for block in &staged {
        let pieces = [(block.object.as_str(), block.len)];
        if let Err(damage) = check_pieces(dir, &pieces, &block.sha256) {
            report
                .damage
                .push(format!("{what}, staged block {}: {damage}", block.id));
        }
    }
    let Some(content) = &file.record.content else {
        let stored = name_of(container);
        // A record of the front's own (a copy's job, a change's marker) or a deletion
        // the change feed has not published: no bytes, by design.
        let own = ifmatch_blob::copy_origin::holds_copy_jobs(&stored)
            || ifmatch_blob::change_feed::holds_markers(&stored)
            || ifmatch_blob::change_feed::is_unpublished_deletion(&file.record);
        if file.record.uncommitted.is_empty() && file.record.staging.is_none() && !own {
            report
                .damage
                .push(format!("{}: a blob record without content", path.display()));
        }
        return;
    };
    let tag = file.record.bytes_tag();
    let checked = match (&content.inline, append_blocks) {
        (Some(bytes), _) => check_inline(bytes, content.len, tag),
        // A page blob's tag chains its writes: each run's object is checked against
        // its own tag, once (the runs cut from one write share its object).
        (None, None) if content.pages.is_some() => {
            let mut seen = HashSet::new();
            (content.pages.iter().flat_map(|p| &p.runs))
                .filter(|run| seen.insert(run.object.as_str()))
                .try_for_each(|run| {
                    let piece = [(run.object.as_str(), run.object_len)];
                    check_pieces(dir, &piece, &run.sha256)
                })
        }
        (None, None) => check_pieces(dir, &content.pieces(), tag),
        (None, Some(None)) => {
            Err("its append set does not hold the blocks its record counts".to_owned())
        }
        // Each block its own tag, all of them the record's length.
        (None, Some(Some(blocks))) => blocks
            .iter()
            .try_for_each(|b| check_pieces(dir, &[(b.object.as_str(), b.len)], &b.sha256))
            .and_then(|()| {
                let len: u64 = blocks.iter().map(|b| b.len).sum();
                (len == content.len).then_some(()).ok_or_else(|| {
                    format!(
                        "its blocks hold {len} bytes, the record says {}",
                        content.len
                    )
                })
            }),
    };
    match checked {
        Err(damage) => report.damage.push(format!("{what}: {damage}")),
        Ok(()) => {
            report.blobs += 1;
            report.bytes += content.len;
        }
    }
}

/// Names the record file at `path` as damage if it is read from its older copy because the
/// newest fails its checksum ([`record_file::fell_back`]).
fn fell_back(path: &Path, report: &mut Report) {
    if let Ok(bytes) = fs::read(path)
        && let Some(why) = record_file::fell_back(&bytes)
    {
        report.damage.push(format!("{}: {why}", path.display()));
    }
}

/// Whether the bytes a record keeps itself are what it says: its length, the bytes of
/// `expected`.
fn check_inline(bytes: &[u8], len: u64, expected: &ifmatch_core::EntityTag) -> Result<(), String> {
    if bytes.len() as u64 != len {
        return Err(format!(
            "the record keeps {} bytes and says {len}",
            bytes.len()
        ));
    }
    let mut hasher = EtagHasher::new();
    hasher.update(bytes);
    tag_matches(hasher.finish(), expected)
}

/// Whether the objects `pieces` name, one after the other, hold what their record says: each
/// its length, all together the bytes of `expected`.
/// The stored name of the container whose directory is `path`.
fn name_of(path: &std::path::Path) -> String {
    path.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

fn check_pieces(
    dir: &DataDir,
    pieces: &[(&str, u64)],
    expected: &ifmatch_core::EntityTag,
) -> Result<(), String> {
    let mut hasher = EtagHasher::new();
    let mut buf = vec![0; 1 << 20];
    for (object, len) in pieces {
        let path = dir.objects_dir().join(object);
        let mut file =
            fs::File::open(&path).map_err(|e| format!("object {}: {e}", path.display()))?;
        let start = hasher.len();
        loop {
            let n = file
                .read(&mut buf)
                .map_err(|e| format!("object {}: {e}", path.display()))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        let held = hasher.len() - start;
        if held != *len {
            return Err(format!(
                "object {} holds {held} bytes, the record says {len}",
                path.display()
            ));
        }
    }
    tag_matches(hasher.finish(), expected)
}

/// Whether the bytes hashed to `etag` are those of `expected`.
fn tag_matches(
    etag: ifmatch_core::EntityTag,
    expected: &ifmatch_core::EntityTag,
) -> Result<(), String> {
    if etag != *expected {
        return Err(format!(
            "the bytes hash to {etag}, the record says {expected}"
        ));
    }
    Ok(())
}
