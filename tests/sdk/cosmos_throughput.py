"""Provisioned throughput and request units through Azure's Python SDK (azure-cosmos), unchanged,
against `ifmatch serve --cosmos-throughput enforce`: a container's and a database's offers given,
read and replaced as production code does (`offer_throughput`, `ThroughputProperties`,
`get_throughput`, `replace_throughput`), Azure's limits refused; every answer's request charge;
and writes past a container's 400 RU/s held back with 429s that the SDK's own retry policy
waits out: every write lands, in the time the throughput allows.

Usage: cosmos_throughput.py CONNECTION_STRING   (exits 1 on the first failed check; prints a tally)
"""

import collections
import sys
import time
import uuid

from checks import Checks, status_of
from azure.cosmos import CosmosClient, PartitionKey, ThroughputProperties

check = Checks("python cosmos throughput")


def main(connection_string):
    client = CosmosClient.from_connection_string(connection_string)
    database = client.create_database("db" + uuid.uuid4().hex[:8])
    key = PartitionKey(path="/pk")

    container = database.create_container("manual", partition_key=key, offer_throughput=400)
    check("a container's throughput is what it was made with", container.get_throughput().offer_throughput == 400)
    container.replace_throughput(500)
    check("replaced, it is the new one", container.get_throughput().offer_throughput == 500)
    check("450 RU/s (not a multiple of 100) is refused 400", status_of(lambda: container.replace_throughput(450)) == 400)
    check("300 RU/s (under Azure's least) is refused 400", status_of(lambda: container.replace_throughput(300)) == 400)
    # Azure keeps a resource at a hundredth of the most it was ever provisioned at least.
    container.replace_throughput(60000)
    check("after 60,000 RU/s, 500 is refused 400 (600 is the least now)", status_of(lambda: container.replace_throughput(500)) == 400)
    container.replace_throughput(600)
    offer = container.get_throughput()
    check("600 is taken, and the offer says the most it ever had",
          offer.offer_throughput == 600
          and offer.properties["content"]["offerMinimumThroughputParameters"]["maxThroughputEverProvisioned"] == 60000,
          offer.properties["content"])

    scaled = database.create_container(
        "scaled", partition_key=key, offer_throughput=ThroughputProperties(auto_scale_max_throughput=4000))
    check("an autoscale container's maximum is read back", scaled.get_throughput().auto_scale_max_throughput == 4000)
    check("an autoscale maximum of 1500 is refused 400", status_of(
        lambda: database.create_container(
            "bad", partition_key=key, offer_throughput=ThroughputProperties(auto_scale_max_throughput=1500))) == 400)

    shared = client.create_database("db" + uuid.uuid4().hex[:8], offer_throughput=1000)
    check("a database's shared throughput is read back", shared.get_throughput().offer_throughput == 1000)
    inner = shared.create_container("inner", partition_key=key)
    inner.create_item({"id": "x", "pk": "a"})
    check("a container of a shared database draws on it", inner.read_item("x", partition_key="a")["id"] == "x")

    # Every answer says what it cost: a write of a small item about 5 RU, its read 1.
    container.create_item({"id": "one", "pk": "a"})
    written = float(container.client_connection.last_response_headers["x-ms-request-charge"])
    container.read_item("one", partition_key="a")
    read = float(container.client_connection.last_response_headers["x-ms-request-charge"])
    check("a small write costs 4.95 RU, its point read 1", (written, read) == (4.95, 1.0))

    # 400 RU/s, two writes of 1.5 MB (about 940 RU each): the first takes the budget 540 RU
    # below, so the second is answered 429 with the time to wait (1.35 s), whatever the
    # client's speed, and the SDK waits and retries it.
    held = database.create_container("held", partition_key=key, offer_throughput=400)
    # Each answer the SDK's transport gets, its retried ones too.
    statuses = collections.Counter()
    seen = lambda response: statuses.update([response.http_response.status_code])  # noqa: E731
    started = time.monotonic()
    for n in range(2):
        held.create_item({"id": str(n), "pk": "a", "pad": "x" * (1536 * 1024)}, raw_response_hook=seen)
    elapsed = time.monotonic() - started
    count = held.query_items("SELECT VALUE COUNT(1) FROM c", partition_key="a")
    check("every write lands through the SDK's retries", list(count) == [2] and statuses[201] == 2)
    check(f"the server held the second back ({statuses[429]} answers 429, retried)", statuses[429] > 0)
    check(f"after the first's debt is paid at 400 RU/s ({elapsed:.2f} s; 1.34 s at least)", elapsed >= 1.3)
    check.done()


if __name__ == "__main__":
    main(sys.argv[1])
