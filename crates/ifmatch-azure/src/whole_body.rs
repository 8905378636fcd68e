//! The dialects that read a request's body whole before they answer (the Table service, Cosmos
//! DB): one way, for every host (the server and the Worker), to read it up to the dialect's
//! limit and answer, a body too long or cut short included.

use std::future::Future;

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};
use http_body::Body;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use crate::{Client, Named};

/// The answer of an endpoint that reads bodies whole: its body is whole too.
pub type Answer = Response<Bytes>;

/// An endpoint that answers a request from its body read whole.
pub trait WholeBody {
    /// The longest body it takes.
    const MAX_BODY: usize;

    /// Its answer to a request from `client` whose body was read whole, and the operation's
    /// name when the request named one.
    fn answer(
        &self,
        parts: &Parts,
        client: Client,
        body: &[u8],
    ) -> impl Future<Output = Named<Answer>>;

    /// Its answer to a request whose body is longer than [`WholeBody::MAX_BODY`].
    fn too_large(&self, parts: &Parts) -> Answer;

    /// Its answer to a request whose body was cut short (the client stopped sending, or sent
    /// something that is not HTTP).
    fn cut(&self, parts: &Parts) -> Answer;
}

/// `endpoint`'s answer to `request` from `client`, its body read whole first, up to the
/// endpoint's limit, and the operation's name when the request named one.
pub async fn answer_whole<E, B>(endpoint: &E, request: Request<B>, client: Client) -> Named<Answer>
where
    E: WholeBody,
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = request.into_parts();
    match Limited::new(body, E::MAX_BODY).collect().await {
        Ok(body) => endpoint.answer(&parts, client, &body.to_bytes()).await,
        Err(error) if error.is::<LengthLimitError>() => (endpoint.too_large(&parts), None),
        Err(error) => {
            tracing::debug!(%error, "reading a request's body");
            (endpoint.cut(&parts), None)
        }
    }
}
