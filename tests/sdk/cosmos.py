"""The Cosmos DB endpoint through Azure's own Python SDK (azure-cosmos), unchanged, with the
emulator's connection string: databases and containers, the seed flow of optimistic
concurrency (read, replace with the _etag, a stale replace is 412 and changes nothing), the
304 of a read with If-None-Match, create-only (409), delete with a stale tag, 16 writers
incrementing one counter with retries on 412 (an exact total), pages of a container's
documents, bad input answered as Cosmos answers it, and a wrong key refused.

Usage: cosmos.py CONNECTION_STRING [WRITERS]   (exits 1 on the first failed check; prints a tally)
WRITERS: how many writers race to increment one counter, 8 times each (16; fewer over a
bucket, where each of their retries is a few dozen of the bucket's requests).
"""

import sys
import time
import uuid

from checks import Checks, at_once, status_of
from azure.core import MatchConditions
from azure.cosmos import CosmosClient, PartitionKey, exceptions

check = Checks("python cosmos")


def main(connection_string, writers=16):
    client = CosmosClient.from_connection_string(connection_string)
    name = "db" + uuid.uuid4().hex[:8]
    database = client.create_database(name)
    check("a database is created", database.read()["id"] == name)
    check(
        "creating it again is 409",
        status_of(lambda: client.create_database(name)) == 409,
    )
    check(
        "the account lists it",
        name in [d["id"] for d in client.list_databases()],
    )
    carts = database.create_container("carts", partition_key=PartitionKey(path="/user"))
    properties = carts.read()
    check(
        "a container keeps its partition key",
        properties["partitionKey"]["paths"] == ["/user"],
        properties,
    )
    check(
        "the database lists it",
        [c["id"] for c in database.list_containers()] == ["carts"],
    )

    # The seed flow.
    created = carts.create_item({"id": "cart1", "user": "ann", "items": []})
    for system in ["_rid", "_self", "_etag", "_ts", "_attachments"]:
        check(f"a document has {system}", system in created, created)
    check(
        "the etag header is the body's _etag",
        carts.client_connection.last_response_headers["etag"] == created["_etag"],
    )
    check(
        "creating the same id in the same partition is 409",
        status_of(lambda: carts.create_item({"id": "cart1", "user": "ann"})) == 409,
    )
    carts.create_item({"id": "cart1", "user": "bob"})
    check("the same id in another partition is another document", True)
    read = carts.read_item("cart1", partition_key="ann")
    check(
        "a document's properties come back in its order, the system ones last",
        list(read)[:3] == ["id", "user", "items"] and list(read)[-1] == "_attachments",
        list(read),
    )
    def session_lsn():
        return int(carts.client_connection.last_response_headers["x-ms-session-token"].split("#")[1])

    before = session_lsn()
    carts.upsert_item({"id": "session", "user": "ann"})
    after_one = session_lsn()
    carts.upsert_item({"id": "session", "user": "ann", "n": 1})
    check(
        "the session token advances with every write, and the SDK's session reads go on",
        before < after_one < session_lsn()
        and carts.read_item("session", partition_key="ann")["n"] == 1,
    )
    many = carts.read_items([("cart1", "ann"), ("cart1", "bob"), ("nobody", "ann")])
    check(
        "read_items (read many) finds each item by id and partition key",
        sorted(i["user"] for i in many) == ["ann", "bob"],
        list(many),
    )
    stale = dict(read)
    read["items"].append("apple")
    replaced = carts.replace_item(
        "cart1", read, etag=read["_etag"], match_condition=MatchConditions.IfNotModified
    )
    check("a replace with the current _etag passes", replaced["items"] == ["apple"])
    check("a replace gives a new _etag", replaced["_etag"] != read["_etag"])
    stale["items"].append("pear")
    check(
        "a replace with a stale _etag is 412",
        status_of(
            lambda: carts.replace_item(
                "cart1", stale, etag=stale["_etag"], match_condition=MatchConditions.IfNotModified
            )
        )
        == 412,
    )
    check(
        "and changes nothing",
        carts.read_item("cart1", partition_key="ann")["items"] == ["apple"],
    )

    # The 304 of a read with the current tag.
    statuses = []
    unchanged = carts.read_item(
        "cart1",
        partition_key="ann",
        etag=replaced["_etag"],
        match_condition=MatchConditions.IfModified,
        response_hook=lambda headers, body: statuses.append(body),
    )
    check("a read with the current tag is 304, empty", not unchanged, unchanged)
    changed = carts.read_item(
        "cart1", partition_key="ann", etag=read["_etag"], match_condition=MatchConditions.IfModified
    )
    check("a read with an old tag is the document", changed["items"] == ["apple"])
    check(
        "a read of a missing document is 404",
        status_of(lambda: carts.read_item("nobody", partition_key="ann")) == 404,
    )

    # Upsert and delete.
    upserted = carts.upsert_item({"id": "cart2", "user": "ann", "items": ["fig"]})
    again = carts.upsert_item({"id": "cart2", "user": "ann", "items": ["kiwi"]})
    check("an upsert creates, then replaces", again["items"] == ["kiwi"])
    check("each with a new _etag", again["_etag"] != upserted["_etag"])
    check(
        "a delete with a stale _etag is 412",
        status_of(
            lambda: carts.delete_item(
                "cart2",
                partition_key="ann",
                etag=upserted["_etag"],
                match_condition=MatchConditions.IfNotModified,
            )
        )
        == 412,
    )
    carts.delete_item(
        "cart2", partition_key="ann", etag=again["_etag"], match_condition=MatchConditions.IfNotModified
    )
    check(
        "a delete with the current _etag passes",
        status_of(lambda: carts.read_item("cart2", partition_key="ann")) == 404,
    )

    # 16 writers, one counter, retries on 412.
    carts.create_item({"id": "counter", "user": "shared", "n": 0})
    retries = []

    def writer():
        for _ in range(8):
            while True:
                doc = carts.read_item("counter", partition_key="shared")
                doc["n"] += 1
                try:
                    carts.replace_item(
                        "counter", doc, etag=doc["_etag"], match_condition=MatchConditions.IfNotModified
                    )
                    break
                except exceptions.CosmosAccessConditionFailedError:
                    retries.append(1)

    at_once(writer, writers)
    total = carts.read_item("counter", partition_key="shared")["n"]
    check(
        f"{writers} writers with retries on 412 count exactly",
        total == 8 * writers,
        f"{total} after {len(retries)} retries",
    )

    # Patch: operations all or none, with If-Match and with a condition.
    carts.create_item({"id": "cart3", "user": "ann", "n": 1, "items": ["a"]})
    patched = carts.patch_item(
        "cart3",
        partition_key="ann",
        patch_operations=[
            {"op": "incr", "path": "/n", "value": 2},
            {"op": "add", "path": "/items/-", "value": "b"},
            {"op": "set", "path": "/note", "value": "hi"},
        ],
    )
    check(
        "a patch applies its operations",
        (patched["n"], patched["items"], patched["note"]) == (3, ["a", "b"], "hi"),
        patched,
    )
    increment = [{"op": "incr", "path": "/n", "value": 1}]
    patch_n = lambda **options: carts.patch_item(  # noqa: E731
        "cart3", partition_key="ann", patch_operations=increment, **options
    )
    check(
        "a patch whose condition is false is 412",
        status_of(lambda: patch_n(filter_predicate="from c where c.n > 10")) == 412,
    )
    conditioned = patch_n(filter_predicate="from c where c.n = 3 AND ARRAY_CONTAINS(c.items, 'b')")
    check("a patch whose condition holds applies", conditioned["n"] == 4)
    check(
        "a patch with a stale _etag is 412",
        status_of(
            lambda: patch_n(etag=patched["_etag"], match_condition=MatchConditions.IfNotModified)
        )
        == 412,
    )
    check(
        "a patch that cannot apply is 400 and changes nothing",
        status_of(
            lambda: carts.patch_item(
                "cart3",
                partition_key="ann",
                patch_operations=[
                    {"op": "incr", "path": "/n", "value": 1},
                    {"op": "replace", "path": "/missing", "value": 1},
                ],
            )
        )
        == 400
        and carts.read_item("cart3", partition_key="ann")["n"] == 4,
    )
    check(
        "a patch of the partition key is 400",
        status_of(
            lambda: carts.patch_item(
                "cart3", partition_key="ann", patch_operations=[{"op": "set", "path": "/user", "value": "x"}]
            )
        )
        == 400,
    )

    # Transactional batches: all or none.
    done = carts.execute_item_batch(
        [
            ("create", ({"id": "b1", "user": "cat", "n": 1},)),
            ("upsert", ({"id": "b2", "user": "cat", "n": 2},)),
            ("patch", ("b1", [{"op": "incr", "path": "/n", "value": 10}])),
            ("read", ("b2",)),
        ],
        partition_key="cat",
    )
    check(
        "a batch applies every operation",
        [r["statusCode"] for r in done] == [201, 201, 200, 200]
        and carts.read_item("b1", partition_key="cat")["n"] == 11,
        done,
    )
    b2 = carts.read_item("b2", partition_key="cat")
    try:
        carts.execute_item_batch(
            [
                ("upsert", ({"id": "b3", "user": "cat"},)),
                ("replace", ("b2", {"id": "b2", "user": "cat", "n": 99}), {"if_match_etag": b2["_etag"]}),
                ("create", ({"id": "b1", "user": "cat"},)),
                ("delete", ("b2",)),
            ],
            partition_key="cat",
        )
        check("a failing batch raises", False)
    except exceptions.CosmosBatchOperationError as error:
        statuses = [r["statusCode"] for r in error.operation_responses]
        check(
            "a failing batch names the failure and 424s the rest",
            error.error_index == 2 and statuses == [424, 424, 409, 424],
            statuses,
        )
    check(
        "and leaves nothing of itself",
        status_of(lambda: carts.read_item("b3", partition_key="cat")) == 404
        and carts.read_item("b2", partition_key="cat")["n"] == 2,
    )
    stale = carts.execute_item_batch
    try:
        stale(
            [("replace", ("b2", {"id": "b2", "user": "cat", "n": 3}), {"if_match_etag": done[1]["eTag"] + "x"})],
            partition_key="cat",
        )
        check("a batch operation's stale ifMatch raises", False)
    except exceptions.CosmosBatchOperationError as error:
        check("a batch operation's ifMatch is honoured", error.status_code == 412)

    # Pages of a container's documents.
    pages = database.create_container("pages", partition_key=PartitionKey(path="/pk"))
    for i in range(25):
        pages.create_item({"id": f"d{i:02}", "pk": "p" + str(i % 3)})
    paged = pages.read_all_items(max_item_count=10)
    ids = []
    for page in paged.by_page():
        ids.extend(item["id"] for item in page)
    check("every document is read, once, in pages", sorted(ids) == [f"d{i:02}" for i in range(25)], ids)

    # Queries: scoped to a partition and across them, with parameters and pages.
    in_p1 = list(
        pages.query_items(
            "SELECT VALUE c.id FROM c WHERE c.pk = @pk ORDER BY c.id DESC",
            parameters=[{"name": "@pk", "value": "p1"}],
            partition_key="p1",
        )
    )
    check(
        "a partition's query, ordered",
        in_p1 == [f"d{i:02}" for i in reversed(range(25)) if i % 3 == 1],
        in_p1,
    )
    across = pages.query_items(
        "SELECT c.id, c.pk FROM c WHERE STARTSWITH(c.id, 'd1') OR c.id IN ('d20', 'd21')",
        enable_cross_partition_query=True,
        max_item_count=4,
    )
    seen = []
    page_count = 0
    for page in across.by_page():
        page_count += 1
        seen.extend(row["id"] for row in page)
    check(
        "a query across partitions, in pages",
        sorted(seen) == [f"d{i}" for i in range(10, 22)] and page_count >= 3,
        f"{seen} in {page_count} pages",
    )
    count = list(pages.query_items("SELECT VALUE COUNT(1) FROM c", enable_cross_partition_query=True))
    check("COUNT across partitions", count == [25], count)
    top = list(
        pages.query_items(
            "SELECT TOP 3 VALUE c.id FROM c ORDER BY c.id", enable_cross_partition_query=True
        )
    )
    check("TOP with ORDER BY", top == ["d00", "d01", "d02"], top)
    window = list(
        pages.query_items(
            "SELECT VALUE c.id FROM c ORDER BY c.id OFFSET 5 LIMIT 3",
            enable_cross_partition_query=True,
        )
    )
    check("OFFSET LIMIT", window == ["d05", "d06", "d07"], window)
    check(
        "SELECT * over a JOIN is 400, as Cosmos answers it",
        status_of(
            lambda: list(
                pages.query_items(
                    "SELECT * FROM c JOIN t IN c.tags", enable_cross_partition_query=True
                )
            )
        )
        == 400,
    )

    # The query language beyond one container's items: JOINs, GROUP BY, DISTINCT and
    # subqueries, across partitions and paged.
    query_language_checks(database)
    unique_key_checks(database)
    time_to_live_checks(database)
    vector_checks(database)
    full_text_checks(database)
    hierarchical_key_checks(database)
    computed_property_checks(database)

    # The change feed: from the beginning, resumed from its token, from now.
    change_feed_checks(database)

    # Bad input.
    bad_input_checks(database, carts)

    # Conflicts: one region has none, as a single-region account's feed shows.
    check("a container's conflicts are an empty feed, read or queried",
          list(carts.list_conflicts()) == [] and list(carts.query_conflicts("SELECT * FROM c")) == [])
    check("a conflict is 404", status_of(lambda: carts.get_conflict("none", partition_key="x")) == 404)

    # A wrong key.
    endpoint = connection_string.split("AccountEndpoint=")[1].split(";")[0]
    wrong = "d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXk="
    check(
        "a wrong key is 401",
        status_of(lambda: CosmosClient(endpoint, credential=wrong).get_database_client(name).read())
        == 401,
    )

    database.delete_container("pages")
    check(
        "a deleted container is gone",
        status_of(lambda: pages.read_item("d00", partition_key="p0")) == 404,
    )
    client.delete_database(name)
    check(
        "a deleted database is gone",
        status_of(lambda: client.get_database_client(name).read()) == 404,
    )
    check.done()


def unique_key_checks(database):
    users = database.create_container(
        id="users",
        partition_key=PartitionKey(path="/tenant"),
        unique_key_policy={"uniqueKeys": [{"paths": ["/email"]}, {"paths": ["/first", "/last"]}]},
    )
    check(
        "a container keeps its unique keys",
        users.read()["uniqueKeyPolicy"]["uniqueKeys"][1]["paths"] == ["/first", "/last"],
    )
    users.create_item({"id": "1", "tenant": "a", "email": "x@e", "first": "A", "last": "B"})
    check(
        "a unique key taken in the partition is 409 and writes nothing",
        status_of(lambda: users.create_item({"id": "2", "tenant": "a", "email": "x@e"})) == 409
        and status_of(lambda: users.read_item("2", partition_key="a")) == 404,
    )
    users.create_item({"id": "2", "tenant": "b", "email": "x@e"})
    check("the same values in another partition are free", True)
    users.create_item({"id": "3", "tenant": "a", "email": "y@e", "first": "A", "last": "C"})
    check(
        "a replace, an upsert and a patch onto a taken key are 409",
        status_of(lambda: users.replace_item("3", {"id": "3", "tenant": "a", "email": "x@e"})) == 409
        and status_of(lambda: users.upsert_item({"id": "4", "tenant": "a", "email": "y@e"})) == 409
        and status_of(lambda: users.patch_item(
            "3", partition_key="a", patch_operations=[{"op": "set", "path": "/last", "value": "B"}])) == 409
        and users.read_item("3", partition_key="a")["last"] == "C",
    )
    users.patch_item("1", partition_key="a", patch_operations=[{"op": "set", "path": "/email", "value": "z@e"}])
    users.create_item({"id": "5", "tenant": "a", "email": "x@e"})
    check("a value a document leaves is free again", True)
    check(
        "a path a document lacks counts as null: a second document lacking it is 409",
        status_of(lambda: users.create_item({"id": "6", "tenant": "a", "email": "w@e"})) == 409,
    )
    users.delete_item("5", partition_key="a")
    users.create_item({"id": "6", "tenant": "a", "email": "x@e"})
    check("a deleted document's values are free again", True)
    check(
        "a batch whose documents would share a key is refused whole",
        status_of(lambda: users.execute_item_batch(
            [
                ("create", ({"id": "7", "tenant": "a", "email": "v@e", "first": "Q"},)),
                ("create", ({"id": "8", "tenant": "a", "email": "v@e", "first": "R"},)),
            ],
            partition_key="a",
        )) == 409
        and status_of(lambda: users.read_item("7", partition_key="a")) == 404,
    )
    check(
        "a unique key policy of another shape is 400",
        status_of(lambda: database.create_container(
            id="bad", partition_key=PartitionKey(path="/tenant"),
            unique_key_policy={"uniqueKeys": [{"paths": ["email"]}]})) == 400,
    )


def time_to_live_checks(database):
    short = database.create_container(
        id="short",
        partition_key=PartitionKey(path="/pk"),
        default_ttl=2,
        unique_key_policy={"uniqueKeys": [{"paths": ["/email"]}]},
    )
    check("a container keeps its defaultTtl", short.read()["defaultTtl"] == 2)
    short.create_item({"id": "gone", "pk": "p", "email": "a@e"})
    short.create_item({"id": "kept", "pk": "p", "ttl": -1, "email": "k@e"})
    short.create_item({"id": "longer", "pk": "p", "ttl": 60, "email": "l@e"})
    later = database.create_container(id="later", partition_key=PartitionKey(path="/pk"))
    later.create_item({"id": "old", "pk": "p"})
    later.create_item({"id": "own", "pk": "p", "ttl": 1})
    check(
        "a ttl of 0 is 400, and so is a defaultTtl of 0",
        status_of(lambda: short.create_item({"id": "zero", "pk": "p", "ttl": 0})) == 400
        and status_of(lambda: database.create_container(
            id="zero", partition_key=PartitionKey(path="/pk"), default_ttl=0)) == 400,
    )
    check(
        "an item lives until its time; its ttl shows as written",
        short.read_item("gone", partition_key="p")["id"] == "gone"
        and short.read_item("longer", partition_key="p")["ttl"] == 60
        and later.read_item("own", partition_key="p")["ttl"] == 1,
    )
    # A container given a defaultTtl: it counts for the items it holds already.
    database.replace_container(later, partition_key=PartitionKey(path="/pk"), default_ttl=1)
    time.sleep(2.5)
    check(
        "past its time an item is gone for point reads, queries and the change feed",
        status_of(lambda: short.read_item("gone", partition_key="p")) == 404
        and sorted(short.query_items("SELECT VALUE c.id FROM c", partition_key="p")) == ["kept", "longer"]
        and sorted(i["id"] for i in short.query_items_change_feed(start_time="Beginning")) == ["kept", "longer"],
    )
    check(
        "a defaultTtl given later counts for the items there already",
        status_of(lambda: later.read_item("old", partition_key="p")) == 404
        and list(later.query_items("SELECT VALUE COUNT(1) FROM c", enable_cross_partition_query=True)) == [0],
    )
    short.create_item({"id": "gone", "pk": "p", "email": "b@e"})
    short.create_item({"id": "other", "pk": "p", "email": "a@e"})
    check(
        "a create over an item past its time succeeds, and its unique values are free",
        short.read_item("gone", partition_key="p")["email"] == "b@e",
    )
    try:
        later.execute_item_batch([("read", ("old",))], partition_key="p")
        failed_at = None
    except exceptions.CosmosBatchOperationError as error:
        failed_at = (error.error_index, error.status_code)
    created = later.execute_item_batch([("create", ({"id": "own", "pk": "p", "ttl": -1},))], partition_key="p")
    check(
        "a batch sees an item past its time as absent: a read is 404, a create succeeds",
        failed_at == (0, 404) and created[0]["statusCode"] == 201,
        failed_at,
    )


def vector_checks(database):
    policy = {"vectorEmbeddings": [
        {"path": "/v", "dataType": "float32", "distanceFunction": "euclidean", "dimensions": 2}]}
    indexing = {"vectorIndexes": [{"path": "/v", "type": "diskANN"}],
                "includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/v/*"}]}
    vectors = database.create_container(
        id="vectors", partition_key=PartitionKey(path="/pk"),
        vector_embedding_policy=policy, indexing_policy=indexing)
    check(
        "a container keeps its vector policy and its vector indexes",
        vectors.read()["vectorEmbeddingPolicy"] == policy
        and vectors.read()["indexingPolicy"]["vectorIndexes"] == indexing["vectorIndexes"],
    )
    for id, v in [("near", [1, 0.1]), ("mid", [0.5, 0.5]), ("far", [-1, 0])]:
        vectors.create_item({"id": id, "pk": id[0], "v": v})
    top = list(vectors.query_items(
        "SELECT TOP 2 c.id, VectorDistance(c.v, [1, 0]) AS d FROM c ORDER BY VectorDistance(c.v, [1, 0])",
        enable_cross_partition_query=True))
    check(
        "VectorDistance by the container's function (Euclidean), the nearest first, across partitions",
        [r["id"] for r in top] == ["near", "mid"] and abs(top[0]["d"] - 0.1) < 1e-9,
        top,
    )
    cosine = list(vectors.query_items(
        "SELECT VALUE c.id FROM c ORDER BY VectorDistance(c.v, [1, 0], false, {'distanceFunction': 'cosine'})",
        enable_cross_partition_query=True))
    check("VectorDistance by cosine, the most similar first", cosine == ["near", "mid", "far"], cosine)
    check(
        "a vector policy of another shape is 400",
        status_of(lambda: database.create_container(
            id="badvectors", partition_key=PartitionKey(path="/pk"),
            vector_embedding_policy={"vectorEmbeddings": [{"path": "/v", "distanceFunction": "hamming", "dimensions": 2}]})) == 400,
    )


def full_text_checks(database):
    policy = {"defaultLanguage": "en-US", "fullTextPaths": [{"path": "/text", "language": "en-US"}]}
    indexing = {"fullTextIndexes": [{"path": "/text"}], "includedPaths": [{"path": "/*"}]}
    texts = database.create_container(
        id="texts", partition_key=PartitionKey(path="/pk"),
        full_text_policy=policy, indexing_policy=indexing)
    check("a container keeps its full-text policy", texts.read()["fullTextPolicy"] == policy)
    for id, text, v in [
        ("once", "a bike for the city and the road and more words here", [0, 1]),
        ("twice", "bike bike", [1, 0]),
        ("other", "a boat on the lake", [0.9, 0.1]),
        ("both", "a mountain bike", [0.7, 0.7]),
    ]:
        texts.create_item({"id": id, "pk": id[0], "text": text, "v": v})

    def query(text):
        return list(texts.query_items(text, enable_cross_partition_query=True))

    found = query("SELECT VALUE c.id FROM c WHERE FullTextContainsAny(c.text, 'mountain', 'boat')")
    check("FullTextContainsAny across partitions", sorted(found) == ["both", "other"], found)
    ranked = query("SELECT VALUE c.id FROM c ORDER BY RANK FullTextScore(c.text, 'bike')")
    check("ORDER BY RANK FullTextScore: BM25, the most relevant first", ranked == ["twice", "both", "once", "other"], ranked)
    hybrid = query("SELECT TOP 2 VALUE c.id FROM c ORDER BY RANK RRF(FullTextScore(c.text, 'bike'), VectorDistance(c.v, [1, 0]))")
    check("hybrid search: RRF of BM25 and VectorDistance", hybrid == ["twice", "both"], hybrid)
    check(
        "FullTextScore outside ORDER BY RANK is 400",
        status_of(lambda: query("SELECT FullTextScore(c.text, 'bike') AS s FROM c")) == 400,
    )


def hierarchical_key_checks(database):
    sessions = database.create_container(
        id="sessions",
        partition_key=PartitionKey(path=["/tenant", "/user", "/session"], kind="MultiHash"),
    )
    check("a hierarchical key's container keeps its paths and kind",
          sessions.read()["partitionKey"]["kind"] == "MultiHash"
          and sessions.read()["partitionKey"]["paths"] == ["/tenant", "/user", "/session"])
    for tenant, user, session in [("t1", "u1", "s1"), ("t1", "u1", "s2"), ("t1", "u2", "s1"), ("t2", "u1", "s1")]:
        sessions.create_item({"id": f"{tenant}-{user}-{session}", "tenant": tenant, "user": user, "session": session, "n": 0})
    key = ["t1", "u1", "s2"]
    read = sessions.read_item("t1-u1-s2", partition_key=key)
    sessions.replace_item("t1-u1-s2", {**read, "n": 1}, etag=read["_etag"], match_condition=MatchConditions.IfNotModified)
    sessions.patch_item("t1-u1-s2", partition_key=key, patch_operations=[{"op": "incr", "path": "/n", "value": 1}])
    check(
        "point reads and writes with the whole key; a stale tag is 412; the key's paths cannot be patched",
        sessions.read_item("t1-u1-s2", partition_key=key)["n"] == 2
        and status_of(lambda: sessions.replace_item("t1-u1-s2", read, etag=read["_etag"],
                                                     match_condition=MatchConditions.IfNotModified)) == 412
        and status_of(lambda: sessions.read_item("t1-u1-s2", partition_key=["t1", "u1", "s1"])) == 404
        and status_of(lambda: sessions.patch_item(
            "t1-u1-s2", partition_key=key, patch_operations=[{"op": "set", "path": "/user", "value": "x"}])) == 400,
    )

    def ids(**options):
        return sorted(sessions.query_items("SELECT VALUE c.id FROM c", **options))

    check("a query scoped to a tenant (a prefix of the key)", ids(partition_key=["t1"]) == ["t1-u1-s1", "t1-u1-s2", "t1-u2-s1"], ids(partition_key=["t1"]))
    check("a query scoped to a tenant's user", ids(partition_key=["t1", "u1"]) == ["t1-u1-s1", "t1-u1-s2"], ids(partition_key=["t1", "u1"]))
    check("a query scoped to the whole key", ids(partition_key=["t2", "u1", "s1"]) == ["t2-u1-s1"])
    check("a query across the container", len(ids(enable_cross_partition_query=True)) == 4)
    done = sessions.execute_item_batch(
        [("upsert", ({"id": "t2-u1-s1", "tenant": "t2", "user": "u1", "session": "s1", "n": 5},)),
         ("read", ("t2-u1-s1",))],
        partition_key=["t2", "u1", "s1"],
    )
    check("a transactional batch on a whole key", done[1]["resourceBody"]["n"] == 5, done)
    feed = [d["id"] for d in sessions.query_items_change_feed(start_time="Beginning", partition_key=["t1"])]
    check("the change feed of a tenant (a prefix)", sorted(feed) == ["t1-u1-s1", "t1-u1-s2", "t1-u2-s1"], feed)
    sessions.delete_item("t1-u2-s1", partition_key=["t1", "u2", "s1"])
    check("a delete with the whole key", ids(partition_key=["t1"]) == ["t1-u1-s1", "t1-u1-s2"])


def query_language_checks(database):
    families = database.create_container("families", partition_key=PartitionKey(path="/id"))
    families.create_item({"id": "AndersenFamily", "address": {"state": "WA"},
                          "children": [{"firstName": "Henriette", "grade": 5, "pets": [{"givenName": "Fluffy"}]}]})
    families.create_item({"id": "WakefieldFamily", "address": {"state": "NY"},
                          "children": [{"givenName": "Jesse", "grade": 1,
                                        "pets": [{"givenName": "Goofy"}, {"givenName": "Shadow"}]},
                                       {"givenName": "Lisa", "grade": 8}]})
    families.create_item({"id": "MillerFamily", "address": {"state": "NY"}, "children": []})

    def query(text, **options):
        return list(families.query_items(text, enable_cross_partition_query=True, **options))

    joined = query("SELECT f.id, p.givenName AS pet FROM f JOIN c IN f.children JOIN p IN c.pets")
    check("JOIN across partitions", sorted(r["pet"] for r in joined) == ["Fluffy", "Goofy", "Shadow"], joined)
    paged = query("SELECT VALUE c.grade FROM f JOIN c IN f.children", max_item_count=1)
    check("a JOIN's rows paged one by one", sorted(paged) == [1, 5, 8], paged)
    grouped = query("SELECT f.address.state, COUNT(1) AS n FROM f GROUP BY f.address.state")
    check(
        "GROUP BY across partitions, whole groups",
        sorted((g["state"], g["n"]) for g in grouped) == [("NY", 2), ("WA", 1)],
        grouped,
    )
    states = query("SELECT DISTINCT VALUE f.address.state FROM f")
    check("DISTINCT across partitions", sorted(states) == ["NY", "WA"], states)
    older = query("SELECT VALUE f.id FROM f WHERE EXISTS(SELECT VALUE c FROM c IN f.children WHERE c.grade > 5)")
    check("an EXISTS subquery", older == ["WakefieldFamily"], older)
    counts = query("SELECT f.id, (SELECT VALUE COUNT(1) FROM c IN f.children) AS n FROM f")
    check("a scalar subquery", sorted((c["id"], c["n"]) for c in counts)
          == [("AndersenFamily", 1), ("MillerFamily", 0), ("WakefieldFamily", 2)], counts)
    total = query("SELECT VALUE SUM(ARRAY_LENGTH(f.children)) FROM f")
    check("an aggregate of a function, across partitions", total == [3], total)
    none = query("SELECT VALUE DateTimeAdd('dd', 1, '2020-02-28T00:00:00Z')")
    check("a query without FROM", none == ["2020-02-29T00:00:00.0000000Z"], none)
    shaped = query("SELECT f.id, f.address.state AS place FROM f WHERE f.id = 'MillerFamily'")
    check("a projection's properties in the selection's order", [list(r) for r in shaped] == [["id", "place"]], shaped)
    newest = query("SELECT VALUE [YEAR('2024-10-14'), SUBSTRINGAFTER('a::b', '::'), IS_DATETIME('2024-13-01')]")
    check("the reference's newest functions", newest == [[2024, "b", False]], newest)


def change_feed_checks(database):
    feed = database.create_container("feed", partition_key=PartitionKey(path="/pk"))
    for i in range(5):
        feed.create_item({"id": f"f{i}", "pk": f"p{i % 2}", "n": i})
    first = [d["id"] for d in feed.query_items_change_feed(start_time="Beginning")]
    check("the change feed from the beginning, in write order", first == [f"f{i}" for i in range(5)], first)
    token = feed.client_connection.last_response_headers["etag"]
    feed.upsert_item({"id": "f1", "pk": "p1", "n": 100})
    feed.create_item({"id": "f9", "pk": "p1", "n": 9})
    feed.delete_item("f3", partition_key="p1")
    since = [(d["id"], d["n"]) for d in feed.query_items_change_feed(continuation=token)]
    check("resumed from its token, what changed since, latest versions", since == [("f1", 100), ("f9", 9)], since)
    token = feed.client_connection.last_response_headers["etag"]
    check("nothing new is nothing", list(feed.query_items_change_feed(continuation=token)) == [])
    check("from now is nothing yet", list(feed.query_items_change_feed(start_time="Now")) == [])
    scoped = [d["id"] for d in feed.query_items_change_feed(start_time="Beginning", partition_key="p0")]
    check("a feed scoped to a partition key holds that partition's changes", scoped == ["f0", "f2", "f4"], scoped)
    versions = database.create_container(
        "versions", partition_key=PartitionKey(path="/pk"), change_feed_policy={"retentionDuration": 60})
    check("from now in all-versions mode is nothing yet",
          list(versions.query_items_change_feed(mode="AllVersionsAndDeletes", start_time="Now")) == [])
    token = versions.client_connection.last_response_headers["etag"]
    versions.create_item({"id": "v", "pk": "p", "n": 1})
    versions.upsert_item({"id": "v", "pk": "p", "n": 2})
    versions.delete_item("v", partition_key="p")
    every = [(i["metadata"]["operationType"], (i.get("current") or {}).get("n"))
             for i in versions.query_items_change_feed(mode="AllVersionsAndDeletes", continuation=token)]
    check("the all-versions-and-deletes feed: each write and the delete, in order",
          every == [("create", 1), ("replace", 2), ("delete", None)], every)


def long_id_checks(carts):
    """Ids up to Azure's 1,023 bytes of UTF-8: created, read, replaced with the tag, queried,
    deleted; one byte more is 400."""
    for long_id in ["a" * 1023, "\u20ac" * 341, "tenant:42|path:" + "p" * 1008]:
        created = carts.create_item({"id": long_id, "user": "ann", "n": 1})
        read = carts.read_item(long_id, partition_key="ann")
        replaced = carts.replace_item(
            long_id, {"id": long_id, "user": "ann", "n": 2},
            etag=read["_etag"], match_condition=MatchConditions.IfNotModified,
        )
        found = list(carts.query_items(
            "SELECT VALUE c.n FROM c WHERE c.id = @id",
            parameters=[{"name": "@id", "value": long_id}], partition_key="ann",
        ))
        carts.delete_item(long_id, partition_key="ann")
        check(
            f"an id of {len(long_id.encode())} bytes is served",
            created["id"] == long_id and replaced["n"] == 2 and found == [2],
        )
    check(
        "an id of 1,024 bytes is 400",
        status_of(lambda: carts.create_item({"id": "a" * 1024, "user": "ann"})) == 400,
    )


def computed_property_checks(database):
    """Computed properties, given as the SDK gives them (`computed_properties`), read by queries
    as stored properties are and left out of `SELECT *`; one of a form Azure refuses is 400."""
    people = database.create_container(
        "people", partition_key=PartitionKey(path="/pk"),
        computed_properties=[{"name": "cp_lower", "query": "SELECT VALUE LOWER(c.name) FROM c"}])
    for n, name in enumerate(["Zoe", "ann", "Bob"]):
        people.create_item({"id": str(n), "pk": "a", "name": name})
    ordered = list(people.query_items("SELECT VALUE c.cp_lower FROM c ORDER BY c.cp_lower", partition_key="a"))
    whole = list(people.query_items("SELECT * FROM c WHERE c.cp_lower = 'zoe'", partition_key="a"))
    check(
        "a computed property is queried, filtered and sorted on, and left out of SELECT *",
        ordered == ["ann", "bob", "zoe"] and [d["id"] for d in whole] == ["0"] and "cp_lower" not in whole[0],
    )
    where = [{"name": "cp", "query": "SELECT VALUE c.name FROM c WHERE c.n > 1"}]
    check(
        "a computed property whose query has a WHERE is refused 400",
        status_of(lambda: database.create_container(
            "bad_cp", partition_key=PartitionKey(path="/pk"), computed_properties=where)) == 400,
    )


def bad_input_checks(database, carts):
    long_id_checks(carts)
    check(
        "a document over 2 MB is 413",
        status_of(lambda: carts.create_item({"id": "big", "user": "ann", "x": "y" * (2 << 20)})) == 413,
    )
    check(
        "a hierarchical partition key of four paths is refused, clearly",
        status_of(
            lambda: database.create_container(
                "h", partition_key=PartitionKey(path=["/a", "/b", "/c", "/d"], kind="MultiHash")
            )
        )
        == 400,
    )


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:3]))
