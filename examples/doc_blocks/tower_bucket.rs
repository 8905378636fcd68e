// A layer over a bucket, as docs/fleet.md takes it: the S3 variables of a bucket that exists.
// The block reads them from the environment, so the test runs it in a process of its own that
// has them (over moto's S3 server), and checks that the layer it builds creates a document
// once: its versions and write locks are kept in that bucket.

use std::sync::Arc;
use std::time::Duration;

use ifmatch_tower::{ConditionalLayer, Shared};

async fn block() -> Result<ConditionalLayer<Shared<ifmatch_bucket::BucketVersions>>, crate::BoxError> {
    /* the block */
    Ok(layer)
}

#[tokio::test]
async fn runs() {
    crate::in_a_process_with_s3("myapp", module_path!(), || async {
        let layer = block().await.unwrap();
        crate::create_only_creates_once(layer).await;
    })
    .await;
}
