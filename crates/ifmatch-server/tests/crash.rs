//! Crash safety: the `ifmatch` binary killed with SIGKILL in the middle of a stream of uploads,
//! then restarted on the same data directory.

use crate::common;

use common::client;
use std::collections::HashMap;
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ifmatch_server::local::INLINE_MAX;

struct Running {
    child: Child,
    base: String,
}

fn spawn(data: &std::path::Path) -> Running {
    let (child, base) = common::spawn_ifmatch([
        std::ffi::OsStr::new("serve"),
        "--data".as_ref(),
        data.as_os_str(),
    ]);
    Running { child, base }
}

/// What a writer knows of its blob: the tag of its last acknowledged write, and of the write
/// in flight when the server died.
#[derive(Debug, Default, Clone)]
struct Known {
    acknowledged: Option<String>,
    in_flight: Option<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_uploads_leaves_every_blob_old_or_new() {
    let data = tempfile::tempdir().unwrap();
    for round in 0..3 {
        let server = spawn(data.path());
        let http = client();
        if round == 0 {
            common::create_container(&http, &server.base, "crash").await;
        }
        let known: Arc<Mutex<HashMap<String, Known>>> = Arc::default();
        let writers: Vec<_> = (0..8)
            .map(|w| {
                let (http, base, known) = (http.clone(), server.base.clone(), known.clone());
                tokio::spawn(async move {
                    for i in 0u64.. {
                        // Bodies of 1 KiB to 2 MiB, so that the kill lands inside uploads too,
                        // and every third one small enough to be kept in its record.
                        let spread = i * 7919 + w * 104_729;
                        let len = match i % 3 {
                            0 => spread % (INLINE_MAX + 1),
                            _ => 1024 + spread % (2 << 20),
                        };
                        let body: Vec<u8> = (0..len)
                            .map(|b| (b as u8) ^ (i as u8) ^ (w as u8))
                            .collect();
                        let tag = ifmatch_core::strong_etag(&body).to_string();
                        let name = format!("w{w}/blob{}", i % 3);
                        known
                            .lock()
                            .unwrap()
                            .entry(name.clone())
                            .or_default()
                            .in_flight = Some(tag.clone());
                        let sent = http
                            .put(format!("{base}/crash/{name}"))
                            .header("x-ms-blob-type", "BlockBlob")
                            .body(body)
                            .send()
                            .await;
                        match sent {
                            Ok(r) if r.status() == 201 => {
                                assert_eq!(r.headers()["etag"].to_str().unwrap(), tag);
                                let mut known = known.lock().unwrap();
                                let entry = known.get_mut(&name).unwrap();
                                entry.acknowledged = Some(tag);
                                entry.in_flight = None;
                            }
                            _ => return,
                        }
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(400 + 300 * round)).await;
        let mut child = server.child;
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        for w in writers {
            w.await.unwrap();
        }

        // Restart on the same data: every blob is whole, its tag is its bytes' SHA-256, and it
        // is the last acknowledged write or the one in flight.
        let server = spawn(data.path());
        let known = known.lock().unwrap().clone();
        assert!(!known.is_empty());
        let mut checked = 0;
        for (name, known) in &known {
            let r = http
                .get(format!("{}/crash/{name}", server.base))
                .send()
                .await
                .unwrap();
            if r.status() == 404 {
                assert!(
                    known.acknowledged.is_none(),
                    "{name}: an acknowledged write was lost"
                );
                continue;
            }
            assert_eq!(r.status(), 200, "{name}");
            let tag = r.headers()["etag"].to_str().unwrap().to_owned();
            let bytes = r.bytes().await.unwrap();
            assert_eq!(
                tag,
                ifmatch_core::strong_etag(&bytes).to_string(),
                "{name}: torn blob"
            );
            let allowed = [&known.acknowledged, &known.in_flight];
            assert!(
                allowed.iter().any(|t| t.as_deref() == Some(tag.as_str())),
                "{name}: {tag} is neither {known:?}"
            );
            checked += 1;
        }
        assert!(checked > 0);
        // Nothing half-written is left over: no temp files, no object without a record.
        let tmp = std::fs::read_dir(data.path().join("tmp")).unwrap().count();
        assert_eq!(tmp, 0, "round {round}: temp files left");
        let mut child = server.child;
        child.kill().unwrap();
        child.wait().unwrap();
    }
    // After a final clean start, the objects are exactly those the records name.
    let server = spawn(data.path());
    let xml = common::text_of(format!("{}/crash?restype=container&comp=list", server.base)).await;
    // One object per blob larger than those kept in their records.
    let lengths = xml
        .split("<Content-Length>")
        .skip(1)
        .map(|rest| rest.split('<').next().unwrap().parse::<u64>().unwrap());
    let (kept, large): (Vec<u64>, Vec<u64>) = lengths.partition(|len| *len <= INLINE_MAX);
    assert!(
        !kept.is_empty() && !large.is_empty(),
        "both kinds were written"
    );
    let objects = std::fs::read_dir(data.path().join("objects"))
        .unwrap()
        .count();
    assert_eq!(objects, large.len(), "orphaned objects were not swept");
    let mut child = server.child;
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Staged blocks survive SIGKILL: every Put Block answered 201 before the kill is in the
/// blob's uncommitted list after the restart, and a commit of all of them reads back byte for
/// byte; a torn append of the block in flight is passed over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_put_blocks_loses_no_acknowledged_block() {
    use base64::Engine;
    let data = tempfile::tempdir().unwrap();
    let mut server = spawn(data.path());
    let http = client();
    common::create_container(&http, &server.base, "staged").await;
    let id =
        |w: u64, i: u64| base64::engine::general_purpose::STANDARD.encode(format!("{w:02}-{i:06}"));
    let body = |w: u64, i: u64| format!("block {w} {i};").repeat(1 + (i % 50) as usize);
    let acknowledged: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (http, base, acknowledged) =
                (http.clone(), server.base.clone(), acknowledged.clone());
            tokio::spawn(async move {
                for i in 0u64.. {
                    let url = format!("{base}/staged/big?comp=block&blockid={}", id(w, i));
                    match http.put(url).body(body(w, i)).send().await {
                        Ok(r) if r.status() == 201 => acknowledged.lock().unwrap().push((w, i)),
                        Ok(r) => panic!("Put Block answered {}", r.status()),
                        Err(_) => return,
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    for writer in writers {
        writer.await.unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(
        acknowledged.len() > 50,
        "only {} blocks staged",
        acknowledged.len()
    );

    server = spawn(data.path());
    let list = http
        .get(format!(
            "{}/staged/big?comp=blocklist&blocklisttype=uncommitted",
            server.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(list.status(), 200);
    let list = list.text().await.unwrap();
    for (w, i) in &acknowledged {
        assert!(
            list.contains(&id(*w, *i)),
            "block {w}/{i} was acknowledged and is gone"
        );
    }
    let mut xml = String::from("<BlockList>");
    let mut whole = String::new();
    for (w, i) in &acknowledged {
        xml.push_str(&format!("<Uncommitted>{}</Uncommitted>", id(*w, *i)));
        whole.push_str(&body(*w, *i));
    }
    xml.push_str("</BlockList>");
    let r = http
        .put(format!("{}/staged/big?comp=blocklist", server.base))
        .body(xml)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let read = http
        .get(format!("{}/staged/big", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(read.text().await.unwrap(), whole);
    println!(
        "{} blocks acknowledged before the kill, all there",
        acknowledged.len()
    );
    server.child.kill().unwrap();
    server.child.wait().unwrap();
}
