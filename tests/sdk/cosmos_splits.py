"""Partition key ranges that split and merge under Azure's Python SDK (azure-cosmos), unchanged:
a change feed read to its end, the container's range split (then split again and merged) by
this server's administrative call, writes made meanwhile, and the feed resumed from its
continuation: every change after it comes exactly once, none lost, none repeated; a query
across partitions counts every document once through it; a request that names a range gone is
410 with substatus 1002.

Usage: cosmos_splits.py ENDPOINT KEY   (exits 1 on the first failed check)
"""

import base64
import hashlib
import hmac
import json
import sys
import urllib.parse
import urllib.request
import uuid
from email.utils import formatdate

from checks import Checks
from azure.cosmos import CosmosClient, PartitionKey

check = Checks("python cosmos splits")


def signed(endpoint, key, method, kind, link, path, body=None, headers=None):
    """A request signed with the account key, as the SDKs sign one: (status, headers, JSON)."""
    date = formatdate(usegmt=True)
    text = f"{method.lower()}\n{kind}\n{link}\n{date.lower()}\n\n"
    signature = base64.b64encode(hmac.new(base64.b64decode(key), text.encode(), hashlib.sha256).digest()).decode()
    token = urllib.parse.quote(f"type=master&ver=1.0&sig={signature}", safe="")
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(endpoint.rstrip("/") + path, data=data, method=method)
    for name, value in {"authorization": token, "x-ms-date": date, "x-ms-version": "2018-12-31", **(headers or {})}.items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, dict(answer.headers), json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read() or b"null")


def read_feed(container, continuation=None):
    """Every change from `continuation` (none: the beginning) to now: the ids, and where to go on."""
    options = {"continuation": continuation} if continuation else {"start_time": "Beginning"}
    pager = container.query_items_change_feed(**options).by_page()
    ids = []
    for page in pager:
        ids.extend(item["id"] for item in page)
    return ids, pager.continuation_token


def main(endpoint, key):
    client = CosmosClient(endpoint, key)
    db_id = "db" + uuid.uuid4().hex[:8]
    database = client.create_database(db_id)
    container = database.create_container("c", partition_key=PartitionKey(path="/pk"))
    link = f"dbs/{db_id}/colls/c"

    def ranges():
        status, _, body = signed(endpoint, key, "GET", "pkranges", link, f"/{link}/pkranges")
        return status, body["PartitionKeyRanges"] if status == 200 else body

    def change(body):
        return signed(endpoint, key, "POST", "pkranges", link, f"/{link}/pkranges", body)

    first = [f"a{i}" for i in range(200)]
    for i, id_ in enumerate(first):
        container.create_item({"id": id_, "pk": f"p{i}"})
    seen, token = read_feed(container)
    check("the feed from the beginning has the 200 first writes", sorted(seen) == sorted(first), len(seen))

    split = change({"split": "0"})
    check("the split answers the ranges after it", split[0] == 200 and len(split[2]["PartitionKeyRanges"]) == 2, split[:1])
    status, listed = ranges()
    check("after a split the container has two ranges, each naming its parent",
          [(r["id"], r["parents"]) for r in listed] == [("1", ["0"]), ("2", ["0"])], listed)
    gone = signed(endpoint, key, "GET", "docs", link, f"/{link}/docs",
                  headers={"a-im": "Incremental feed", "x-ms-documentdb-partitionkeyrangeid": "0"})
    check("a request that names the range split is 410, substatus 1002",
          (gone[0], gone[1].get("x-ms-substatus")) == (410, "1002"), gone[:2])

    second = [f"b{i}" for i in range(200)]
    for i, id_ in enumerate(second):
        container.create_item({"id": id_, "pk": f"q{i}"})
    for id_ in first[:50]:
        item = container.read_item(id_, partition_key=f"p{first.index(id_)}")
        item["touched"] = True
        container.replace_item(id_, item)
    seen, token = read_feed(container, token)
    want = second + first[:50]
    check("resumed across the split: every change after it, once", sorted(seen) == sorted(want),
          (len(seen), len(set(seen)), len(want)))

    change({"split": "1"})
    change({"merge": ["4", "2"]})
    merged = ranges()[1]
    check("split again and merged: two ranges cover the keys",
          [(r["id"], r["parents"]) for r in merged] == [("3", ["1"]), ("5", ["4", "2"])], merged)
    third = [f"c{i}" for i in range(100)]
    for i, id_ in enumerate(third):
        container.upsert_item({"id": id_, "pk": f"r{i}"})
    seen, token = read_feed(container, token)
    check("resumed across a split and a merge: the new changes, once", sorted(seen) == sorted(third),
          (len(seen), len(set(seen))))
    seen, _ = read_feed(container, token)
    check("and nothing after them", seen == [], seen)

    ids = [item["id"] for item in container.query_items("SELECT c.id FROM c", enable_cross_partition_query=True)]
    check("a query across partitions sees every document once", sorted(ids) == sorted(first + second + third),
          (len(ids), len(set(ids))))
    count = list(container.query_items("SELECT VALUE COUNT(1) FROM c", enable_cross_partition_query=True))
    check("and counts them once", count == [500], count)
    refused = change({"merge": ["3", "3"]})
    check("merging a range with itself is refused 400", refused[0] == 400, refused[:1])
    check("a split without the account key is refused", signed(endpoint, "AAAA", "POST", "pkranges", link,
          f"/{link}/pkranges", {"split": "3"})[0] == 401)
    client.delete_database(database)
    check.done()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
