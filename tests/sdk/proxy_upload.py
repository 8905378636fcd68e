"""Azure's Python SDK writing through `ifmatch proxy` to a private container, every request
signed with the account's key (Shared Key signs each request for itself, so the proxy cannot
ask the origin for the current version with it: the origin judges the conditions). Uploads in
one request and in blocks, create-only (`If-None-Match: *`, the SDK's default), `If-Match`
with a fresh and a stale tag, a lease, a delete; each as at the storage directly.

Usage: proxy_upload.py PROXY_CONNECTION_STRING
"""

import os
import sys

from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceModifiedError
from azure.storage.blob import BlobServiceClient

service = BlobServiceClient.from_connection_string(
    sys.argv[1], max_single_put_size=1024 * 1024, max_block_size=1024 * 1024
)
container = service.get_container_client("private")
container.create_container()
passed = 0


def ok(what):
    global passed
    passed += 1


data = os.urandom(3 * 1024 * 1024)
container.upload_blob("blocks.bin", data)  # in blocks, create-only
ok("created in blocks, create-only")
try:
    container.upload_blob("blocks.bin", data)
    raise AssertionError("a create-only upload replaced a blob")
except ResourceExistsError:
    ok("create-only refused where the blob exists")
blob = container.get_blob_client("blocks.bin")
assert blob.download_blob().readall() == data
ok("read back")

blob.upload_blob(b"one request", overwrite=True)
tag = blob.get_blob_properties().etag
blob.upload_blob(b"two", overwrite=True, etag=tag, match_condition=MatchConditions.IfNotModified)
ok("If-Match with the current tag")
try:
    blob.upload_blob(
        b"three", overwrite=True, etag=tag, match_condition=MatchConditions.IfNotModified
    )
    raise AssertionError("a stale If-Match wrote")
except ResourceModifiedError:
    ok("If-Match with a stale tag refused")
assert blob.download_blob().readall() == b"two"

lease = blob.acquire_lease(15)
blob.upload_blob(b"leased", overwrite=True, lease=lease)
lease.release()
ok("written under a lease")
blob.delete_blob()
assert not blob.exists()
ok("deleted")
print(f"python proxy writes: {passed} passed")
