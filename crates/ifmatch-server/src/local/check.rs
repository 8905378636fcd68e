//! `ifmatch check`: every record of an embedded data directory against its object, the `fsck`
//! of the blob front.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Read};
use std::path::Path;

use ifmatch_blob::Record;
use ifmatch_core::EtagHasher;

use super::dir::{BlobFile, DataDir, Mode, read_json};

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
        match read_json::<Record>(&record) {
            Ok(Some(_)) => report.containers += 1,
            Ok(None) => report.damage.push(format!("{}: missing", record.display())),
            Err(e) => report.damage.push(e.to_string()),
        }
        let Ok(blobs) = fs::read_dir(container.join("blobs")) else {
            continue;
        };
        for entry in blobs {
            let path = entry?.path();
            let file = match read_json::<BlobFile>(&path) {
                Ok(Some(file)) => file,
                Ok(None) => continue,
                Err(e) => {
                    report.damage.push(e.to_string());
                    continue;
                }
            };
            let bytes_tag = file.record.bytes_tag().clone();
            let Some(content) = file.record.content else {
                report
                    .damage
                    .push(format!("{}: a blob record without content", path.display()));
                continue;
            };
            named.insert(content.object.clone());
            let object = dir.objects_dir().join(&content.object);
            let what = format!(
                "blob {:?} (record {}, object {})",
                file.name,
                path.display(),
                object.display()
            );
            match hash_file(&object) {
                Err(e) => report.damage.push(format!("{what}: {e}")),
                Ok((len, _)) if len != content.len => report.damage.push(format!(
                    "{what}: the object holds {len} bytes, the record says {}",
                    content.len
                )),
                Ok((_, etag)) if etag != bytes_tag => report.damage.push(format!(
                    "{what}: the object hashes to {etag}, the record says {bytes_tag}"
                )),
                Ok((len, _)) => {
                    report.blobs += 1;
                    report.bytes += len;
                }
            }
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

fn hash_file(path: &Path) -> io::Result<(u64, ifmatch_core::EntityTag)> {
    let mut file = fs::File::open(path)?;
    let mut hasher = EtagHasher::new();
    let mut buf = vec![0; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok((hasher.len(), hasher.finish()))
}
