//! The Queue service on a listener of its own (`127.0.0.1:10001` by default, as the
//! emulators lay out their ports), answered by [`ifmatch_queue::Endpoint`], which holds every
//! rule (its body read whole first: `ifmatch_azure::answer_whole`), over the same tables as the
//! Table service.

use ifmatch_azure::SystemEnv;
use ifmatch_backends::AnyTables;

/// The Queue service's endpoint as the server runs it.
pub type QueueEndpoint = ifmatch_queue::Endpoint<AnyTables, SystemEnv>;
