//! Runnable examples of ifmatch: `cargo run -p examples --example axum-docs`,
//! `cargo run -p examples --example hyper-hello`, and `bench-app`, the app that
//! `scripts/bench-tower` measures.

/// The median of a benchmark's runs (the upper one of an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// The least and the greatest of a benchmark's runs.
pub fn spread(values: &[f64]) -> (f64, f64) {
    let low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = values.iter().copied().fold(0.0, f64::max);
    (low, high)
}

/// A benchmark's `SECONDS_PER_RUN` and `ROUNDS` arguments (5 and 5 when not given).
pub fn seconds_and_rounds() -> (u64, usize) {
    let mut args = std::env::args().skip(1);
    let seconds = args
        .next()
        .map_or(5, |s| s.parse().expect("SECONDS_PER_RUN"));
    let rounds = args.next().map_or(5, |s| s.parse().expect("ROUNDS"));
    (seconds, rounds)
}

/// Runs `serve()` on one thread a core, each in a runtime of its own, as `ifmatch serve`'s blob
/// listener and `ifmatch proxy` do: the shape of the floors (`bare-proxy`, `bare-304`) the
/// benches measure them against. Returns when every thread's `serve()` has.
pub fn serve_on_every_core<F, Fut>(serve: F)
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let serve = std::sync::Arc::new(serve);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads: Vec<_> = (0..threads)
        .map(|_| {
            let serve = serve.clone();
            std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime")
                    .block_on(serve())
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a serving thread");
    }
}

/// Accepts connections on `listen` for ever, from a listener of this thread's own that shares
/// the port with the other threads' (`SO_REUSEPORT`), as `ifmatch serve`'s listeners do, and
/// hands each stream (`TCP_NODELAY` set) to `each`: the floors' accept loop.
pub async fn accept_each(
    listen: std::net::SocketAddr,
    mut each: impl FnMut(tokio::net::TcpStream),
) {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket.set_reuseport(true).expect("SO_REUSEPORT");
    socket.bind(listen).expect("bind LISTEN");
    let listener = socket.listen(1024).expect("listen");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        each(stream);
    }
}
