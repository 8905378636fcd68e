//! What `ifmatch serve` runs: its options, and the blob front with its data directory and the
//! tables beside its records, opened over the backends it is told (the local disk by default).

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ifmatch_azure::{Accounts, Env, SystemEnv};
use ifmatch_backends::local::{DataDir, INLINE_MAX, LocalObjects, LocalRecords, LocalTables};
use ifmatch_backends::{AnyObjects, AnyRecords, AnyTables, Choice, Sizes};
use ifmatch_blob::{DEFAULT_MAX_BODY, Front, Objects, Records};

use crate::arguments::seconds;
use crate::guards::accept::Limits;
use crate::observe::ObserveOptions;

/// The front as the server runs it: the local disk and the system clock.
pub type LocalFront = Front<LocalRecords, LocalObjects, SystemEnv>;

/// What `ifmatch serve` can be told: the command line's options of the server itself, each
/// declared here once (where it listens, its data and backends, and its accounts' sources are
/// the command's own).
#[derive(Debug, Clone, clap::Args)]
#[non_exhaustive]
pub struct Options {
    /// The largest blob accepted, in bytes; larger uploads answer 413.
    #[arg(long, env = "IFMATCH_MAX_BODY", default_value_t = DEFAULT_MAX_BODY)]
    pub max_body: u64,
    /// How many blob and container records the metadata cache holds (a record that keeps a
    /// small blob's bytes counts once more per KiB of them).
    #[arg(long, env = "IFMATCH_CACHE_CAPACITY", default_value_t = 100_000)]
    pub cache_capacity: u64,
    /// How many bytes of blob content (blobs up to 4 MiB) the byte cache holds.
    #[arg(long, env = "IFMATCH_CACHE_BYTES", default_value_t = 256 << 20)]
    pub cache_bytes: u64,
    /// What the server tolerates of its clients.
    #[command(flatten)]
    pub limits: Limits,
    /// Seconds an object no record names must be old before the sweep removes it (and a
    /// temporary file): far longer than any upload takes between staging its bytes and
    /// committing its record.
    #[arg(long, env = "IFMATCH_ORPHAN_AGE", default_value = "3600", value_parser = seconds)]
    pub orphan_age: Duration,
    /// Seconds between two sweeps of orphans.
    #[arg(long, env = "IFMATCH_SWEEP_EVERY", default_value = "600", value_parser = seconds)]
    pub sweep_every: Duration,
    /// The storage accounts served and their keys (the development account by default).
    #[arg(skip)]
    pub accounts: Accounts,
    /// Let requests without credentials read, write and delete anything. For development
    /// only: anyone who can reach the port can change everything.
    #[arg(long, env = "IFMATCH_ANONYMOUS")]
    pub anonymous: bool,
    /// What the Cosmos DB endpoint does with its containers' provisioned throughput: `report`
    /// (every answer says what it cost, in request units; nothing waits) or `enforce` (a
    /// container past its offer's RU/s is answered 429 with the time to wait, as Azure does,
    /// so an application's retry policy runs: docs/cosmos.md).
    #[arg(
        long,
        env = "IFMATCH_COSMOS_THROUGHPUT",
        value_enum,
        default_value = "report"
    )]
    pub cosmos_throughput: CosmosThroughput,
    /// Its metrics and access log.
    #[command(flatten)]
    pub observe: ObserveOptions,
    /// The origins copies may read sources from (`--copy-from`); none: copies read only the
    /// blobs this server serves.
    #[arg(skip)]
    pub copy_origins: Option<crate::copy_origins::HttpOrigins>,
}

/// What the Cosmos DB endpoint does with provisioned throughput.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum CosmosThroughput {
    /// Say what each request cost.
    #[default]
    Report,
    /// And answer 429 past a container's offer.
    Enforce,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            max_body: DEFAULT_MAX_BODY,
            cache_capacity: 100_000,
            cache_bytes: 256 << 20,
            limits: Limits::default(),
            orphan_age: Duration::from_secs(3600),
            sweep_every: Duration::from_secs(600),
            accounts: Accounts::default(),
            anonymous: false,
            cosmos_throughput: CosmosThroughput::Report,
            observe: ObserveOptions::default(),
            copy_origins: None,
        }
    }
}

impl Options {
    /// These options with another body limit.
    pub fn max_body(mut self, bytes: u64) -> Self {
        self.max_body = bytes;
        self
    }
}

/// What [`open`] opens and [`serve`] serves: the blob front, the data directory it keeps its
/// bytes in, and the tables beside its records, which the Table, Queue and Cosmos services
/// serve (each over its own listener; the blob front never reads them).
#[derive(Debug)]
pub struct Opened<R, O, E> {
    /// The blob front.
    pub front: Arc<Front<R, O, E>>,
    /// The data directory.
    pub dir: Arc<DataDir>,
    /// The tables the Table, Queue and Cosmos services keep their state in.
    pub tables: AnyTables,
    /// How old an orphan must be for the sweep [`serve`] runs before it accepts: zero for
    /// an embedded server (nothing can be in flight yet), [`Options::orphan_age`] for a shared
    /// directory (other instances are serving).
    pub first_sweep: Duration,
}

impl<R, O, E> Clone for Opened<R, O, E> {
    fn clone(&self) -> Self {
        Self {
            front: self.front.clone(),
            dir: self.dir.clone(),
            tables: self.tables.clone(),
            first_sweep: self.first_sweep,
        }
    }
}

/// Opens the data directory for one embedded server (creating it, locking it, checking its
/// mode, moving damaged records aside) and builds the front over it; [`serve`] sweeps what a
/// crash left before it accepts.
pub fn open(
    data: impl Into<PathBuf>,
    options: Options,
) -> io::Result<Opened<LocalRecords, LocalObjects, SystemEnv>> {
    open_with_env(data, options, SystemEnv)
}

/// [`open`], with another clock and source of ids (tests move the clock instead of sleeping).
pub fn open_with_env<E: Env>(
    data: impl Into<PathBuf>,
    options: Options,
    env: E,
) -> io::Result<Opened<LocalRecords, LocalObjects, E>> {
    let dir = DataDir::open(data)?;
    let records = LocalRecords::new(dir.clone(), options.cache_capacity, INLINE_MAX)?;
    let objects = LocalObjects::new(dir.clone(), options.cache_bytes);
    let path = dir.root().join("tables.redb");
    let tables = LocalTables::open(&path)
        .map_err(|e| io::Error::other(format!("opening {}: {e}", path.display())))?;
    let tables = AnyTables::Local(tables);
    Ok(blob_front(
        records,
        objects,
        tables,
        env,
        dir,
        &options,
        Duration::ZERO,
    ))
}

/// The front over the backends `choice` names (see [`Choice`]): the embedded default, or
/// records in Redis, bytes in an object store, or both. Orphans are swept at once only when
/// nothing else shares the objects.
pub async fn open_backends(
    choice: &Choice,
    options: Options,
) -> io::Result<Opened<AnyRecords, AnyObjects, SystemEnv>> {
    let sizes = Sizes {
        records_cache: options.cache_capacity,
        bytes_cache: options.cache_bytes,
        orphan_age: options.orphan_age,
    };
    let opened = choice.open(&sizes).await?;
    let first_sweep = if opened.shared {
        options.orphan_age
    } else {
        Duration::ZERO
    };
    Ok(blob_front(
        opened.records,
        opened.objects,
        opened.tables,
        SystemEnv,
        opened.dir,
        &options,
        first_sweep,
    ))
}

fn blob_front<R: Records, O: Objects, E: Env>(
    records: R,
    objects: O,
    tables: AnyTables,
    env: E,
    dir: Arc<DataDir>,
    options: &Options,
    first_sweep: Duration,
) -> Opened<R, O, E> {
    let mut front = Front::new(records, objects, env)
        .with_max_body(options.max_body)
        .with_accounts(&options.accounts)
        .with_anonymous_access(options.anonymous);
    if let Some(origins) = &options.copy_origins {
        // Copy Blob from another server then finishes after its answer (see `serve`).
        front = front
            .with_copy_origins(origins.clone())
            .with_background_copies();
    }
    Opened {
        front: Arc::new(front),
        dir,
        tables,
        first_sweep,
    }
}
