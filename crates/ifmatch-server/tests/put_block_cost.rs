//! What a Put Block costs does not grow with the blocks already staged: the bytes this process
//! writes for one (its `wchar`, every byte handed to `write`) at 10 staged blocks and at 10,000
//! differ by less than a small constant. The binary's other tests write too, in the same
//! process and at the same time, and a count can only gain from them: each figure is the least
//! of twenty Put Blocks counted one by one, which a growing cost would raise in every one.

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use ifmatch_blob::{Block, Key, Records};
use ifmatch_core::strong_etag;

/// Bytes this process has handed to `write` and its kin so far.
fn written() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap();
    let line = io.lines().find(|l| l.starts_with("wchar:")).unwrap();
    line["wchar:".len()..].trim().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_written_per_put_block_do_not_grow_with_the_blocks_staged() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = ifmatch_server::Options::default();
    options.anonymous = true;
    let served = ifmatch_server::open(dir.path(), options).unwrap();
    let front = served.front;
    let base = "/devstoreaccount1/cost";
    let put = |uri: String, body: &'static [u8]| {
        let mut request = Request::put(uri)
            .body(Full::new(Bytes::from_static(body)))
            .unwrap();
        request
            .headers_mut()
            .insert("content-length", body.len().into());
        request
    };
    let created = front
        .handle(put(format!("{base}?restype=container"), b""))
        .await;
    assert_eq!(created.status(), 201);
    let id = |i: usize| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(format!("{i:08}"))
    };
    // The least bytes written by one of `n` Put Blocks of one byte, from block `from` on.
    let measure = async |from: usize, n: usize| {
        let mut least = u64::MAX;
        for i in from..from + n {
            let uri = format!("{base}/big?comp=block&blockid={}", id(i));
            let before = written();
            let answer = front.handle(put(uri, b"x")).await;
            least = least.min(written() - before);
            assert_eq!(answer.status(), 201);
        }
        least
    };

    for i in 0..10 {
        let uri = format!("{base}/big?comp=block&blockid={}", id(i));
        assert_eq!(front.handle(put(uri, b"x")).await.status(), 201);
    }
    let at_10 = measure(10, 20).await;

    // To 10,000 staged, through the backend's own staging (what Put Block calls), without
    // the objects' fsyncs.
    let key = Key::Blob("cost".into(), "big".into());
    let records = front.records();
    let epoch = records
        .get(&key)
        .await
        .unwrap()
        .unwrap()
        .staging
        .unwrap()
        .epoch;
    for i in 30..10_000 {
        let block = Block {
            id: id(i),
            object: format!("{i:032x}"),
            len: 1,
            sha256: strong_etag(b"x"),
            staged: 1_700_000_000,
        };
        assert!(
            records
                .stage_block(ifmatch_blob::BlockToStage {
                    key: &key,
                    epoch,
                    block: &block,
                    max: 100_000,
                })
                .await
                .unwrap()
        );
    }
    let at_10k = measure(10_000, 20).await;
    eprintln!("bytes written per Put Block: {at_10} at 10 staged, {at_10k} at 10,000");
    assert!(
        at_10k <= at_10 + 256,
        "a Put Block writes {at_10k} bytes at 10,000 staged blocks, {at_10} at 10"
    );
    assert!(at_10 < 4096, "{at_10} bytes for a block of one byte");

    // And all of them are there, in order.
    let list = Request::get(format!(
        "{base}/big?comp=blocklist&blocklisttype=uncommitted"
    ))
    .body(Full::new(Bytes::new()))
    .unwrap();
    let answer = front.handle(list).await;
    assert_eq!(answer.status(), 200);
    let xml = answer.into_body().collect().await.unwrap().to_bytes();
    let xml = String::from_utf8(xml.to_vec()).unwrap();
    assert_eq!(xml.matches("<Block>").count(), 10_020);
    let first = xml.find(&id(0)).unwrap();
    let last = xml.find(&id(10_019)).unwrap();
    assert!(first < last);
}
