//! Every Rust block of README.md and docs/*.md runs here, in the context its prose takes for
//! granted (`doc_blocks/`, joined to each block by `build.rs`), and does what the prose says.

use std::sync::OnceLock;

/// What a block's `?` turns every error into.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `ifmatch serve` where `UseDevelopmentStorage=true` points (127.0.0.1:10000), over a
/// temporary directory, started once for every block that takes it for granted and kept until
/// the tests end (on a thread of its own: each test has a runtime of its own).
fn development_server() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let (bound, is_bound) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async move {
                let dir = tempfile::tempdir().unwrap();
                let options = ifmatch_server::Options::default();
                let front = ifmatch_server::open(dir.path(), options.clone()).unwrap();
                let listener = tokio::net::TcpListener::bind("127.0.0.1:10000")
                    .await
                    .expect("127.0.0.1:10000, the development address, is taken");
                bound.send(()).unwrap();
                ifmatch_server::serve(listener, front, options, std::future::pending())
                    .await
                    .unwrap();
            });
        });
        is_bound
            .recv()
            .expect("the development server did not start");
    });
}

include!(concat!(env!("OUT_DIR"), "/doc_blocks.rs"));
