"""scripts/bench-scripts' load, against one server: prints "bulk udf plain one", each the median
in ms of 10 runs, alternating."""

import statistics
import sys
import time
import uuid

sys.path.insert(0, "tests/sdk")
from cosmos_scripts import BULK  # noqa: E402
from azure.cosmos import CosmosClient, PartitionKey  # noqa: E402


def timed(samples, action):
    began = time.perf_counter()
    action()
    samples.append(time.perf_counter() - began)


def main(connection_string):
    client = CosmosClient.from_connection_string(connection_string)
    database = client.create_database("db" + uuid.uuid4().hex[:8])
    container = database.create_container("c", partition_key=PartitionKey(path="/pk"))
    scripts = container.scripts
    scripts.create_stored_procedure(body={"id": "bulk", "body": BULK})
    scripts.create_stored_procedure(body={"id": "one", "body": "function one() { getContext().getResponse().setBody(1); }"})
    scripts.create_user_defined_function({"id": "tax", "body": "function tax(n) { return n * 1.5; }"})
    scripts.execute_stored_procedure(sproc="bulk", partition_key="q", params=[[{"id": f"d{i}", "pk": "q", "n": i} for i in range(100)]])
    bulk, udf, plain, one = [], [], [], []
    for r in range(10):
        batch = [{"id": f"d{i}", "pk": f"b{r}", "n": i} for i in range(100)]
        timed(bulk, lambda: scripts.execute_stored_procedure(sproc="bulk", partition_key=f"b{r}", params=[batch]))
        timed(udf, lambda: list(container.query_items("SELECT VALUE udf.tax(c.n) FROM c", partition_key="q")))
        timed(plain, lambda: list(container.query_items("SELECT VALUE c.n * 1.5 FROM c", partition_key="q")))
        timed(one, lambda: scripts.execute_stored_procedure(sproc="one", partition_key="x"))
    print(" ".join(f"{statistics.median(s) * 1000:.2f}" for s in (bulk, udf, plain, one)))
    client.delete_database(database)


if __name__ == "__main__":
    main(sys.argv[1])
