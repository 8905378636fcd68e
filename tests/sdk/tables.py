"""The Table service through Azure's own Python SDK (azure-data-tables), unchanged, with the
connection string a user brings from Azurite: tables, entities and their EDM types, ETags and
If-Match (412 UpdateConditionNotSatisfied, no A-B-A), 409s, queries with filters, projections
and pages, 32 writers racing on one tag, and shared access signatures (account, and table with
a key range), and batches (all or none).

Usage: tables.py CONNECTION_STRING   (exits 1 on the first failed check; prints a tally)
"""

import sys
import threading
import uuid
from datetime import datetime, timedelta, timezone

from checks import Checks, at_once, refused
from azure.core import MatchConditions
from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.data.tables import (
    AccountSasPermissions,
    EdmType,
    EntityProperty,
    ResourceTypes,
    TableClient,
    TableSasPermissions,
    TableServiceClient,
    TableTransactionError,
    UpdateMode,
    generate_account_sas,
    generate_table_sas,
)

check = Checks("python tables")


def main(connection):
    service = TableServiceClient.from_connection_string(connection)
    fields = dict(part.split("=", 1) for part in connection.strip(";").split(";"))
    account, key = fields["AccountName"], fields["AccountKey"]
    endpoint = fields["TableEndpoint"]
    name = "t" + uuid.uuid4().hex[:12]
    table = service.create_table(name)
    check("create a table", table.table_name == name)
    ok, why = refused(lambda: service.create_table(name), 409, "TableAlreadyExists")
    check("creating it again is 409 TableAlreadyExists", ok, why)
    check("Query Tables lists it", name in [t.name for t in service.list_tables()])
    listed = [t.name for t in service.query_tables("TableName eq @n", parameters={"n": name})]
    check("Query Tables with a filter", listed == [name], listed)

    # Every EDM type round-trips with its annotation.
    when = datetime(2026, 11, 24, 8, 30, 15, 123456, tzinfo=timezone.utc)
    guid = uuid.uuid4()
    typed = {
        "PartitionKey": "types",
        "RowKey": "1",
        "big": EntityProperty(2**53 + 1, EdmType.INT64),
        "small": 42,
        "ratio": 0.25,
        "flag": True,
        "text": "ünïcode 'quoted'",
        "when": when,
        "id": guid,
        "blob": b"\x00\x01\xfe\xff",
    }
    table.create_entity(typed)
    back = table.get_entity("types", "1")
    check("Int64 as a string, back as Int64", back["big"].value == 2**53 + 1
          and back["big"].edm_type == EdmType.INT64, back["big"])
    check("Int32", back["small"] == 42 and isinstance(back["small"], int))
    check("Double", back["ratio"] == 0.25)
    check("Boolean", back["flag"] is True)
    check("String", back["text"] == "ünïcode 'quoted'")
    check("DateTime", back["when"] == when, back["when"])
    check("Guid", back["id"] == guid, back["id"])
    check("Binary", back["blob"] == b"\x00\x01\xfe\xff", back["blob"])

    # ETags and If-Match.
    entity = {"PartitionKey": "p", "RowKey": "r", "count": 1}
    created = table.create_entity(entity)
    first = created["etag"]
    check("an insert answers its ETag", first.startswith('W/"datetime\''), first)
    got = table.get_entity("p", "r")
    check("a read answers the same ETag", got.metadata["etag"] == first)
    ok, why = refused(lambda: table.create_entity(entity), 409, "EntityAlreadyExists")
    check("inserting an existing key is 409 EntityAlreadyExists", ok, why)
    second = table.update_entity({"PartitionKey": "p", "RowKey": "r", "count": 2},
                                 mode=UpdateMode.REPLACE, etag=first,
                                 match_condition=MatchConditions.IfNotModified)["etag"]
    check("an update with the current ETag succeeds, with a new one", second != first)
    ok, why = refused(lambda: table.update_entity(
        {"PartitionKey": "p", "RowKey": "r", "count": 99}, mode=UpdateMode.REPLACE,
        etag=first, match_condition=MatchConditions.IfNotModified), 412,
        "UpdateConditionNotSatisfied")
    check("an update with a stale ETag is 412 UpdateConditionNotSatisfied", ok, why)
    check("and changes nothing", table.get_entity("p", "r")["count"] == 2)
    # A-B-A: the value comes back, its tag does not.
    third = table.update_entity({"PartitionKey": "p", "RowKey": "r", "count": 1},
                                mode=UpdateMode.REPLACE, etag=second,
                                match_condition=MatchConditions.IfNotModified)["etag"]
    check("writing an earlier value back gives a tag never seen", third not in (first, second))
    ok, why = refused(lambda: table.update_entity(
        {"PartitionKey": "p", "RowKey": "r", "count": 5}, mode=UpdateMode.MERGE,
        etag=first, match_condition=MatchConditions.IfNotModified), 412,
        "UpdateConditionNotSatisfied")
    check("a client holding the first A's tag gets 412 (no A-B-A)", ok, why)
    merged = table.update_entity({"PartitionKey": "p", "RowKey": "r", "extra": "x"},
                                 mode=UpdateMode.MERGE, etag=third,
                                 match_condition=MatchConditions.IfNotModified)["etag"]
    after = table.get_entity("p", "r")
    check("a merge keeps the other properties", after["count"] == 1 and after["extra"] == "x")
    table.update_entity({"PartitionKey": "p", "RowKey": "r", "only": 1}, mode=UpdateMode.REPLACE)
    check("an update without a tag (If-Match: *) replaces",
          set(table.get_entity("p", "r").keys()) == {"PartitionKey", "RowKey", "only"})
    ok, why = refused(lambda: table.update_entity({"PartitionKey": "p", "RowKey": "none"}),
                      404, "ResourceNotFound")
    check("updating a missing entity is 404 ResourceNotFound", ok, why)
    table.upsert_entity({"PartitionKey": "p", "RowKey": "u", "a": 1}, mode=UpdateMode.MERGE)
    table.upsert_entity({"PartitionKey": "p", "RowKey": "u", "b": 2}, mode=UpdateMode.MERGE)
    got = table.get_entity("p", "u")
    check("insert or merge creates, then merges", got["a"] == 1 and got["b"] == 2)
    table.upsert_entity({"PartitionKey": "p", "RowKey": "u", "c": 3}, mode=UpdateMode.REPLACE)
    check("insert or replace replaces", "a" not in table.get_entity("p", "u"))
    ok, why = refused(lambda: table.delete_entity("p", "r", etag=merged,
                                                  match_condition=MatchConditions.IfNotModified),
                      412, "UpdateConditionNotSatisfied")
    check("a delete with a stale ETag is 412", ok, why)
    current = table.get_entity("p", "r").metadata["etag"]
    table.delete_entity("p", "r", etag=current, match_condition=MatchConditions.IfNotModified)
    ok, why = refused(lambda: table.get_entity("p", "r"), 404, "ResourceNotFound")
    check("a delete with the current ETag deletes", ok, why)

    # 32 writers holding one tag: exactly one wins.
    table.create_entity({"PartitionKey": "race", "RowKey": "1", "winner": -1})
    tag = table.get_entity("race", "1").metadata["etag"]
    outcomes = []
    lock = threading.Lock()

    def writer(i):
        client = TableClient.from_connection_string(connection, name)
        try:
            client.update_entity({"PartitionKey": "race", "RowKey": "1", "winner": i},
                                 mode=UpdateMode.REPLACE, etag=tag,
                                 match_condition=MatchConditions.IfNotModified)
            result = ("won", i)
        except HttpResponseError as error:
            result = ("lost", error.status_code)
        with lock:
            outcomes.append(result)

    at_once(writer, 32, indexed=True)
    winners = [i for what, i in outcomes if what == "won"]
    losers = [s for what, s in outcomes if what == "lost"]
    check("32 writers with one tag: exactly one wins", len(winners) == 1, outcomes)
    check("the others get 412", losers == [412] * 31, losers)
    check("the entity holds the winner's write",
          table.get_entity("race", "1")["winner"] == winners[0])

    # Queries: filters, projections, pages.
    for i in range(25):
        table.create_entity({"PartitionKey": "q", "RowKey": f"{i:03}", "n": i, "odd": i % 2 == 1})
    found = list(table.query_entities("PartitionKey eq @pk and n ge @n and odd eq true",
                                      parameters={"pk": "q", "n": 10}))
    check("a filter with parameters", [e["n"] for e in found] == list(range(11, 25, 2)),
          [e["n"] for e in found])
    projected = list(table.query_entities("PartitionKey eq 'q' and n lt 3", select=["n"]))
    check("$select keeps what was asked", [set(e.keys()) for e in projected] == [{"n"}] * 3,
          projected)
    pages = table.list_entities(results_per_page=10).by_page()
    sizes, keys = [], []
    for page in pages:
        page = list(page)
        sizes.append(len(page))
        keys += [(e["PartitionKey"], e["RowKey"]) for e in page]
    check("pages of 10 over every entity, none skipped or repeated",
          sizes == [10, 10, 8] and len(keys) == len(set(keys)) == 25 + 3,
          (sizes, len(keys)))
    ok, why = refused(lambda: list(table.query_entities("n eq")), 400, "InvalidInput")
    check("a malformed filter is 400", ok, why)

    # Entity group transactions: all or none.
    done = table.submit_transaction(
        [("create", {"PartitionKey": "b", "RowKey": f"{i:03}", "n": i}) for i in range(100)])
    check("a batch of 100 inserts applies", len(done) == 100
          and len(list(table.query_entities("PartitionKey eq 'b'"))) == 100)
    stale_tag = done[5]["etag"]
    table.update_entity({"PartitionKey": "b", "RowKey": "005", "n": -5})
    try:
        table.submit_transaction([
            ("update", {"PartitionKey": "b", "RowKey": "001", "n": 1001}),
            ("upsert", {"PartitionKey": "b", "RowKey": "new", "n": 0}),
            ("update", {"PartitionKey": "b", "RowKey": "005", "n": 1005},
             {"etag": stale_tag, "match_condition": MatchConditions.IfNotModified}),
        ])
        check("a batch with a stale tag fails", False)
    except TableTransactionError as error:
        check("a batch with a stale tag fails at that operation (index 2, 412)",
              error.index == 2 and error.status_code == 412, (error.index, error.status_code))
    check("and applies none of it", table.get_entity("b", "001")["n"] == 1
          and not list(table.query_entities("PartitionKey eq 'b' and RowKey eq 'new'")))
    mixed = table.submit_transaction([
        ("delete", {"PartitionKey": "b", "RowKey": "000"}),
        ("upsert", {"PartitionKey": "b", "RowKey": "001", "extra": True}, {"mode": "merge"}),
        ("update", {"PartitionKey": "b", "RowKey": "002", "n": 2002}, {"mode": "replace"}),
    ])
    merged = table.get_entity("b", "001")
    check("a batch deletes, merges and replaces", len(mixed) == 3 and merged["n"] == 1
          and merged["extra"] is True and table.get_entity("b", "002")["n"] == 2002)
    for row in range(100):
        table.delete_entity("b", f"{row:03}")

    # Shared access signatures.
    credential = AzureNamedKeyCredential(account, key)
    expiry = datetime.now(timezone.utc) + timedelta(hours=1)
    ranged = generate_table_sas(credential, name, permission=TableSasPermissions(read=True),
                                expiry=expiry, start_pk="q", end_pk="q")
    sas_table = TableClient(endpoint, name, credential=AzureSasCredential(ranged))
    check("a table SAS reads inside its key range", sas_table.get_entity("q", "004")["n"] == 4)
    ok, why = refused(lambda: sas_table.get_entity("race", "1"), 403, "")
    check("and is refused outside it", ok, why)
    inside = list(sas_table.list_entities())
    check("a query with it returns only its range",
          {e["PartitionKey"] for e in inside} == {"q"} and len(inside) == 25, len(inside))
    ok, why = refused(lambda: sas_table.create_entity({"PartitionKey": "q", "RowKey": "new"}),
                      403, "AuthorizationPermissionMismatch")
    check("a read-only table SAS cannot insert", ok, why)
    whole = generate_account_sas(credential,
                                 resource_types=ResourceTypes(service=True, container=True,
                                                              object=True),
                                 permission=AccountSasPermissions(read=True, list=True),
                                 expiry=expiry)
    sas_service = TableServiceClient(endpoint, credential=AzureSasCredential(whole))
    check("an account SAS lists tables", name in [t.name for t in sas_service.list_tables()])
    sas_reader = sas_service.get_table_client(name)
    check("and reads entities", sas_reader.get_entity("q", "000")["n"] == 0)
    ok, why = refused(lambda: sas_reader.delete_entity("q", "000"), 403,
                      "AuthorizationPermissionMismatch")
    check("but deletes nothing without d", ok, why)
    bad = TableClient(endpoint, name, credential=AzureNamedKeyCredential(account, "A" * 88))
    ok, why = refused(lambda: bad.get_entity("q", "000"), 403, "AuthenticationFailed")
    check("a wrong key is 403 AuthenticationFailed", ok, why)

    service.delete_table(name)
    ok, why = refused(lambda: table.get_entity("q", "000"), 404, "TableNotFound")
    check("a deleted table's entities are gone: 404 TableNotFound", ok, why)
    check.done()


if __name__ == "__main__":
    main(sys.argv[1])
