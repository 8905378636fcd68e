//! Server-side JavaScript: stored procedures, triggers and user-defined functions, run by boa,
//! an engine written in Rust that builds for the native server and the Worker alike (the
//! Worker's own isolate forbids `eval`, so a script cannot be handed to it).
//!
//! A procedure or trigger runs as a conversation: the script queues collection operations
//! (`server.js`), the host performs them against the partition's transaction
//! (`front/transaction.rs`) and delivers each outcome to its callback, which may queue more,
//! until none is left; then its response (and a pre-trigger's request) is read. The engine is
//! `!Send`: on the native server each run has a thread of its own ([`Session`]), so that the
//! request's future stays `Send` and a script that spins holds no runtime thread; on a Worker
//! (one thread) it runs in place. User-defined functions are called by a query's evaluation,
//! which is synchronous: `udf.rs`.

mod engine;
mod runner;
mod session;
mod step;
pub(crate) mod udf;

use serde_json::{Value as Json, json};

pub use engine::measure_memory_with;
pub(crate) use engine::{Bounds, Stop};
pub use runner::{Engines, Host, run_engines_in, serve_steps};
pub use session::MAX_RUNS;
pub(crate) use session::Session;
pub(crate) use step::{Call, Called, Job, Operation, Outcome};

use crate::failure::{Code, Failure};
use engine::{Engine, literal};

/// The interpreter cycles a procedure or trigger run may spend: about a second of boa on
/// the machines this was measured on (Azure gives a script five seconds).
pub const CYCLES: u64 = 20_000_000;

/// The bytes a run may take beyond what it held at its start.
pub const MEMORY: usize = 64 << 20;

/// The collection operations one run may ask for; past them each is refused with `false`
/// (`isAccepted`), and the script ends with what it has done, as on Azure.
pub const OPERATIONS: usize = 1000;

/// The bounds of a procedure's or trigger's run.
pub(crate) const BOUNDS: Bounds = Bounds {
    cycles: CYCLES,
    memory: MEMORY,
};

impl Engine {
    /// One step of a run.
    pub(crate) fn call(&mut self, call: Call) -> Result<Called, Stop> {
        match call {
            Call::Check(source) => {
                self.define("__checked", &source)?;
                return Ok(Called::Operations(Vec::new()));
            }
            Call::Start(job) => {
                let setup = json!({
                    "self": job.link, "limit": OPERATIONS, "operation": job.operation,
                    "requestBody": job.request, "responseBody": job.response,
                });
                self.run(&format!("__ifmatch.setup({})", literal(&setup)))?;
                self.define("__main", &job.source)?;
                let arguments = literal(&Json::Array(job.arguments));
                self.run(&format!("__main(...JSON.parse({arguments}))"))?;
            }
            Call::Deliver(id, reply) => {
                self.run(&format!("__ifmatch.deliver({id}, {})", literal(&reply)))?;
            }
            Call::Finish => {
                let outcome = self.json("__ifmatch.outcome()")?.unwrap_or_default();
                return serde_json::from_value(outcome)
                    .map(Called::Finished)
                    .map_err(|e| Stop::Invalid(e.to_string()));
            }
        }
        let queued = self.json("__ifmatch.take()")?.unwrap_or_default();
        serde_json::from_value(queued)
            .map(Called::Operations)
            .map_err(|e| Stop::Invalid(e.to_string()))
    }
}

impl Engine {
    /// Defines the global `name` as the function `source` holds; refused when it holds
    /// anything else.
    pub(crate) fn define(&mut self, name: &str, source: &str) -> Result<(), Stop> {
        let source = source.trim().trim_end_matches(';');
        let kind = self.json(&format!(
            "var {name} = (\n{source}\n);\nJSON.stringify(typeof {name})"
        ))?;
        match kind == Some(Json::from("function")) {
            true => Ok(()),
            false => Err(Stop::Invalid("A script's body is one function.".into())),
        }
    }
}

/// Checks that `source` is one function of JavaScript, in a session of its own: 400 when it
/// is not.
pub(crate) async fn check(source: &str) -> Result<(), Failure> {
    let mut session = Session::open(BOUNDS)?;
    match session.call(Call::Check(source.to_owned())).await {
        Ok(_) => Ok(()),
        Err(Stop::Invalid(message)) => Err(Failure::new(
            Code::BadRequest,
            format!("The script is not one JavaScript function: {message}"),
        )),
        Err(stop) => Err(failure(stop)),
    }
}

/// Cosmos's answer to a run that stopped: what a script threw is 400 (or the status of the
/// collection operation's error it threw on), a run out of time 408, out of memory 413.
pub(crate) fn failure(stop: Stop) -> Failure {
    match stop {
        Stop::Threw(text, number) => {
            let code = code_of(number.map_or(400, |n| n as u16));
            Failure::new(
                code,
                format!("Encountered exception while executing function. Exception = {text}"),
            )
        }
        Stop::Time => Failure::new(
            Code::RequestTimeout,
            format!(
                "The script ran past its time ({CYCLES} interpreter cycles) and was stopped; \
                 nothing it wrote was kept. Return before the budget ends: stop asking for \
                 operations once one is not accepted, and let the caller continue."
            ),
        ),
        Stop::Memory => Failure::new(
            Code::RequestEntityTooLarge,
            format!(
                "The script took more than {} MB of memory and was stopped; nothing it wrote \
                 was kept.",
                MEMORY >> 20
            ),
        ),
        Stop::Invalid(message) => Failure::new(
            Code::BadRequest,
            format!("The script could not be run: {message}"),
        ),
        Stop::Busy(message) => Failure::new(Code::TooManyRequests, message),
        Stop::Ended(message) => Failure::new(
            Code::BadRequest,
            format!("{message} Nothing the script wrote was kept."),
        ),
    }
}

/// The code of a collection operation's error status, as a script's caller is answered.
pub(crate) fn code_of(status: u16) -> Code {
    match status {
        403 => Code::Forbidden,
        404 => Code::NotFound,
        409 => Code::Conflict,
        412 => Code::PreconditionFailed,
        413 => Code::RequestEntityTooLarge,
        429 => Code::TooManyRequests,
        _ => Code::BadRequest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(source: &str, arguments: Vec<Json>) -> Job {
        Job {
            source: source.into(),
            arguments,
            link: "dbs/d/colls/c".into(),
            request: None,
            response: None,
            operation: String::new(),
        }
    }

    fn started(source: &str) -> Result<Called, Stop> {
        let mut engine = Engine::new(BOUNDS)?;
        engine.call(Call::Start(job(source, Vec::new())))
    }

    #[test]
    fn a_run_queues_its_operations_and_its_callbacks_get_their_outcomes() {
        let mut engine = Engine::new(BOUNDS).unwrap();
        let source = "function f(name) { var c = getContext().getCollection(); \
            c.readDocument(c.getSelfLink() + '/docs/' + name, function (err, doc) { \
            getContext().getResponse().setBody(err ? err.number : doc.n); }); }";
        let Ok(Called::Operations(asked)) = engine.call(Call::Start(job(source, vec!["x".into()])))
        else {
            panic!("operations")
        };
        assert_eq!(asked.len(), 1);
        assert_eq!(
            (asked[0].kind.as_str(), &asked[0].args["link"]),
            ("read", &json!("dbs/d/colls/c/docs/x"))
        );
        let reply = json!({ "error": { "number": 404, "message": "absent" } });
        assert!(
            matches!(engine.call(Call::Deliver(asked[0].id, reply)), Ok(Called::Operations(more)) if more.is_empty())
        );
        let Ok(Called::Finished(outcome)) = engine.call(Call::Finish) else {
            panic!("finished")
        };
        assert_eq!(outcome.response, json!(404));
    }

    #[test]
    fn past_its_operations_a_run_is_told_they_are_not_accepted() {
        let source = "function f() { var c = getContext().getCollection(); var n = 0; \
            while (c.createDocument(c.getSelfLink(), { id: 'd' + n })) { n += 1; } \
            getContext().getResponse().setBody(n); }";
        let Ok(Called::Operations(asked)) = started(source) else {
            panic!("operations")
        };
        assert_eq!(asked.len(), OPERATIONS, "one past the bound is refused");
    }

    #[test]
    fn a_spin_is_stopped_by_cycles_and_one_in_a_callback_by_the_loop_bound() {
        assert_eq!(
            started("function f() { while (true) {} }").unwrap_err(),
            Stop::Time
        );
        let callback = "function f() { [1].forEach(function () { while (true) {} }); }";
        assert_eq!(started(callback).unwrap_err(), Stop::Time);
        let recursion = "function f() { function g() { return g(); } g(); }";
        assert_eq!(started(recursion).unwrap_err(), Stop::Time);
    }

    #[test]
    fn what_a_script_throws_is_its_answer_and_a_body_that_is_no_function_is_refused() {
        let thrown =
            started("function f() { var e = new Error('taken'); e.number = 409; throw e; }");
        assert_eq!(
            thrown.unwrap_err(),
            Stop::Threw("Error: taken".into(), Some(409.0))
        );
        assert_eq!(
            failure(Stop::Threw("x".into(), Some(409.0))).code,
            Code::Conflict
        );
        // A toString of the script's own that spins is bounded too.
        let sly = "function f() { throw { toString: function () { while (true) {} } }; }";
        assert_eq!(started(sly).unwrap_err(), Stop::Time);
        assert!(matches!(started("3"), Err(Stop::Invalid(_))));
        assert!(matches!(started("function ("), Err(Stop::Invalid(_))));
    }
}
