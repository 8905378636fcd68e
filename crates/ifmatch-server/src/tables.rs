//! The Table service on a listener of its own (`127.0.0.1:10002` by default, as the
//! emulators lay out their ports): each request's body read whole, up to the service's
//! limit, then answered by [`ifmatch_table::Service`], which holds every rule.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::service::service_fn;
use ifmatch_blob::auth::ClientIp;
use ifmatch_table::service::MAX_BODY;
use tokio::net::TcpListener;

use crate::accept::{Limits, RequestBody, serve_with};
use crate::metrics::Metrics;
use crate::observe::ObserveLayer;
use crate::{AnyTables, SystemEnv};

/// The Table service as the server runs it.
pub type TableService = ifmatch_table::Service<AnyTables, SystemEnv>;

/// Serves `service` on `listener` until `shutdown` completes.
pub(crate) async fn serve_tables(
    listener: TcpListener,
    service: Arc<TableService>,
    limits: Limits,
    metrics: Arc<Metrics>,
    observe: ObserveLayer,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    serve_with(listener, limits, metrics, shutdown, move |client| {
        let service = service.clone();
        let answer = service_fn(move |mut request: http::Request<RequestBody>| {
            let service = service.clone();
            request.extensions_mut().insert(ClientIp(client.ip()));
            async move { Ok::<_, Infallible>(answer(&service, request).await) }
        });
        observe.layer(answer, client.ip())
    })
    .await
}

async fn answer(
    service: &TableService,
    request: http::Request<RequestBody>,
) -> http::Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let answer = match Limited::new(body, MAX_BODY).collect().await {
        Ok(body) => service.handle(&parts, &body.to_bytes()).await,
        Err(error) if error.is::<http_body_util::LengthLimitError>() => service.too_large(&parts),
        Err(error) => {
            tracing::debug!(%error, "reading a Table request's body");
            ifmatch_table::front::failure(400, "InvalidInput", "the body was cut")
        }
    };
    answer.map(Full::new)
}
