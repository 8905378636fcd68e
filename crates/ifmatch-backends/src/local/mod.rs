//! The embedded default: records and objects on the local disk, under one data directory.
//!
//! ```text
//! DATA/.lock                                  held while an embedded server uses DATA
//! DATA/mode                                   `embedded` or `shared`: how DATA is used
//! DATA/containers/{container}/container.json  the container's record
//! DATA/containers/{container}/blobs/{h}.json  a blob's record; h = hex SHA-256 of its name
//!                                             (a blob of up to 4 KiB: its bytes too)
//! DATA/containers/{container}/staged/{h}-{e}  the blocks staged for a blob under epoch e
//!                                             (hex), in entries of 512 bytes ([`staged_file`])
//! DATA/objects/{id}                           blob bytes, immutable, named by a random id
//! DATA/journal                               record commits not yet checkpointed ([`journal`])
//! DATA/tables.redb                            the Table front's tables and entities ([`tables`])
//! DATA/tmp/                                   files being written
//! DATA/damaged/                               records that did not parse, moved aside
//! ```
//!
//! A record file holds the record's JSON in one of two checksummed slots ([`record_file`]; the
//! `.json` names are those of the files before the slots, which are still read). A record's
//! commit is an entry of the journal, synced with the commits that arrive with it, then
//! applied to its file unsynced: the slot that does not hold the current copy, written in
//! place, or a new file renamed into place; a checkpoint syncs the files and empties the
//! journal, and a start replays it. An object is written whole to `tmp/`, fsynced, renamed
//! into place and its directory fsynced. A crash or a full disk leaves the old record or the
//! new one, never a torn one (the journal holds every acknowledged commit since the last
//! checkpoint; a torn slot fails its checksum), and a write that failed answers an error. A blob's record holds its ETag and names
//! its object, which is on disk before the record names it, so after any crash a blob's ETag
//! is the SHA-256 of the bytes its record names. A small blob's record holds its bytes as well
//! ([`INLINE_MAX`]): ETag and bytes in one slot, written in one piece, and one fsync for an
//! overwrite where an object costs two more.
//!
//! File names never come from user input: containers are validated `[a-z0-9-]` names and blobs
//! are named by a hash, so no request can reach outside the data directory.
//!
//! We write files by hand rather than through `object_store`'s local store because durability
//! needs an fsync of the file and of its directory before a write is acknowledged, and the
//! compare-and-swap needs a lock held across read, compare and rename.
//!
//! - [`dir`]: the directory, its lock and mode;
//! - [`files`]: temporary files and directory syncs, which every part uses;
//! - [`record_file`]: a record's file, two slots updated in turn;
//! - [`journal`]: the records' commits, appended and synced in groups;
//! - [`records`]: the records, with a compare-and-swap per key;
//! - [`staged_file`]: a blob's staged blocks, appended a block at a time;
//! - [`objects`]: the blob bytes, written and read back checked;
//! - [`check`]: `ifmatch check`, every record against its object;
//! - [`tables`]: the Table front's entities, in redb.

mod blocking;
pub mod check;
pub mod dir;
mod files;
mod journal;
mod objects;
mod reader;
pub mod record_file;
mod records;
pub mod staged_file;
mod tables;

pub use dir::{DataDir, Mode};
pub use objects::LocalObjects;
pub use reader::ObjectReader;
pub use records::{INLINE_MAX, LocalRecords};
pub use tables::LocalTables;
