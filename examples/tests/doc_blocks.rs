//! Every Rust block of README.md and docs/*.md runs here, in the context its prose takes for
//! granted (`doc_blocks/`, joined to each block by `build.rs`), and does what the prose says.

use std::sync::OnceLock;

/// What a block's `?` turns every error into.
use ifmatch_core::BoxError;

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
                let listener = std::net::TcpListener::bind("127.0.0.1:10000")
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

/// Runs `test` in this process when the S3 variables are set, or else runs the test at
/// `module` (its `runs`) again in a process of its own with the variables of a moto S3 server
/// holding `bucket`: a block may read them (`AmazonS3Builder::from_env`), and a test may not set
/// a variable of its own process while others run.
async fn in_a_process_with_s3<F, Fut>(bucket: &str, module: &str, test: F)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    if std::env::var_os("AWS_ENDPOINT").is_some() {
        return test().await;
    }
    let moto = ifmatch_bucket::testing::Moto::start(bucket).await;
    let name = format!("{}::runs", module.split_once("::").unwrap().1);
    let ran = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &name, "--nocapture"])
        .envs(ifmatch_bucket::testing::s3_variables(&moto))
        .status()
        .unwrap();
    assert!(ran.success(), "{name} over moto: {ran}");
}

/// Serves a router behind `layer` and checks that `If-None-Match: *` creates a document once:
/// 201, then 412 (one after the other: moto, the S3 the test runs over, does not make
/// concurrent conditional puts atomic).
async fn create_only_creates_once<V: ifmatch_tower::VersionStore + Clone>(
    layer: ifmatch_tower::ConditionalLayer<V>,
) {
    use axum::routing::get;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tower::Layer;
    let created = std::sync::Arc::new(AtomicBool::new(false));
    let (read, write) = (created.clone(), created);
    let read = move || async move {
        match read.load(Ordering::SeqCst) {
            true => Ok("a"),
            false => Err(axum::http::StatusCode::NOT_FOUND),
        }
    };
    let write = move || async move {
        write.store(true, Ordering::SeqCst);
        axum::http::StatusCode::CREATED
    };
    let routes = axum::Router::new().route("/docs/a", get(read).put(write));
    let app = axum::Router::new().fallback_service(layer.layer(routes));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/docs/a", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let http = reqwest::Client::new();
    for expected in [201, 412] {
        let put = http
            .put(&url)
            .header("if-none-match", "*")
            .send()
            .await
            .unwrap();
        assert_eq!(put.status(), expected);
    }
}

include!(concat!(env!("OUT_DIR"), "/doc_blocks.rs"));
