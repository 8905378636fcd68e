"""Pessimistic locking across two tables with a blob lease, as Azure's concurrency guide tells
it: a worker leases a blob named after the partition key, reads and updates that partition's
entities in both tables, and releases; a second worker gets 409 while the lease is held; a
worker that dies holding it (SIGKILL) blocks the next one only until the lease expires.

Usage: table_lock.py CONNECTION_STRING   (exits 1 on the first failed check; prints a tally)
       table_lock.py --hold CONNECTION_STRING PARTITION   (internal: take the lease, then die)
"""

import os
import signal
import subprocess
import sys
import time
import uuid

from checks import Checks
from azure.core.exceptions import HttpResponseError, ResourceExistsError
from azure.data.tables import TableServiceClient, UpdateMode
from azure.storage.blob import BlobServiceClient

LEASE_SECONDS = 15
check = Checks("table lock")


def lock_blob(connection, partition):
    blobs = BlobServiceClient.from_connection_string(connection)
    container = blobs.get_container_client("locks")
    try:
        container.create_container()
    except ResourceExistsError:
        pass
    blob = container.get_blob_client(partition)
    try:
        blob.upload_blob(b"", overwrite=False)
    except HttpResponseError as error:
        # There already: 409, or 412 while another worker's lease is on it.
        if error.status_code not in (409, 412):
            raise
    return blob


def work(tables, names, partition, worker):
    """Reads and updates the partition's entities in both tables (the work a lock guards)."""
    for name in names:
        table = tables.get_table_client(name)
        entity = table.get_entity(partition, "total")
        entity["count"] += 1
        entity["last"] = worker
        table.update_entity(entity, mode=UpdateMode.REPLACE)


def main(connection):
    tables = TableServiceClient.from_connection_string(connection)
    suffix = uuid.uuid4().hex[:8]
    names = [f"orders{suffix}", f"lines{suffix}"]
    partition = f"order{suffix}"
    for name in names:
        tables.create_table(name).create_entity(
            {"PartitionKey": partition, "RowKey": "total", "count": 0, "last": ""})

    first = lock_blob(connection, partition).acquire_lease(lease_duration=LEASE_SECONDS)
    check("the first worker takes the lease", first.id is not None)
    try:
        lock_blob(connection, partition).acquire_lease(lease_duration=LEASE_SECONDS)
        check("a second worker is refused while it is held", False)
    except HttpResponseError as error:
        check("a second worker gets 409 while it is held", error.status_code == 409,
              error.status_code)
    work(tables, names, partition, "first")
    first.release()
    second = lock_blob(connection, partition).acquire_lease(lease_duration=LEASE_SECONDS)
    check("once released, the second worker takes it", second.id is not None)
    work(tables, names, partition, "second")
    second.release()
    for name in names:
        entity = tables.get_table_client(name).get_entity(partition, "total")
        check(f"both workers' updates are in {name}",
              entity["count"] == 2 and entity["last"] == "second", dict(entity))

    # A holder killed outright: the lease outlives it until it expires, then the next proceeds.
    died = subprocess.run([sys.executable, __file__, "--hold", connection, partition])
    check("a worker takes the lease and is killed holding it", died.returncode == -signal.SIGKILL,
          died.returncode)
    started = time.monotonic()
    refused = 0
    while True:
        try:
            third = lock_blob(connection, partition).acquire_lease(lease_duration=LEASE_SECONDS)
            break
        except HttpResponseError as error:
            if error.status_code != 409:
                check("while its lease lasts, the next worker gets 409", False, error.status_code)
            refused += 1
            time.sleep(1)
        if time.monotonic() - started > LEASE_SECONDS + 10:
            check("the dead worker's lease expires", False)
    waited = time.monotonic() - started
    check("the dead worker's lease blocked the next one until it expired",
          refused > 0 and LEASE_SECONDS - 3 <= waited <= LEASE_SECONDS + 5, (refused, waited))
    work(tables, names, partition, "third")
    third.release()
    counts = [tables.get_table_client(n).get_entity(partition, "total")["count"] for n in names]
    check("the next worker proceeded in both tables", counts == [3, 3], counts)
    for name in names:
        tables.delete_table(name)
    check.done()


def hold(connection, partition):
    lock_blob(connection, partition).acquire_lease(lease_duration=LEASE_SECONDS)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    if sys.argv[1] == "--hold":
        hold(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1])
