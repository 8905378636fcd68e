//! The processes Cosmos scripts' engines run in (`ifmatch script-host`, which serves
//! `ifmatch_cosmos::script::serve_steps` on its standard input and output): one run in each at
//! a time, a few kept idle between runs, more started as runs need them. A script that
//! overflows the engine's native stack aborts its process, which ends that run (its caller is
//! answered 400) and nothing else; its process is not used again.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};

use ifmatch_cosmos::script::{Engines, Host};

/// The idle processes kept for the next runs; a process given back past them ends. Each holds
/// 8 to 13 MB of its own (measured after a run) and a new one takes about 8 ms to start (the
/// quick build, this project's AMD EPYC host): two serve runs one after another and a second
/// beside them.
const IDLE: usize = 2;

/// Engines in processes of `program script-host`.
pub struct ScriptHosts {
    program: PathBuf,
    idle: Arc<Mutex<VecDeque<Process>>>,
}

impl ScriptHosts {
    /// Processes of `program` (this server's own binary), started as they are needed.
    pub fn new(program: PathBuf) -> Self {
        Self {
            program,
            idle: Arc::default(),
        }
    }
}

impl Engines for ScriptHosts {
    fn host(&self) -> std::io::Result<Box<dyn Host>> {
        let process = loop {
            // The one idle longest, whose next engine is likeliest made (`serve_steps`).
            let idle = self
                .idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front();
            let Some(mut process) = idle else {
                break Process::start(&self.program)?;
            };
            // One that ended while idle (killed, say) is passed over.
            match process.child.try_wait() {
                Ok(None) => break process,
                _ => drop(process.end()),
            }
        };
        Ok(Box::new(Lent {
            process: Some(process),
            idle: self.idle.clone(),
        }))
    }
}

/// An engine's process and its two pipes.
struct Process {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Process {
    fn start(program: &PathBuf) -> std::io::Result<Self> {
        // A group of its own: a terminal's Ctrl-C, meant for the server, leaves the runs in
        // flight to end as the server drains them (the process ends when its input does).
        let mut child = Command::new(program)
            .arg("script-host")
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("a script host's pipes were not made"));
        };
        Ok(Self {
            child,
            input,
            output: BufReader::new(output),
        })
    }

    fn exchange(&mut self, line: &str) -> std::io::Result<String> {
        // One write: the process wakes to a whole line.
        let mut sent = Vec::with_capacity(line.len() + 1);
        sent.extend_from_slice(line.as_bytes());
        sent.push(b'\n');
        self.input.write_all(&sent)?;
        let mut answer = String::new();
        if self.output.read_line(&mut answer)? == 0 || !answer.ends_with('\n') {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        answer.pop();
        Ok(answer)
    }

    /// Ends the process (if it has not ended): how it ended.
    fn end(mut self) -> std::io::Result<ExitStatus> {
        let _ = self.child.kill();
        self.child.wait()
    }
}

/// A process as one run holds it: given back to the idle ones when the run is done, unless
/// an exchange failed.
struct Lent {
    process: Option<Process>,
    idle: Arc<Mutex<VecDeque<Process>>>,
}

impl Host for Lent {
    fn exchange(&mut self, line: &str) -> std::io::Result<String> {
        let process = (self.process.as_mut())
            .ok_or_else(|| std::io::Error::other("the process ended at an earlier step"))?;
        process.exchange(line).map_err(|e| {
            let ended = self.process.take().map(Process::end);
            let ended = match ended {
                Some(Ok(status)) => format!("the process ended: {status}"),
                _ => format!("the process stopped answering: {e}"),
            };
            tracing::warn!("a Cosmos script's engine process ended mid-step: {ended}");
            std::io::Error::other(ended)
        })
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        let Some(process) = self.process.take() else {
            return;
        };
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < IDLE {
            idle.push_back(process);
        } else {
            drop(idle);
            let _ = process.end();
        }
    }
}
