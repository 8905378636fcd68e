//! User-defined functions in queries (`SELECT udf.tax(c.price) FROM c`): a query's evaluation
//! is synchronous, so each stretch of evaluation names its page's functions ([`with`]) and the
//! functions it calls run in the page's engine, made at the page's first call, its cycles and
//! memory counted over the whole page. Where engines run in processes of their own (the
//! native server), the page holds its process, which goes back when the page is dropped;
//! where they run in this one, an engine may not be held across the page's awaits (its future
//! stays `Send`), and one is kept per thread, for that page (a few pages' at most). A function
//! that throws or runs past the bounds fails the query (400, or 408 past its time).

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value as Json;

use super::MEMORY;
use super::engine::{Bounds, Engine, Stop, literal};
use super::runner::{Asking, Remote, Runner, elsewhere};
use super::session::Place;
use crate::failure::Failure;

/// The cycles the user-defined functions of one query page may spend: a quarter of a
/// procedure's, since a query page holds its thread while it evaluates.
pub(crate) const CYCLES: u64 = super::CYCLES / 4;

/// The bounds of a page's engine.
const BOUNDS: Bounds = Bounds {
    cycles: CYCLES,
    memory: MEMORY,
};

/// The most pages whose engines one thread keeps.
const KEPT: usize = 4;

/// The user-defined functions a query calls, for one page: each name with its source.
#[derive(Debug, Clone)]
pub struct Functions {
    page: u64,
    sources: Arc<Vec<(String, String)>>,
    /// The page's engine in a process of its own, once called (with its place among the runs
    /// in flight), or why it stopped.
    remote: Arc<Mutex<Option<Result<Held, Stop>>>>,
}

/// A page's engine in a process of its own, and the page's place among the runs in flight.
type Held = (Remote, Place);

impl Functions {
    /// `sources` (name, JavaScript), for a page of its own.
    pub fn new(sources: Vec<(String, String)>) -> Self {
        static PAGES: AtomicU64 = AtomicU64::new(0);
        Self {
            page: PAGES.fetch_add(1, Ordering::Relaxed),
            sources: Arc::new(sources),
            remote: Arc::default(),
        }
    }

    /// Why the page's engine stopped, if it did.
    fn stopped(&self) -> Option<Stop> {
        let remote = self.remote.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(Err(stop)) = &*remote {
            return Some(stop.clone());
        }
        ENGINES.with_borrow(|engines| {
            (engines.iter())
                .find(|(page, _)| *page == self.page)
                .and_then(|(_, engine)| engine.as_ref().err().cloned())
        })
    }
}

thread_local! {
    /// The functions of the evaluation running on this thread, if it calls any.
    static CURRENT: RefCell<Option<Functions>> = const { RefCell::new(None) };
    /// Engines of recent pages in this process: each page's, or why its run stopped.
    static ENGINES: RefCell<Vec<(u64, Result<Runner, Stop>)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `evaluate` with `functions` callable by it: its result, or the failure of a function
/// it called.
pub(crate) fn with<R>(functions: &Functions, evaluate: impl FnOnce() -> R) -> Result<R, Failure> {
    CURRENT.set(Some(functions.clone()));
    let result = evaluate();
    CURRENT.set(None);
    match functions.stopped() {
        Some(stop) => Err(super::failure(stop)),
        None => Ok(result),
    }
}

/// `udf.name(arguments)` in the evaluation running on this thread: its value, `None` when
/// undefined (or when it failed: [`with`] then says why).
pub(crate) fn call(name: &str, arguments: &[Option<Json>]) -> Option<Json> {
    let functions = CURRENT.with_borrow(Clone::clone)?;
    let arguments: Vec<Json> = (arguments.iter())
        .map(|a| a.clone().unwrap_or(Json::Null))
        .collect();
    if !elsewhere() {
        return call_here(&functions, name, arguments);
    }
    let mut remote = functions
        .remote
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let (engine, _) = remote
        .get_or_insert_with(|| opened(&functions))
        .as_mut()
        .ok()?;
    match engine.apply(name, arguments) {
        Ok(value) => value,
        Err(stop) => {
            *remote = Some(Err(stop));
            None
        }
    }
}

/// A page's process with its functions defined, holding a place among the runs in flight.
fn opened(functions: &Functions) -> Result<Held, Stop> {
    let place = Place::take().map_err(|failure| Stop::Busy(failure.message))?;
    let mut engine = Remote::open(BOUNDS)?;
    engine.define(functions.sources.to_vec())?;
    Ok((engine, place))
}

/// [`call`] where engines run in this process.
fn call_here(functions: &Functions, name: &str, arguments: Vec<Json>) -> Option<Json> {
    ENGINES.with_borrow_mut(|engines| {
        let at = match engines.iter().position(|(page, _)| *page == functions.page) {
            Some(at) => at,
            None => {
                if engines.len() >= KEPT {
                    drop(engines.remove(0));
                }
                engines.push((functions.page, engine_of(functions)));
                engines.len() - 1
            }
        };
        let engine = engines[at].1.as_mut().ok()?;
        match engine.apply(name, arguments) {
            Ok(value) => value,
            Err(stop) => {
                engines[at].1 = Err(stop);
                None
            }
        }
    })
}

/// An engine with `functions` defined as `udf.name`.
fn engine_of(functions: &Functions) -> Result<Runner, Stop> {
    let mut engine = Runner::open(BOUNDS)?;
    engine.define(functions.sources.to_vec())?;
    Ok(engine)
}

impl Engine {
    /// Defines each of `functions` (name, source) as `udf.name`.
    pub(super) fn define_functions(&mut self, functions: &[(String, String)]) -> Result<(), Stop> {
        self.run("var udf = {};")?;
        for (name, source) in functions {
            self.define("__defined", source)?;
            let name = serde_json::to_string(name).unwrap_or_default();
            self.run(&format!("udf[{name}] = __defined;"))?;
        }
        Ok(())
    }

    /// `udf.name(arguments)`: its value, `None` when undefined.
    pub(super) fn apply(&mut self, name: &str, arguments: Vec<Json>) -> Result<Option<Json>, Stop> {
        let code = format!(
            "JSON.stringify(udf[{}](...JSON.parse({})))",
            serde_json::to_string(name).unwrap_or_default(),
            literal(&Json::Array(arguments))
        );
        self.json(&code)
    }
}
