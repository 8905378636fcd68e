//! The steps of a procedure's or trigger's run, as the host and the engine pass them: a
//! call (start, deliver an outcome, finish) and what it gave (operations queued, the outcome).

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// A run to start: the script's source (one function), its arguments, and what its
/// `getContext()` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Job {
    pub(crate) source: String,
    pub(crate) arguments: Vec<Json>,
    /// The collection's link.
    pub(crate) link: String,
    /// A trigger's request body (the document), or a post-trigger's response body.
    pub(crate) request: Option<Json>,
    pub(crate) response: Option<Json>,
    /// A trigger's operation (`Create`, `Replace`, `Upsert`, `Delete`).
    pub(crate) operation: String,
}

/// A step of a run.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Call {
    /// Whether a source is one function (read, not called): as a script is checked when it is
    /// created or replaced.
    Check(String),
    Start(Job),
    /// An operation's outcome, for its callback: `{"result": ..., "options": ...}` or
    /// `{"error": {"number": status, "message": ...}}`.
    Deliver(u64, Json),
    /// The run ended: its response.
    Finish,
}

/// What a step gave: the operations it queued, or the run's outcome.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Called {
    Operations(Vec<Operation>),
    Finished(Outcome),
}

/// A collection operation a script asked for.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Operation {
    pub(crate) id: u64,
    /// `create`, `upsert`, `replace`, `read`, `delete` or `query`.
    pub(crate) kind: String,
    /// Its link, body, query and options.
    pub(crate) args: Json,
}

/// How a run ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Outcome {
    /// What `getResponse().setBody` left (null: nothing).
    pub(crate) response: Json,
    /// What a pre-trigger's `getRequest().setBody` left.
    pub(crate) request: Json,
    /// What `console.log` wrote.
    pub(crate) log: String,
}
