//! The names `wrangler.toml` binds the Worker's storage under.

/// The R2 bucket binding that holds blob bytes.
pub const BUCKET: &str = "BLOBS";
/// The Durable Object namespace binding that holds records.
pub const RECORDS: &str = "RECORDS";
/// The Durable Object namespace binding that holds tables.
pub const TABLES: &str = "TABLES";
