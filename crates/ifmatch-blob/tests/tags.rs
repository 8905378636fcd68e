//! Blob index tags over the front (memory backend, no socket): Set and Get Blob Tags, `x-ms-tags`
//! on uploads, `x-ms-tag-count` on reads, Azure's limits one past each refused with nothing
//! stored, and a tag change that leaves the blob's ETag and Last-Modified as they were.

use crate::common;

use common::{Server, code, field, header, refusal};

fn pairs(tags: &[(String, String)]) -> Vec<(&str, &str)> {
    tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

fn body(pairs: &[(&str, &str)]) -> Vec<u8> {
    let tags: String = (pairs.iter())
        .map(|(k, v)| format!("<Tag><Key>{k}</Key><Value>{v}</Value></Tag>"))
        .collect();
    format!("<?xml version=\"1.0\" encoding=\"utf-8\"?><Tags><TagSet>{tags}</TagSet></Tags>")
        .into_bytes()
}

#[tokio::test]
async fn tags_are_set_read_counted_and_leave_the_etag_alone() {
    let s = Server::with_container("box").await;
    let etag = s.put_blob("/box/b", b"bytes").await;
    let before = s.head("/box/b", &[]).await;
    assert_eq!(header(&before, "x-ms-tag-count"), None);

    let r = s
        .put(
            "/box/b?comp=tags",
            &[],
            body(&[("team", "a"), ("year", "2025")]),
        )
        .await;
    assert_eq!(r.status(), 204);
    let read = s.get("/box/b?comp=tags", &[]).await;
    assert_eq!(read.status(), 200);
    let text = read.text().await.unwrap();
    assert!(
        text.contains("<Tag><Key>team</Key><Value>a</Value></Tag>"),
        "{text}"
    );
    assert!(
        text.contains("<Tag><Key>year</Key><Value>2025</Value></Tag>"),
        "{text}"
    );

    let after = s.head("/box/b", &[]).await;
    assert_eq!(header(&after, "x-ms-tag-count").as_deref(), Some("2"));
    assert_eq!(header(&after, "etag"), Some(etag.clone()));
    assert_eq!(
        header(&after, "last-modified"),
        header(&before, "last-modified")
    );

    // An upload with `x-ms-tags` replaces them; one without clears them.
    let r = s
        .put(
            "/box/b",
            &[("x-ms-blob-type", "BlockBlob"), ("x-ms-tags", "k=v%2Fw")],
            "two",
        )
        .await;
    assert_eq!(r.status(), 201);
    let text = s.read_text("/box/b?comp=tags").await;
    assert!(
        text.contains("<TagSet><Tag><Key>k</Key><Value>v/w</Value></Tag></TagSet>"),
        "{text}"
    );
    s.put_blob("/box/b", b"three").await;
    let text = s.read_text("/box/b?comp=tags").await;
    assert!(text.contains("<TagSet></TagSet>"), "{text}");

    // No blob, no tags.
    let r = s.get("/box/none?comp=tags", &[]).await;
    assert_eq!(refusal(&r), (404, "BlobNotFound".into()));
    let r = s.put("/box/none?comp=tags", &[], body(&[("a", "b")])).await;
    assert_eq!(refusal(&r), (404, "BlobNotFound".into()));
}

#[tokio::test]
async fn limits_one_past_each_are_refused_and_nothing_is_stored() {
    let s = Server::with_container("box").await;
    s.put_blob("/box/b", b"bytes").await;
    let ten: Vec<(String, String)> = (0..10).map(|n| (format!("k{n}"), "v".into())).collect();
    assert_eq!(
        s.put("/box/b?comp=tags", &[], body(&pairs(&ten)))
            .await
            .status(),
        204
    );
    let mut eleven = ten.clone();
    eleven.push(("k10".into(), "v".into()));
    let (key_129, value_257) = ("k".repeat(129), "v".repeat(257));
    let (key_128, value_256) = ("k".repeat(128), "v".repeat(256));
    let refused: [(Vec<u8>, &str); 5] = [
        (body(&pairs(&eleven)), "TagsTooLarge"),
        (body(&[(key_129.as_str(), "v")]), "InvalidTag"),
        (body(&[("k", value_257.as_str())]), "InvalidTag"),
        (body(&[("k", "a&amp;b")]), "InvalidTag"),
        (
            b"<Tags><TagSet><Tag><Key>k</Key></Tag></TagSet></Tags>".to_vec(),
            "InvalidXmlDocument",
        ),
    ];
    for (sent, expected) in refused {
        let r = s.put("/box/b?comp=tags", &[], sent).await;
        assert_eq!(
            (r.status().as_u16(), code(&r).as_deref()),
            (400, Some(expected))
        );
    }
    let kept = s.head("/box/b", &[]).await;
    assert_eq!(header(&kept, "x-ms-tag-count").as_deref(), Some("10"));
    let longest = body(&[(key_128.as_str(), value_256.as_str())]);
    assert_eq!(s.put("/box/b?comp=tags", &[], longest).await.status(), 204);

    // The same limits on an upload's `x-ms-tags`, and nothing written.
    let many: String = (0..11)
        .map(|n| format!("k{n}=v"))
        .collect::<Vec<_>>()
        .join("&");
    for (tags, expected) in [
        (many.as_str(), "TagsTooLarge"),
        ("a=caf%C3%A9", "InvalidTag"),
    ] {
        let headers = [("x-ms-blob-type", "BlockBlob"), ("x-ms-tags", tags)];
        let r = s.put("/box/new", &headers, "x").await;
        assert_eq!(
            (r.status().as_u16(), code(&r).as_deref()),
            (400, Some(expected))
        );
        assert_eq!(s.head("/box/new", &[]).await.status(), 404);
    }
}

#[tokio::test]
async fn a_tag_condition_guards_reads_and_writes_against_the_tags_at_that_instant() {
    let s = Server::with_container("box").await;
    s.put_blob("/box/b", b"v1").await;
    s.put("/box/b?comp=tags", &[], body(&[("state", "draft")]))
        .await;
    let draft = [("x-ms-if-tags", "\"state\" = 'draft'")];
    let published = [(
        "x-ms-if-tags",
        "\"state\" = 'published' OR \"owner\" = 'me'",
    )];
    assert_eq!(s.get("/box/b", &draft).await.status(), 200);
    let r = s.get("/box/b", &published).await;
    assert_eq!(refusal(&r), (412, "ConditionNotMet".into()));
    // A write guarded by the draft state lands while it holds, then no more.
    let mut headers = vec![("x-ms-meta-n", "1")];
    headers.extend(draft);
    assert_eq!(
        s.put("/box/b?comp=metadata", &headers, "").await.status(),
        200
    );
    let r = s
        .put("/box/b?comp=tags", &draft, body(&[("state", "published")]))
        .await;
    assert_eq!(r.status(), 204);
    let r = s.put("/box/b?comp=metadata", &headers, "").await;
    assert_eq!(r.status(), 412);
    let r = s.delete("/box/b", &draft).await;
    assert_eq!(r.status(), 412);
    assert_eq!(s.delete("/box/b", &published[..0]).await.status(), 202);
    // Not a condition: 400, not a silent pass.
    s.put_blob("/box/c", b"x").await;
    let r = s.get("/box/c", &[("x-ms-if-tags", "state = draft")]).await;
    assert_eq!(refusal(&r), (400, "InvalidHeaderValue".into()));
}

/// Find Blobs by Tags in a container: the blobs whose tags meet the expression, in name order,
/// a page at a time, each with the tags the expression names; OR, `<>` and what is not an
/// expression are refused.
#[tokio::test]
async fn find_blobs_by_tags_pages_through_the_matching_blobs() {
    let s = Server::with_container("box").await;
    for (name, team) in [("a", "x"), ("b", "y"), ("c", "x"), ("d", "x"), ("e", "z")] {
        let tags = format!("team={team}&other=1");
        let headers = [
            ("x-ms-blob-type", "BlockBlob"),
            ("x-ms-tags", tags.as_str()),
        ];
        assert_eq!(
            s.put(&format!("/box/{name}"), &headers, "x").await.status(),
            201
        );
    }
    let find = |query: &str| format!("/box?restype=container&comp=blobs&where={query}");
    let names = |xml: &str| -> Vec<String> {
        xml.split("<Name>")
            .skip(1)
            .map(|s| s[..s.find('<').unwrap()].to_owned())
            .collect()
    };
    let marker = |xml: &str| -> Option<String> {
        let start = xml.find("<NextMarker>")? + "<NextMarker>".len();
        Some(xml[start..start + xml[start..].find('<')?].to_owned())
    };
    let all = s.read_text(&find("%22team%22%3D%27x%27")).await;
    assert_eq!(names(&all), ["a", "c", "d"]);
    assert!(all.contains("<ContainerName>box</ContainerName><Tags><TagSet><Tag><Key>team</Key><Value>x</Value></Tag></TagSet></Tags>"), "{all}");
    assert!(!all.contains("other"), "only the tags it names: {all}");
    assert_eq!(marker(&all), None);
    // Two a page.
    let (mut paged, mut next) = (Vec::new(), None::<String>);
    loop {
        let mut path =
            find("%22team%22%3E%3D%27x%27%20AND%20%40container%3D%27box%27") + "&maxresults=2";
        if let Some(m) = &next {
            path += &format!("&marker={m}");
        }
        let xml = s.read_text(&path).await;
        paged.extend(names(&xml));
        next = marker(&xml);
        if next.is_none() {
            break;
        }
    }
    assert_eq!(paged, ["a", "b", "c", "d", "e"]);
    for bad in [
        "%22team%22%3D%27x%27%20OR%20%22team%22%3D%27y%27",
        "%22team%22%3C%3E%27x%27",
        "team",
    ] {
        let r = s.get(&find(bad), &[]).await;
        assert_eq!(refusal(&r), (400, "InvalidQueryParameterValue".into()));
    }
    let r = s
        .get(
            "/none?restype=container&comp=blobs&where=%22a%22%3D%27b%27",
            &[],
        )
        .await;
    assert_eq!(code(&r).as_deref(), Some("ContainerNotFound"));
}

/// A find reads at most 5,000 records a request: over 5,100 blobs of which only the last
/// matches, the first page names none and says where it stopped, the next names the blob.
#[tokio::test]
async fn a_find_reads_a_bounded_number_of_records_a_page() {
    let s = Server::with_container("box").await;
    for n in 0..5100 {
        s.put_blob(&format!("/box/b{n:05}"), b"x").await;
    }
    let headers = [("x-ms-blob-type", "BlockBlob"), ("x-ms-tags", "last=yes")];
    assert_eq!(s.put("/box/b99999", &headers, "x").await.status(), 201);
    let path = "/box?restype=container&comp=blobs&where=%22last%22%3D%27yes%27";
    let first = s.read_text(path).await;
    assert!(!first.contains("<Name>"), "{first}");
    let start = first.find("<NextMarker>").expect("a marker") + "<NextMarker>".len();
    let marker = &first[start..start + first[start..].find('<').unwrap()];
    let second = s.read_text(&format!("{path}&marker={marker}")).await;
    assert!(second.contains("<Name>b99999</Name>"), "{second}");
    assert!(second.contains("<NextMarker />"), "{second}");
}

/// Find Blobs by Tags on the account (`GET /?comp=blobs`): every container's matching blobs,
/// by container then name, paged across containers; `@container = '...'` confines it to one.
#[tokio::test]
async fn a_find_on_the_account_pages_across_its_containers() {
    let s = Server::start().await;
    for container in ["box1", "box2", "box3"] {
        s.create_container(container).await;
        for (name, team) in [("a", "x"), ("b", "y"), ("c", "x")] {
            let tags = format!("team={team}");
            let headers = [
                ("x-ms-blob-type", "BlockBlob"),
                ("x-ms-tags", tags.as_str()),
            ];
            let path = format!("/{container}/{name}");
            assert_eq!(s.put(&path, &headers, "x").await.status(), 201);
        }
    }
    let found = |xml: &str| -> Vec<String> {
        xml.split("<Blob>")
            .skip(1)
            .map(|b| {
                let field = |tag| field(b, tag).unwrap();
                format!("{}/{}", field("ContainerName"), field("Name"))
            })
            .collect()
    };
    let (mut paged, mut next, mut pages) = (Vec::new(), None::<String>, 0);
    loop {
        let mut path = "/?comp=blobs&where=%22team%22%3D%27x%27&maxresults=2".to_owned();
        if let Some(m) = &next {
            path += &format!("&marker={m}");
        }
        let xml = s.read_text(&path).await;
        paged.extend(found(&xml));
        pages += 1;
        next = xml.find("<NextMarker>").map(|start| {
            let start = start + "<NextMarker>".len();
            xml[start..start + xml[start..].find('<').unwrap()].to_owned()
        });
        if next.is_none() {
            break;
        }
    }
    assert_eq!(
        paged,
        ["box1/a", "box1/c", "box2/a", "box2/c", "box3/a", "box3/c"]
    );
    assert!(pages >= 3, "{pages} pages");
    let one = "/?comp=blobs&where=%40container%3D%27box2%27%20AND%20%22team%22%3E%27a%27";
    let xml = s.read_text(one).await;
    assert_eq!(found(&xml), ["box2/a", "box2/b", "box2/c"]);
    let none = "/?comp=blobs&where=%40container%3D%27gone%27%20AND%20%22team%22%3D%27x%27";
    let xml = s.read_text(none).await;
    assert_eq!(found(&xml), Vec::<String>::new());
    let r = s.get("/?comp=blobs&where=team", &[]).await;
    assert_eq!(code(&r).as_deref(), Some("InvalidQueryParameterValue"));
}

/// `x-ms-source-if-tags` on a copy: the source's tags must meet it (412
/// `SourceConditionNotMet`, nothing written, when they do not); the destination's own tags are
/// `x-ms-if-tags`'s.
#[tokio::test]
async fn a_copy_meets_its_source_tag_condition_or_writes_nothing() {
    let s = Server::with_container("box").await;
    let headers = [
        ("x-ms-blob-type", "BlockBlob"),
        ("x-ms-tags", "stage=final"),
    ];
    assert_eq!(s.put("/box/src", &headers, "bytes").await.status(), 201);
    let source = "http://127.0.0.1:10000/devstoreaccount1/box/src";
    let copy = |condition: &'static str| {
        let s = &s;
        async move {
            let headers = [
                ("x-ms-copy-source", source),
                ("x-ms-source-if-tags", condition),
            ];
            s.put("/box/dst", &headers, "").await
        }
    };
    let r = copy("\"stage\" = 'draft'").await;
    assert_eq!(refusal(&r), (412, "SourceConditionNotMet".into()));
    assert_eq!(
        s.head("/box/dst", &[]).await.status(),
        404,
        "nothing written"
    );
    let r = copy("\"stage\" = 'draft' OR \"stage\" = 'final'").await;
    assert_eq!(r.status(), 202);
    let r = copy("stage").await;
    assert_eq!(r.status(), 400, "not a condition");
}
