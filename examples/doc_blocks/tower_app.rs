// A small document store behind the layer, as the README's axum example takes it: `db`, its
// handlers (`list`, `create`, `read`, `write`, `remove`) and a `listener`. The test writes a
// document behind the layer's back, as a job would, and checks that a write carrying the tag
// read before that change is refused.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;

#[derive(Clone, Default)]
struct Db(Arc<Mutex<BTreeMap<String, String>>>);

impl Db {
    fn documents(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.0.lock().unwrap()
    }
}

async fn list(State(db): State<Db>) -> String {
    db.documents().keys().cloned().collect::<Vec<_>>().join("\n")
}

async fn create(State(db): State<Db>, body: String) -> (StatusCode, String) {
    let mut documents = db.documents();
    let id = (documents.len() + 1).to_string();
    documents.insert(id.clone(), body);
    (StatusCode::CREATED, id)
}

async fn read(State(db): State<Db>, Path(id): Path<String>) -> Result<String, StatusCode> {
    db.documents().get(&id).cloned().ok_or(StatusCode::NOT_FOUND)
}

async fn write(State(db): State<Db>, Path(id): Path<String>, body: String) -> StatusCode {
    match db.documents().insert(id, body) {
        Some(_) => StatusCode::NO_CONTENT,
        None => StatusCode::CREATED,
    }
}

async fn remove(State(db): State<Db>, Path(id): Path<String>) -> StatusCode {
    match db.documents().remove(&id) {
        Some(_) => StatusCode::NO_CONTENT,
        None => StatusCode::NOT_FOUND,
    }
}

async fn block(db: Db, listener: tokio::net::TcpListener) -> Result<(), crate::BoxError> {
    /* the block */
    #[allow(unreachable_code)]
    Ok(())
}

#[tokio::test]
async fn a_write_with_a_tag_read_before_a_change_behind_the_layer_is_refused() {
    let db = Db::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/docs/a", listener.local_addr().unwrap());
    tokio::spawn(block(db.clone(), listener));
    let http = reqwest::Client::new();

    let created = http.put(&url).header("if-none-match", "*").body("v1").send().await.unwrap();
    assert_eq!(created.status(), 201, "create-only creates");
    let read = http.get(&url).send().await.unwrap();
    assert_eq!(read.status(), 200);
    let tag = read.headers()["etag"].to_str().unwrap().to_owned();
    let again = http.get(&url).header("if-none-match", &tag).send().await.unwrap();
    assert_eq!(again.status(), 304, "an unchanged document revalidates");

    db.documents().insert("a".into(), "changed by a job".into());
    let stale = http.put(&url).header("if-match", &tag).body("v2").send().await.unwrap();
    assert_eq!(stale.status(), 412, "the job's change is not overwritten");
    assert_eq!(db.documents()["a"], "changed by a job");
    let moved = http.get(&url).header("if-none-match", &tag).send().await.unwrap();
    assert_eq!(moved.status(), 200, "no 304 for the old tag");
}
