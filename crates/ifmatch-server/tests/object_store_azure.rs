//! A third real client of the blob front, from the Rust ecosystem: object_store's Azure
//! backend, signing with the development account's key, against `ifmatch serve` started as a
//! user would. Conditional puts (create-only, update of the version read), reads, heads,
//! listing and deletes, as object_store does them.

use crate::common;

use futures_util::TryStreamExt;
use ifmatch_azure::{DEV_ACCOUNT, DEV_KEY};
use object_store::azure::MicrosoftAzureBuilder;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, UpdateVersion};

#[tokio::test]
async fn object_store_s_azure_client_works_unchanged() {
    let data = tempfile::tempdir().unwrap();
    let (mut child, origin) =
        common::spawn_signed(["serve".as_ref(), "--data".as_ref(), data.path().as_os_str()]);
    // object_store makes no containers: one made with the SDK-less signed helper.
    let made = common::signed_lite(
        "PUT",
        &format!("{origin}/{DEV_ACCOUNT}/osbox?restype=container"),
    )
    .await;
    assert_eq!(made.status(), 201);

    let store = MicrosoftAzureBuilder::new()
        .with_account(DEV_ACCOUNT)
        .with_access_key(DEV_KEY)
        .with_container_name("osbox")
        .with_endpoint(format!("{origin}/{DEV_ACCOUNT}"))
        .with_allow_http(true)
        .build()
        .unwrap();
    let path = Path::from("dir/doc.txt");
    let create = PutOptions::from(PutMode::Create);
    let v1 = store
        .put_opts(&path, "v1".into(), create.clone())
        .await
        .unwrap();
    let again = store.put_opts(&path, "v1 again".into(), create).await;
    assert!(
        matches!(again, Err(object_store::Error::AlreadyExists { .. })),
        "{again:?}"
    );
    let read = store.get(&path).await.unwrap();
    assert_eq!(read.meta.e_tag, v1.e_tag);
    assert_eq!(read.bytes().await.unwrap(), "v1");

    let update = |e_tag: Option<String>| {
        PutOptions::from(PutMode::Update(UpdateVersion {
            e_tag,
            version: None,
        }))
    };
    let v2 = store
        .put_opts(&path, "v2".into(), update(v1.e_tag.clone()))
        .await
        .unwrap();
    let stale = store
        .put_opts(&path, "lost".into(), update(v1.e_tag.clone()))
        .await;
    assert!(
        matches!(stale, Err(object_store::Error::Precondition { .. })),
        "{stale:?}"
    );
    assert_eq!(store.head(&path).await.unwrap().e_tag, v2.e_tag);
    assert_eq!(store.get(&path).await.unwrap().bytes().await.unwrap(), "v2");

    store
        .put(&Path::from("dir/other"), "x".into())
        .await
        .unwrap();
    let mut listed: Vec<String> = store
        .list(Some(&Path::from("dir")))
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .unwrap();
    listed.sort();
    assert_eq!(listed, ["dir/doc.txt", "dir/other"]);
    store.delete(&path).await.unwrap();
    assert!(matches!(
        store.get(&path).await,
        Err(object_store::Error::NotFound { .. })
    ));
    child.kill().unwrap();
    child.wait().unwrap();
}
