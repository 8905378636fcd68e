//! Where a run's steps are taken. On the native server: a thread of its own, spoken to over
//! channels, so that the request's future holds only the channels (it stays `Send`) and a
//! script that spins holds no thread of the async runtime; the thread holds the run's engine
//! (or its process: `runner.rs`) and ends when the session is dropped (the request answered
//! or gone) and its step ends. On a Worker: in place.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::engine::{Bounds, Stop};
use super::runner::{Asking, Runner};
use super::step::{Call, Called};
use crate::failure::{Code, Failure};

/// The runs of scripts in flight on this instance at once (each a thread on the native
/// server); past them a run is answered 429.
pub const MAX_RUNS: usize = 64;

/// Runs in flight on this instance.
static RUNS: AtomicUsize = AtomicUsize::new(0);

/// One run's place among [`MAX_RUNS`], given back when dropped.
#[derive(Debug)]
pub(crate) struct Place;

impl Place {
    pub(crate) fn take() -> Result<Self, Failure> {
        let taken = RUNS.fetch_add(1, Ordering::AcqRel);
        if taken >= MAX_RUNS {
            RUNS.fetch_sub(1, Ordering::AcqRel);
            return Err(Failure::new(
                Code::TooManyRequests,
                format!("{MAX_RUNS} scripts are running on this instance: retry shortly."),
            ));
        }
        Ok(Self)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        RUNS.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(not(target_arch = "wasm32"))]
type Step = (Call, futures_channel::oneshot::Sender<Result<Called, Stop>>);

/// A run's engine, where it lives.
pub(crate) struct Session {
    #[cfg(not(target_arch = "wasm32"))]
    steps: std::sync::mpsc::Sender<Step>,
    #[cfg(target_arch = "wasm32")]
    engine: Result<super::runner::Runner, Stop>,
    #[cfg(target_arch = "wasm32")]
    _place: Place,
}

impl Session {
    /// A session for one run within `bounds`; 429 when [`MAX_RUNS`] are in flight.
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn open(bounds: Bounds) -> Result<Self, Failure> {
        let place = Place::take()?;
        let (steps, taken) = std::sync::mpsc::channel::<Step>();
        std::thread::Builder::new()
            .name("ifmatch-script".into())
            .stack_size(16 << 20)
            .spawn(move || {
                let _place = place;
                let mut engine = Runner::open(bounds);
                while let Ok((call, answer)) = taken.recv() {
                    let called = match &mut engine {
                        Ok(engine) => engine.call(call),
                        Err(stop) => Err(stop.clone()),
                    };
                    // A run that stopped is over: its engine is not used again.
                    if let Err(stop) = &called {
                        engine = Err(stop.clone());
                    }
                    let _ = answer.send(called);
                }
            })
            .map_err(|e| {
                Failure::new(
                    Code::ServiceUnavailable,
                    format!("A script's thread could not start: {e}"),
                )
            })?;
        Ok(Self { steps })
    }

    /// One step of the run.
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) async fn call(&mut self, call: Call) -> Result<Called, Stop> {
        let (answer, called) = futures_channel::oneshot::channel();
        let gone = || Stop::Invalid("The script's thread ended.".into());
        self.steps.send((call, answer)).map_err(|_| gone())?;
        called.await.map_err(|_| gone())?
    }

    #[cfg(target_arch = "wasm32")]
    pub(crate) fn open(bounds: Bounds) -> Result<Self, Failure> {
        let place = Place::take()?;
        Ok(Self {
            engine: Runner::open(bounds),
            _place: place,
        })
    }

    #[cfg(target_arch = "wasm32")]
    pub(crate) async fn call(&mut self, call: Call) -> Result<Called, Stop> {
        let engine = self.engine.as_mut().map_err(|stop| stop.clone())?;
        let called = engine.call(call);
        if let Err(stop) = &called {
            self.engine = Err(stop.clone());
        }
        called
    }
}
