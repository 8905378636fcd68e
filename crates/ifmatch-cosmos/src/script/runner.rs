//! Where a run's engine lives: in this process (a thread of the native server's, or a Worker's
//! isolate), or, once a server names them ([`run_engines_in`]), in a process of its own that
//! the engine's steps reach as JSON lines. boa follows some of a script's structures by native
//! recursion with no bound of its own (an array nested thousands deep, made into a string): a
//! script can overflow its thread's stack, which aborts the process it runs in. In a process of
//! its own that ends its run (400) and nothing else.

use std::sync::OnceLock;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::engine::{Bounds, Engine, Stop};
use super::step::{Call, Called};
use crate::document::{MAX_NESTING, nesting};

/// The processes engines run in: a server's, named once at its start.
pub trait Engines: Send + Sync {
    /// A process for one run at a time: an idle one or a new one.
    fn host(&self) -> std::io::Result<Box<dyn Host>>;
}

/// An engine's process, held by one run.
pub trait Host: Send {
    /// Sends `line` (one JSON text) and gives back the process's one-line answer; an error
    /// when the process ended without one.
    fn exchange(&mut self, line: &str) -> std::io::Result<String>;
}

static ENGINES: OnceLock<Box<dyn Engines>> = OnceLock::new();

/// Runs every later run's engine in a process of `engines` (which serve [`serve_steps`]);
/// without it, engines run in this process. The first call holds.
pub fn run_engines_in(engines: impl Engines + 'static) {
    let _ = ENGINES.set(Box::new(engines));
}

/// What an engine is asked, on the wire.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Ask {
    /// A fresh engine within these bounds, in place of the one before.
    Open(Bounds),
    Step(Call),
    /// User-defined functions, each name with its source (`udf.rs`).
    Define(Vec<(String, String)>),
    /// A user-defined function called with these arguments.
    Apply(String, Vec<Json>),
    /// The run is over: its engine is dropped.
    Close,
}

/// What an engine answers.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Answer {
    Done,
    Called(Called),
    Value(Json),
    /// A function's value that is `undefined` (unlike `null`).
    Undefined,
}

/// What asks an engine, wherever it lives.
pub(crate) trait Asking {
    fn ask(&mut self, ask: Ask) -> Result<Answer, Stop>;

    /// One step of a procedure's or trigger's run.
    fn call(&mut self, call: Call) -> Result<Called, Stop> {
        match self.ask(Ask::Step(call))? {
            Answer::Called(called) => Ok(called),
            _ => Err(out_of_turn()),
        }
    }

    /// Defines user-defined functions.
    fn define(&mut self, functions: Vec<(String, String)>) -> Result<(), Stop> {
        self.ask(Ask::Define(functions)).map(drop)
    }

    /// A user-defined function's value (`None`: undefined).
    fn apply(&mut self, name: &str, arguments: Vec<Json>) -> Result<Option<Json>, Stop> {
        match self.ask(Ask::Apply(name.to_owned(), arguments))? {
            Answer::Value(value) => Ok(Some(value)),
            Answer::Undefined => Ok(None),
            _ => Err(out_of_turn()),
        }
    }
}

/// A run's engine, where it lives.
pub(crate) enum Runner {
    Here(Box<Engine>),
    There(Remote),
}

impl Runner {
    /// A fresh engine within `bounds`.
    pub(crate) fn open(bounds: Bounds) -> Result<Self, Stop> {
        match elsewhere() {
            true => Remote::open(bounds).map(Self::There),
            false => Engine::new(bounds).map(|engine| Self::Here(Box::new(engine))),
        }
    }
}

/// Whether engines run in processes of their own.
pub(crate) fn elsewhere() -> bool {
    ENGINES.get().is_some()
}

impl Asking for Runner {
    fn ask(&mut self, ask: Ask) -> Result<Answer, Stop> {
        match self {
            Self::Here(engine) => engine.answer(ask),
            Self::There(remote) => remote.ask(ask),
        }
    }
}

/// An engine in a process of its own, held by one run: the process goes back to the server's
/// idle ones when dropped (unless it ended).
pub(crate) struct Remote(Box<dyn Host>);

impl Remote {
    /// A fresh engine within `bounds` in one of the server's processes ([`elsewhere`]).
    pub(crate) fn open(bounds: Bounds) -> Result<Self, Stop> {
        let engines = (ENGINES.get())
            .ok_or_else(|| Stop::Ended("No process was named for scripts' engines.".into()))?;
        // An idle process may have ended since it was last used (killed, say): no script ran
        // in it, so the run is opened again in another.
        let mut tries = 2;
        loop {
            let host = (engines.host())
                .map_err(|e| Stop::Ended(format!("A script's engine could not start: {e}")))?;
            let mut remote = Self(host);
            match remote.ask(Ask::Open(bounds)) {
                Err(Stop::Ended(_)) if tries > 1 => tries -= 1,
                Err(stop) => return Err(stop),
                Ok(_) => return Ok(remote),
            }
        }
    }
}

impl Asking for Remote {
    fn ask(&mut self, ask: Ask) -> Result<Answer, Stop> {
        let line = serde_json::to_string(&ask).map_err(|e| Stop::Invalid(e.to_string()))?;
        let answer = self.0.exchange(&line).map_err(|e| {
            Stop::Ended(format!(
                "The script's engine stopped in the middle of a step ({e}): most often a \
                 structure nested deeper than the engine's native stack holds (arrays or \
                 objects nested thousands deep, made into a string, flattened or stored)."
            ))
        })?;
        read::<Result<Answer, Stop>>(&answer).map_err(Stop::Ended)?
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        // The engine goes with its run, and the process is left ready for the next.
        let _ = self.ask(Ask::Close);
    }
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Remote")
    }
}

fn out_of_turn() -> Stop {
    Stop::Ended("The script's engine answered out of turn.".into())
}

impl Engine {
    /// Answers `ask` (but `Open` and `Close`, which are the process's to answer).
    fn answer(&mut self, ask: Ask) -> Result<Answer, Stop> {
        match ask {
            Ask::Step(call) => self.call(call).map(Answer::Called),
            Ask::Define(functions) => self.define_functions(&functions).map(|()| Answer::Done),
            Ask::Apply(name, arguments) => Ok(match self.apply(&name, arguments)? {
                Some(value) => Answer::Value(value),
                None => Answer::Undefined,
            }),
            Ask::Open(_) | Ask::Close => Err(out_of_turn()),
        }
    }
}

/// Serves engines' steps, one run at a time, each ask a line of `input` and each answer a line
/// of `output`, until `input` ends: what a server's engine process runs. Its stack is the
/// calling thread's.
pub fn serve_steps(
    input: impl std::io::BufRead,
    mut output: impl std::io::Write,
) -> std::io::Result<()> {
    let closed = || Stop::Invalid("No run is open.".into());
    let mut engine: Result<Engine, Stop> = Err(closed());
    // An engine made while no run is open, for the next: a run's start does not wait for
    // the server API to load.
    let mut ready = Engine::new(super::BOUNDS).ok();
    for line in input.lines() {
        let answer = match read::<Ask>(&line?) {
            Err(e) => Err(Stop::Invalid(e)),
            Ok(Ask::Open(bounds)) => {
                // The run before's memory is freed before the new run's is measured.
                drop(std::mem::replace(&mut engine, Err(closed())));
                engine = match ready.take() {
                    Some(mut fresh) => {
                        fresh.rebound(bounds);
                        Ok(fresh)
                    }
                    None => Engine::new(bounds),
                };
                engine.as_ref().map(|_| Answer::Done).map_err(Clone::clone)
            }
            Ok(Ask::Close) => {
                engine = Err(closed());
                Ok(Answer::Done)
            }
            Ok(ask) => match &mut engine {
                Ok(engine) => engine.answer(ask),
                Err(stop) => Err(stop.clone()),
            },
        };
        // A run that stopped is over: its engine is not used again.
        if let Err(stop) = &answer {
            engine = Err(stop.clone());
        }
        serde_json::to_writer(&mut output, &answer)?;
        output.write_all(b"\n")?;
        output.flush()?;
        if engine.is_err() && ready.is_none() {
            ready = Engine::new(super::BOUNDS).ok();
        }
    }
    Ok(())
}

/// A line of the wire, its depth counted before it is read: what crosses is a run's JSON
/// (its engine reads and writes at most serde_json's 128 levels, an item at most
/// [`MAX_NESTING`]) in an envelope of a few levels, read without serde_json's own bound.
fn read<T: DeserializeOwned>(line: &str) -> Result<T, String> {
    let deepest = nesting(line.as_bytes());
    if deepest > MAX_NESTING + 16 {
        return Err(format!("A step nests {deepest} levels deep."));
    }
    let mut reader = serde_json::Deserializer::from_str(line);
    reader.disable_recursion_limit();
    T::deserialize(&mut reader)
        .and_then(|value| reader.end().map(|()| value))
        .map_err(|e| format!("A step is not understood: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn served(asks: &[Ask]) -> Vec<Result<Answer, Stop>> {
        let input: String = (asks.iter())
            .map(|ask| serde_json::to_string(ask).unwrap() + "\n")
            .collect();
        let mut output = Vec::new();
        serve_steps(input.as_bytes(), &mut output).unwrap();
        (String::from_utf8(output).unwrap().lines())
            .map(|line| read(line).unwrap())
            .collect()
    }

    #[test]
    fn a_process_answers_each_ask_with_a_line_and_drops_a_stopped_runs_engine() {
        let bounds = super::super::BOUNDS;
        let answers = served(&[
            Ask::Step(Call::Finish),
            Ask::Open(bounds),
            Ask::Define(vec![
                ("twice".into(), "function (x) { return 2 * x; }".into()),
                ("none".into(), "function () {}".into()),
            ]),
            Ask::Apply("twice".into(), vec![json!(21)]),
            Ask::Apply("twice".into(), vec![json!({"a": [1]})]),
            Ask::Apply("none".into(), Vec::new()),
            Ask::Define(vec![(
                "spin".into(),
                "function () { while (true) {} }".into(),
            )]),
            Ask::Apply("spin".into(), Vec::new()),
            Ask::Apply("twice".into(), vec![json!(1)]),
            Ask::Open(bounds),
            Ask::Apply("twice".into(), vec![json!(1)]),
            Ask::Close,
        ]);
        assert_eq!(answers.len(), 12, "a line for each ask");
        assert!(
            matches!(&answers[0], Err(Stop::Invalid(_))),
            "no run open yet"
        );
        assert!(matches!(answers[1], Ok(Answer::Done)));
        assert!(matches!(&answers[3], Ok(Answer::Value(v)) if *v == json!(42)));
        assert!(
            matches!(&answers[4], Ok(Answer::Value(Json::Null))),
            "NaN is null"
        );
        assert!(matches!(answers[5], Ok(Answer::Undefined)));
        assert_eq!(answers[7].as_ref().unwrap_err(), &Stop::Time);
        assert_eq!(
            answers[8].as_ref().unwrap_err(),
            &Stop::Time,
            "stopped for good"
        );
        assert!(
            matches!(&answers[10], Err(Stop::Threw(..))),
            "a fresh engine knows no function of the run before"
        );
        assert!(matches!(answers[11], Ok(Answer::Done)));
    }

    #[test]
    fn a_line_nested_deeper_than_a_run_may_give_is_refused_before_it_is_read() {
        let deep = "[".repeat(MAX_NESTING + 17) + &"]".repeat(MAX_NESTING + 17);
        let mut output = Vec::new();
        serve_steps(
            format!("{{\"Apply\":[\"f\",{deep}]}}\n").as_bytes(),
            &mut output,
        )
        .unwrap();
        let answer: Result<Answer, Stop> =
            read(std::str::from_utf8(&output).unwrap().trim()).unwrap();
        assert!(matches!(answer, Err(Stop::Invalid(e)) if e.contains("levels deep")));
    }
}
