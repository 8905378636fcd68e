// The other setups of the layer, as docs/tower.md takes them: a stateless `routes`, a `db`
// that knows each document's version, a Redis `connection` (a redis-server of the test's own).
// The block builds each layer; the test checks it runs to its end.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use ifmatch_core::EntityTag;
use ifmatch_tower::{ConditionalLayer, Shared};
use tower::ServiceBuilder;

#[derive(Clone)]
struct Db;

impl Db {
    async fn version_of(&self, _id: &str) -> Result<Option<EntityTag>, crate::BoxError> {
        Ok(Some(ifmatch_core::strong_etag(b"a document")))
    }
}

async fn block(
    routes: Router,
    db: Db,
    connection: ifmatch_redis::Redis,
) -> Result<(), crate::BoxError> {
    /* the block */
    Ok(())
}

#[tokio::test]
async fn runs() {
    let redis = ifmatch_redis::testing::RedisServer::start();
    let connection = ifmatch_redis::connect(&redis.url()).await.unwrap();
    let routes = Router::new().route("/docs/{id}", get(|| async { "a document" }));
    block(routes.with_state(()), Db, connection).await.unwrap();
}
