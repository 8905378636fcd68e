//! The Queue service's untrusted inputs: a Put or Update Message body (the message XML) and the
//! pop receipt and id a client sends back, each fuzzed, against a queue holding a message: no
//! request panics or is answered 5xx, and a forged receipt never deletes the message.
#![no_main]

use std::sync::{Arc, LazyLock};

use http::{Method, Request};
use ifmatch_azure::SystemEnv;
use ifmatch_queue::Endpoint;
use ifmatch_table::MemoryTables;
use libfuzzer_sys::fuzz_target;

type Service = Endpoint<Arc<MemoryTables>, SystemEnv>;

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
});

/// The service, and the id of the message its queue `fuzz` holds.
static SERVICE: LazyLock<(Service, String)> = LazyLock::new(|| {
    let service =
        Endpoint::new(Arc::new(MemoryTables::new()), SystemEnv)
            .with_serving(ifmatch_azure::Serving::anonymous());
    let id = RUNTIME.block_on(async {
        send(&service, Method::PUT, "/devstoreaccount1/fuzz", b"").await;
        let body = b"<QueueMessage><MessageText>kept</MessageText></QueueMessage>";
        let (_, xml) = send(
            &service,
            Method::POST,
            "/devstoreaccount1/fuzz/messages",
            body,
        )
        .await;
        let xml = String::from_utf8(xml).unwrap();
        let start = xml.find("<MessageId>").unwrap() + "<MessageId>".len();
        let end = xml.find("</MessageId>").unwrap();
        xml[start..end].to_owned()
    });
    (service, id)
});

async fn send(service: &Service, method: Method, uri: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "127.0.0.1:10001");
    let (parts, ()) = request.body(()).unwrap().into_parts();
    let answer = service.handle(&parts, body).await;
    (answer.status().as_u16(), answer.into_body().to_vec())
}

fuzz_target!(|data: &[u8]| {
    let (service, id) = &*SERVICE;
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    RUNTIME.block_on(async {
        let (status, _) = match which % 3 {
            0 => {
                send(
                    service,
                    Method::POST,
                    "/devstoreaccount1/fuzz/messages",
                    rest,
                )
                .await
            }
            1 => {
                let receipt: String = url_encoded(rest);
                let uri = format!("/devstoreaccount1/fuzz/messages/{id}?popreceipt={receipt}");
                let (status, body) = send(service, Method::DELETE, &uri, b"").await;
                assert_ne!(status, 204, "a forged receipt deleted the message");
                (status, body)
            }
            _ => {
                let path: String = url_encoded(rest);
                let uri = format!(
                    "/devstoreaccount1/fuzz/messages/{path}?popreceipt=x&visibilitytimeout=0"
                );
                send(service, Method::PUT, &uri, b"").await
            }
        };
        assert!(status < 500, "{status}");
    });
});

/// `bytes`, each percent-encoded: any of them reaches the service as sent.
fn url_encoded(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("%{b:02X}")).collect()
}
