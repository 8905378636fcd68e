"""Server-side JavaScript through Azure's Python SDK (azure-cosmos), unchanged: stored
procedures created, listed, replaced, deleted and executed (`scripts.execute_stored_procedure`),
each run one transaction on its partition (a throw, a callback's error thrown on, a run out of
time or memory writes nothing; concurrent runs never lose an update); `isAccepted` once a run's
operations are spent, the caller continuing where it stopped; pre- and post-triggers in the
transaction of the write they surround; user-defined functions in SELECT, WHERE and ORDER BY.

The procedures are this project's, written against the server API Azure documents
(getContext, getCollection, createDocument, readDocument, queryDocuments, replaceDocument,
getResponse().setBody), in the shapes of its samples: a bulk import chaining createDocument
callbacks that answers how many it created, and a tryCreate that stops once not accepted.

Usage: cosmos_scripts.py CONNECTION_STRING [--figures] [--worker]   (exits 1 on the first failed
check; --worker: the server is a Worker, whose isolate takes one request at a time)
"""

import concurrent.futures
import statistics
import sys
import threading
import time
import uuid

from checks import Checks, status_of
from azure.cosmos import CosmosClient, PartitionKey

check = Checks("python cosmos scripts")

# Creates each document of `docs` in turn, each from the callback of the one before; answers
# how many it created, stopping where the server no longer accepts (the caller goes on from
# there).
BULK = """
function bulk(docs) {
    var collection = getContext().getCollection();
    var link = collection.getSelfLink();
    var created = 0;
    if (!docs) throw new Error("no documents given");
    if (docs.length === 0) { getContext().getResponse().setBody(0); return; }
    next();
    function next() {
        var accepted = collection.createDocument(link, docs[created], function (err) {
            if (err) throw err;
            created += 1;
            if (created < docs.length) next();
            else getContext().getResponse().setBody(created);
        });
        if (!accepted) getContext().getResponse().setBody(created);
    }
}
"""

# Reads a counter document and writes it back one higher: the read-modify-write that loses
# updates anywhere it is not one transaction.
INCREMENT = """
function increment(id) {
    var collection = getContext().getCollection();
    collection.readDocument(collection.getSelfLink() + "/docs/" + id, {}, function (err, doc) {
        if (err) throw err;
        doc.count += 1;
        collection.replaceDocument(doc._self, doc, { etag: doc._etag }, function (err2, written) {
            if (err2) throw err2;
            getContext().getResponse().setBody(written.count);
        });
    });
}
"""

# Creates three documents, then fails: none of them may stay.
THROWS = """
function half(pk) {
    var collection = getContext().getCollection();
    var link = collection.getSelfLink();
    var made = 0;
    for (var i = 0; i < 3; i++) {
        collection.createDocument(link, { id: "half" + i, pk: pk }, function (err) {
            if (err) throw err;
            made += 1;
            if (made === 3) throw new Error("changed my mind after " + made);
        });
    }
}
"""

QUERY = """
function total(pk) {
    var collection = getContext().getCollection();
    var query = { query: "SELECT VALUE SUM(c.n) FROM c WHERE c.pk = @pk", parameters: [{ name: "@pk", value: pk }] };
    var accepted = collection.queryDocuments(collection.getSelfLink(), query, {}, function (err, found) {
        if (err) throw err;
        console.log("summed", found.length, "values");
        getContext().getResponse().setBody({ total: found[0] });
    });
    if (!accepted) throw new Error("not accepted");
}
"""

SPIN = "function spin() { while (true) {} }"
BOMB = "function bomb() { var s = 'x'; while (true) { s = s + s; } }"
# Structures nested deeper than the engine's native stack holds, each of which stopped the
# whole server before a run's engine had a process of its own.
NESTED = "var a = []; for (var i = 0; i < 100000; i++) { a = [a]; }"
DEEP = {
    "String() of an array nested 100,000 deep": f"function deep() {{ {NESTED} return String(a).length; }}",
    "JSON.stringify of it": f"function deep() {{ {NESTED} return JSON.stringify(a).length; }}",
    "setBody of it": f"function deep() {{ {NESTED} getContext().getResponse().setBody(a); }}",
    "a Proxy of a Proxy 100,000 deep, read": "function deep() { var p = {}; "
    "for (var i = 0; i < 100000; i++) { p = new Proxy(p, {}); } return p.x; }",
}
ELSEWHERE = """
function elsewhere() {
    var collection = getContext().getCollection();
    collection.createDocument(collection.getSelfLink(), { id: "x", pk: "another" }, function (err) { if (err) throw err; });
}
"""

STAMP = """
function stamp() {
    var request = getContext().getRequest();
    var doc = request.getBody();
    doc.stamped = request.getOperationType();
    request.setBody(doc);
}
"""

TALLY = """
function tally() {
    var collection = getContext().getCollection();
    var written = getContext().getResponse().getBody();
    var link = collection.getSelfLink() + "/docs/tally-" + written.pk;
    collection.readDocument(link, {}, function (err, doc) {
        if (err && err.number !== 404) throw err;
        if (err) {
            collection.createDocument(collection.getSelfLink(), { id: "tally-" + written.pk, pk: written.pk, count: 1 }, function (e) { if (e) throw e; });
        } else {
            doc.count += 1;
            collection.replaceDocument(doc._self, doc, function (e) { if (e) throw e; });
        }
    });
}
"""

VETO = "function veto() { throw new Error('vetoed'); }"


def procedure(container, name, body):
    container.scripts.create_stored_procedure(body={"id": name, "body": body})


def run(container, name, pk, params=None, **options):
    return container.scripts.execute_stored_procedure(sproc=name, partition_key=pk, params=params, **options)


def deep_runs(container):
    """Runs that overflow the engine's native stack end with 400, and the server serves on."""
    for what, body in DEEP.items():
        procedure(container, "deep", body)
        status = status_of(lambda: run(container, "deep", "s"))
        container.scripts.delete_stored_procedure("deep")
        check(f"{what}: the run is answered 400", status == 400, status)
        check("and the server still answers", container.read_item("counter", partition_key="k")["id"] == "counter")
    brackets = "[" * 100000 + "]" * 100000
    status = status_of(lambda: procedure(container, "deep", f"function deep() {{ return {brackets}; }}"))
    check("a body nesting 100,000 brackets is refused 400 when created", status == 400, status)
    container.scripts.create_user_defined_function({"id": "deep", "body": f"function deep(n) {{ {NESTED} return String(a); }}"})
    status = status_of(lambda: list(container.query_items("SELECT VALUE udf.deep(c.n) FROM c", partition_key="bulk")))
    check("a UDF that overflows the engine's stack fails its query 400", status == 400, status)
    container.scripts.delete_user_defined_function("deep")
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        counts = list(pool.map(lambda n: run(container, "bulk", f"after{n}", [[{"id": "a", "pk": f"after{n}"}]]), range(8)))
    check("runs after them are served as before", counts == [1] * 8, counts)


def main(connection_string, figures, worker):
    client = CosmosClient.from_connection_string(connection_string)
    database = client.create_database("db" + uuid.uuid4().hex[:8])
    container = database.create_container("c", partition_key=PartitionKey(path="/pk"))

    # Stored procedures as resources.
    procedure(container, "bulk", BULK)
    listed = [p["id"] for p in container.scripts.list_stored_procedures()]
    check("a created procedure is listed", listed == ["bulk"], listed)
    read = container.scripts.get_stored_procedure("bulk")
    check("it is read back with its body and links", read["body"] == BULK and read["_self"].rstrip("/").endswith("/sprocs/bulk"), read)
    check("creating it again is 409", status_of(lambda: procedure(container, "bulk", BULK)) == 409)
    check("a body that is no function is refused 400", status_of(
        lambda: container.scripts.create_stored_procedure(body={"id": "bad", "body": "3"})) == 400)
    check("a body that is not JavaScript is refused 400", status_of(
        lambda: container.scripts.create_stored_procedure(body={"id": "bad", "body": "function ("})) == 400)

    # Azure's per-container limits, one past each refused: 100 procedures, 50 UDFs.
    for n in range(99):
        procedure(container, f"p{n}", "function p() {}")
    status = status_of(lambda: procedure(container, "p99", "function p() {}"))
    check("the 101st stored procedure of a container is refused 403", status == 403, status)
    for n in range(50):
        container.scripts.create_user_defined_function({"id": f"u{n}", "body": "function u(x) { return x; }"})
    status = status_of(lambda: container.scripts.create_user_defined_function({"id": "u50", "body": "function u(x) { return x; }"}))
    check("the 51st user-defined function is refused 403", status == 403, status)
    for n in range(99):
        container.scripts.delete_stored_procedure(f"p{n}")
    for n in range(50):
        container.scripts.delete_user_defined_function(f"u{n}")

    # The bulk import: 100 documents in one run.
    docs = [{"id": f"d{i}", "pk": "bulk", "n": i} for i in range(100)]
    started = time.perf_counter()
    created = run(container, "bulk", "bulk", [docs])
    took = time.perf_counter() - started
    check("a bulk import of 100 documents answers 100", created == 100, created)
    stored = list(container.query_items("SELECT VALUE COUNT(1) FROM c", partition_key="bulk"))
    check("all 100 are stored", stored == [100], stored)
    if figures:
        times = []
        for round_ in range(5):
            batch = [{"id": f"f{round_}-{i}", "pk": f"fig{round_}", "n": i} for i in range(100)]
            started = time.perf_counter()
            run(container, "bulk", f"fig{round_}", [batch])
            times.append(time.perf_counter() - started)
        print(f"figure: 100-document bulk import, median {statistics.median(times) * 1000:.1f} ms "
              f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f}) over 5 runs")

    # Past a run's operations the server stops accepting: the caller goes on where it stopped.
    many = [{"id": f"m{i}", "pk": "many", "n": 1} for i in range(1500)]
    first = run(container, "bulk", "many", [many])
    check("a run stops accepting after 1,000 operations, answering what it did", first == 1000, first)
    rest = run(container, "bulk", "many", [many[first:]])
    count = list(container.query_items("SELECT VALUE COUNT(1) FROM c", partition_key="many"))
    check("the caller continues with the rest: all 1,500 stored once", rest == 500 and count == [1500], (rest, count))

    # A throw writes nothing; a collection error thrown on answers its own status.
    procedure(container, "half", THROWS)
    status = status_of(lambda: run(container, "half", "h", ["h"]))
    check("a procedure that throws is answered 400", status == 400, status)
    left = list(container.query_items("SELECT * FROM c", partition_key="h"))
    check("and nothing it created is kept", left == [], left)
    status = status_of(lambda: run(container, "bulk", "bulk", [[{"id": "new", "pk": "bulk"}, {"id": "d5", "pk": "bulk"}]]))
    check("a create over an existing id, thrown on, is answered 409", status == 409, status)
    check("and the document created before it is not kept", status_of(
        lambda: container.read_item("new", partition_key="bulk")) == 404)
    procedure(container, "elsewhere", ELSEWHERE)
    check("a write to another partition than the request's is refused 400", status_of(
        lambda: run(container, "elsewhere", "here")) == 400)

    # Reads, replaces and queries inside a run; concurrent runs lose no update.
    container.create_item({"id": "counter", "pk": "k", "count": 0})
    procedure(container, "increment", INCREMENT)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: run(container, "increment", "k", ["counter"]), range(24)))
    final = container.read_item("counter", partition_key="k")["count"]
    check("24 concurrent increments by procedure: 24, none lost", final == 24, final)
    check("each run answered a distinct count", sorted(answers) == list(range(1, 25)), answers)
    procedure(container, "total", QUERY)
    answer = run(container, "total", "bulk", ["bulk"], enable_script_logging=True)
    check("a query inside a run sees the partition", answer == {"total": sum(range(100))}, answer)
    log = container.scripts.client_connection.last_response_headers.get("x-ms-documentdb-script-log-results")
    check("console.log comes back when logging is asked for", log is not None and "summed" in log, log)

    # Bounds: a run that spins is stopped with 408, one that eats memory with 413, and other
    # requests are served meanwhile.
    procedure(container, "spin", SPIN)
    outcome = {}

    def spin():
        began = time.perf_counter()
        outcome["status"] = status_of(lambda: run(container, "spin", "s"))
        outcome["took"] = time.perf_counter() - began

    spinner = threading.Thread(target=spin)
    spinner.start()
    time.sleep(0.1)
    began = time.perf_counter()
    container.read_item("counter", partition_key="k")
    read_took = time.perf_counter() - began
    spinner.join()
    check("while(true) is stopped: 408", outcome["status"] == 408, outcome)
    check("within a few seconds", outcome["took"] < 10, outcome)
    if figures:
        print(f"figure: while(true) stopped with 408 after {outcome['took']:.2f} s")
    # A Worker's isolate is one thread: a request it takes meanwhile waits for the run's bound.
    check("a read meanwhile is answered at once", read_took < (10 if worker else 0.5), read_took)
    procedure(container, "callback", "function callback() { [1, 2].forEach(function () { while (true) {} }); }")
    check("a spin in code a built-in calls back is stopped too: 408", status_of(
        lambda: run(container, "callback", "s")) == 408)
    procedure(container, "bomb", BOMB)
    status = status_of(lambda: run(container, "bomb", "s"))
    check("a string that doubles forever is stopped: 413", status == 413, status)
    check("the server still answers", container.read_item("counter", partition_key="k")["id"] == "counter")
    # A Worker runs the engine in its own isolate, which bounds its stack itself.
    if not worker:
        deep_runs(container)

    # Replaced and deleted.
    container.scripts.replace_stored_procedure("spin", {"id": "spin", "body": "function spin() { getContext().getResponse().setBody('calm'); }"})
    check("a replaced procedure runs its new body", run(container, "spin", "s") == "calm")
    container.scripts.delete_stored_procedure("spin")
    check("a deleted procedure is 404", status_of(lambda: run(container, "spin", "s")) == 404)

    # Triggers, in the transaction of the write.
    container.scripts.create_trigger({"id": "stamp", "body": STAMP, "triggerType": "Pre", "triggerOperation": "All"})
    container.scripts.create_trigger({"id": "tally", "body": TALLY, "triggerType": "Post", "triggerOperation": "Create"})
    container.scripts.create_trigger({"id": "veto", "body": VETO, "triggerType": "Post", "triggerOperation": "All"})
    made = container.create_item({"id": "t1", "pk": "t"}, pre_trigger_include="stamp", post_trigger_include="tally")
    check("a pre-trigger changes the document written", made.get("stamped") == "Create", made)
    container.create_item({"id": "t2", "pk": "t"}, post_trigger_include="tally")
    tally = container.read_item("tally-t", partition_key="t")
    check("a post-trigger's writes land with the write", tally["count"] == 2, tally)
    status = status_of(lambda: container.create_item({"id": "t3", "pk": "t"}, post_trigger_include="veto"))
    check("a post-trigger that throws fails the write", status == 400, status)
    check("and the write is not kept", status_of(lambda: container.read_item("t3", partition_key="t")) == 404)
    replaced = container.replace_item("t1", {"id": "t1", "pk": "t"}, pre_trigger_include="stamp")
    check("a pre-trigger sees a replace as Replace", replaced.get("stamped") == "Replace", replaced)
    status = status_of(lambda: container.replace_item("t1", {"id": "t1", "pk": "t"}, post_trigger_include="tally"))
    check("a trigger for creates named on a replace is refused 400", status == 400, status)
    status = status_of(lambda: container.create_item({"id": "t4", "pk": "t"}, pre_trigger_include=["stamp", "stamp"]))
    check("two pre-triggers on one write are refused 400 (Azure: one of each)", status == 400, status)
    triggers = sorted(t["id"] for t in container.scripts.list_triggers())
    check("triggers are listed", triggers == ["stamp", "tally", "veto"], triggers)

    # User-defined functions in queries.
    container.scripts.create_user_defined_function({"id": "tax", "body": "function tax(n) { return n * 1.5; }"})
    container.scripts.create_user_defined_function({"id": "boom", "body": "function boom(n) { throw new Error('no'); }"})
    values = list(container.query_items(
        "SELECT VALUE udf.tax(c.n) FROM c WHERE udf.tax(c.n) > 145 ORDER BY udf.tax(c.n) DESC", partition_key="bulk"))
    check("a UDF in SELECT, WHERE and ORDER BY", values == [148.5, 147.0, 145.5], values)
    if figures:
        times = []
        for _ in range(5):
            started = time.perf_counter()
            list(container.query_items("SELECT VALUE udf.tax(c.n) FROM c", partition_key="bulk"))
            times.append(time.perf_counter() - started)
        print(f"figure: a query calling a UDF on each of 100 documents, median {statistics.median(times) * 1000:.1f} ms "
              f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f}) over 5 runs")
    status = status_of(lambda: list(container.query_items("SELECT VALUE udf.boom(c.n) FROM c", partition_key="bulk")))
    check("a UDF that throws fails the query 400", status == 400, status)
    status = status_of(lambda: list(container.query_items("SELECT VALUE udf.none(c.n) FROM c", partition_key="bulk")))
    check("a UDF the container lacks is refused 400", status == 400, status)
    calls = " + ".join(f"udf.tax{n}(c.n)" for n in range(11))
    status = status_of(lambda: list(container.query_items(f"SELECT VALUE {calls} FROM c", partition_key="bulk")))
    check("a query calling 11 user-defined functions is refused 400 (Azure: 10)", status == 400, status)
    container.scripts.create_user_defined_function({"id": "spin", "body": "function spin(n) { while (true) {} }"})
    status = status_of(lambda: list(container.query_items("SELECT VALUE udf.spin(c.n) FROM c", partition_key="bulk")))
    check("a UDF that spins fails the query 408", status == 408, status)
    functions = sorted(f["id"] for f in container.scripts.list_user_defined_functions())
    check("UDFs are listed", functions == ["boom", "spin", "tax"], functions)

    client.delete_database(database)
    check.done()


if __name__ == "__main__":
    main(sys.argv[1], "--figures" in sys.argv[2:], "--worker" in sys.argv[2:])
