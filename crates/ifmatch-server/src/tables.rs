//! The Table service on a listener of its own (`127.0.0.1:10002` by default, as the
//! emulators lay out their ports), answered by [`ifmatch_table::Endpoint`], which holds every
//! rule (its body read whole first: `ifmatch_azure::answer_whole`).

use ifmatch_azure::SystemEnv;
use ifmatch_backends::AnyTables;

/// The Table service's endpoint as the server runs it.
pub type TableEndpoint = ifmatch_table::Endpoint<AnyTables, SystemEnv>;
