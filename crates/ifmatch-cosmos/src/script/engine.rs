//! One JavaScript engine (boa) for one script's run, held to its bounds: the "clock cycles" of
//! boa's interpreter (polled every [`SLICE`] of them), the memory the host's meter says the
//! run took, and boa's own recursion and stack limits. Past a bound the run stops where it is
//! and the engine is dropped; nothing it asked for is written (the caller commits only a run
//! that ended).
//!
//! Everything crosses as JSON text: what the host gives a script is parsed by the script's
//! `JSON.parse`, what a script gives back is its `JSON.stringify`, each step evaluated under the
//! same bounds as the script (a `toJSON` or `toString` of the script's own is its code too).

use std::future::Future;
use std::pin::pin;
use std::sync::OnceLock;
use std::task::{Context as Poller, Poll, Waker};

use boa_engine::{Context, JsValue, Script, Source, js_string};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// The cycles between two looks at the run's bounds: every few instructions, so that a
/// string that doubles in a loop is seen within one doubling of the memory bound.
const SLICE: u32 = 4;

/// The longest a run may take, whatever its cycles (Azure gives a script five seconds): what
/// bounds a run on a machine much slower than its cycles assume.
#[cfg(not(target_arch = "wasm32"))]
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// The loop iterations one call of a function may make (boa's limit). The cycles bound
/// every step of a run but for the code a built-in calls back (a `forEach`'s function, a
/// sort's comparison), which boa runs to its end at once: this bounds that code's loops.
const LOOP_ITERATIONS: u64 = 5_000_000;

/// Nested calls a script may make (boa's recursion limit).
const RECURSION: usize = 400;

/// Why a run stopped before it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Stop {
    /// The script threw: what it threw, as text, and its `number` when it has one (an error a
    /// collection operation gave it, thrown on).
    Threw(String, Option<f64>),
    /// Its cycles ran out (Cosmos's script timeout).
    Time,
    /// It took more memory than a script may.
    Memory,
    /// The script is not JavaScript this engine reads, or not a function.
    Invalid(String),
    /// The process its engine ran in ended in the middle of a step (what ends it is most
    /// often the script: a structure nested deeper than the engine's native stack holds).
    Ended(String),
    /// As many runs as may be are in flight.
    Busy(String),
}

/// What a run may take.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Bounds {
    /// Interpreter cycles, over every step of the run.
    pub(crate) cycles: u64,
    /// Bytes the run may hold beyond what it held at its start.
    pub(crate) memory: usize,
}

static MEASURE: OnceLock<fn() -> usize> = OnceLock::new();

/// Tells the engine how to measure the memory a run takes: a function of the bytes the
/// calling thread holds (the native server's allocator counts them). Without it, a run's
/// memory is bounded only where the host bounds it (a Worker measures its linear memory).
pub fn measure_memory_with(measure: fn() -> usize) {
    let _ = MEASURE.set(measure);
}

fn memory() -> usize {
    #[cfg(target_arch = "wasm32")]
    {
        core::arch::wasm32::memory_size::<0>() * 65_536
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        MEASURE.get().map_or(0, |measure| measure())
    }
}

/// A boa context with the server API (`server.js`) and what is left of the run's bounds.
pub(crate) struct Engine {
    context: Context,
    bounds: Bounds,
    spent: u64,
    /// The memory its steps took, each step's growth added (what a step frees of an earlier
    /// one's is not taken off: a bound on what it may hold).
    grown: usize,
    began: Began,
}

/// When a run began (on a Worker, nothing: its isolate bounds its own time).
#[cfg(not(target_arch = "wasm32"))]
type Began = std::time::Instant;
#[cfg(target_arch = "wasm32")]
type Began = ();

/// Whether a run that has `spent` cycles since `began` is past [`DEADLINE`] (looked at every
/// 1,024 slices, on the native server).
fn late(spent: u64, began: Began) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    if spent.is_multiple_of(1024 * u64::from(SLICE)) {
        return began.elapsed() > DEADLINE;
    }
    let _ = (spent, began);
    false
}

impl Engine {
    /// A fresh engine with the server API loaded.
    pub(crate) fn new(bounds: Bounds) -> Result<Self, Stop> {
        let mut context = Context::default();
        context.runtime_limits_mut().set_recursion_limit(RECURSION);
        context
            .runtime_limits_mut()
            .set_loop_iteration_limit(LOOP_ITERATIONS);
        let mut engine = Self {
            context,
            bounds,
            spent: 0,
            grown: 0,
            #[cfg(not(target_arch = "wasm32"))]
            began: std::time::Instant::now(),
            #[cfg(target_arch = "wasm32")]
            began: (),
        };
        engine.run(include_str!("server.js"))?;
        Ok(engine)
    }

    /// The engine for a run of its own within `bounds`, as though it were new: one made
    /// ahead of its run (with the server API loaded, and no script's code run in it).
    pub(crate) fn rebound(&mut self, bounds: Bounds) {
        self.bounds = bounds;
        self.spent = 0;
        self.grown = 0;
        #[cfg(not(target_arch = "wasm32"))]
        {
            self.began = std::time::Instant::now();
        }
    }

    /// Evaluates `code` within the run's bounds: its value.
    pub(crate) fn run(&mut self, code: &str) -> Result<JsValue, Stop> {
        let script = Script::parse(Source::from_bytes(code), None, &mut self.context)
            .map_err(|error| Stop::Invalid(error.to_string()))?;
        let start = memory();
        let outcome = {
            let mut evaluation = pin!(script.evaluate_async_with_budget(&mut self.context, SLICE));
            let mut poller = Poller::from_waker(Waker::noop());
            loop {
                match evaluation.as_mut().poll(&mut poller) {
                    Poll::Ready(outcome) => break outcome,
                    Poll::Pending => {
                        self.spent += u64::from(SLICE);
                        if self.spent > self.bounds.cycles || late(self.spent, self.began) {
                            return Err(Stop::Time);
                        }
                        if self.grown + memory().saturating_sub(start) > self.bounds.memory {
                            return Err(Stop::Memory);
                        }
                    }
                }
            }
        };
        self.grown += memory().saturating_sub(start);
        match outcome {
            Ok(value) => Ok(value),
            Err(error) => Err(self.thrown(error)),
        }
    }

    /// Evaluates `code`, whose value is a JSON text (a script's `JSON.stringify`): that JSON
    /// (`None` for `undefined`).
    pub(crate) fn json(&mut self, code: &str) -> Result<Option<Json>, Stop> {
        let value = self.run(code)?;
        let Some(text) = value.as_string() else {
            return Ok(None);
        };
        serde_json::from_str(&text.to_std_string_lossy())
            .map(Some)
            .map_err(|e| Stop::Invalid(format!("A script's value is not JSON: {e}")))
    }

    /// What a thrown value says, read by script code within the run's bounds.
    fn thrown(&mut self, error: boa_engine::JsError) -> Stop {
        let Ok(value) = error.clone().into_opaque(&mut self.context) else {
            // Not catchable: one of boa's own limits (loop iterations, recursion, stack).
            return Stop::Time;
        };
        let global = self.context.global_object();
        let set = global.set(js_string!("__thrown"), value, false, &mut self.context);
        if set.is_err() {
            return Stop::Threw("An exception was thrown.".into(), None);
        }
        let described = self.json(
            "(function (e) { try { return JSON.stringify({ text: String(e), \
             number: (e !== null && typeof e === 'object' && typeof e.number === 'number') ? e.number : null }); } \
             catch (x) { return JSON.stringify({ text: 'An exception was thrown.', number: null }); } })(__thrown)",
        );
        match described {
            Ok(Some(described)) => Stop::Threw(
                described["text"].as_str().unwrap_or_default().to_owned(),
                described["number"].as_f64(),
            ),
            Ok(None) => Stop::Threw("An exception was thrown.".into(), None),
            Err(stop) => stop,
        }
    }
}

/// `json` as a JavaScript string literal holding its text (JSON's strings are JavaScript's).
pub(crate) fn literal(json: &Json) -> String {
    serde_json::to_string(&json.to_string()).unwrap_or_else(|_| "\"null\"".into())
}
