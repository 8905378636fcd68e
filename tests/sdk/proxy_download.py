"""Azure's Python SDK through `ifmatch proxy`: a blob downloaded in parts (`x-ms-range`, 1 MiB
each) before anything is stored, again (each part from the store, as the 206 that answered it
first), after a plain GET stored it whole (the parts then come from the whole), and with each
part's MD5 (which only the origin sends: those pass the cache); then signed with the account's
key, which the proxy must not break.
Every download must give the bytes written.

Usage: proxy_download.py ORIGIN_CONNECTION_STRING PROXY_ACCOUNT_URL
"""

import os
import re
import sys
import urllib.request

from azure.storage.blob import BlobClient, BlobServiceClient, ContentSettings

origin, proxy = sys.argv[1], sys.argv[2]
container = BlobServiceClient.from_connection_string(origin).get_container_client("downloads")
container.create_container(public_access="blob")
data = os.urandom(3 * 1024 * 1024 + 5)
settings = ContentSettings(cache_control="public, max-age=3600")
container.upload_blob("big.bin", data, content_settings=settings)

passed = 0


def download(**options):
    """The blob through the proxy in parts, and the `Cache-Status` of each part."""
    statuses = []
    blob = BlobClient(
        account_url=proxy,
        container_name="downloads",
        blob_name="big.bin",
        max_single_get_size=1024 * 1024,
        max_chunk_get_size=1024 * 1024,
    )
    hook = lambda response: statuses.append(response.http_response.headers.get("cache-status"))
    got = blob.download_blob(max_concurrency=2, raw_response_hook=hook, **options).readall()
    return got, statuses


def check(name, got, statuses, want):
    global passed
    assert got == data, f"{name}: {len(got)} bytes, not the {len(data)} written"
    assert len(statuses) == 4, f"{name}: {statuses}"
    assert all(want in (s or "") for s in statuses), f"{name}: {statuses}"
    passed += 1


check("in parts, nothing stored", *download(), "fwd=")
check("in parts again, from the parts stored", *download(), "hit")
with urllib.request.urlopen(f"{proxy}/downloads/big.bin") as whole:
    assert "stored" in whole.headers["cache-status"], whole.headers["cache-status"]
    assert whole.read() == data
check("in parts, from the stored whole", *download(), "hit")
check("in parts with their MD5", *download(validate_content=True), "fwd=bypass")

# Signed with the account's key (Shared Key signs `x-ms-range`, `Range` and the conditions):
# the proxy sends each request on as it came.
signed_connection = re.sub(r"BlobEndpoint=[^;]*", f"BlobEndpoint={proxy}", origin)
signed = BlobServiceClient.from_connection_string(
    signed_connection, max_single_get_size=1024 * 1024, max_chunk_get_size=1024 * 1024
).get_container_client("downloads")


def signed_download(name):
    statuses = []
    hook = lambda response: statuses.append(response.http_response.headers.get("cache-status"))
    got = signed.download_blob(name, max_concurrency=2, raw_response_hook=hook).readall()
    return got, statuses


check("signed, in parts, from the store (public)", *signed_download("big.bin"), "hit")
# Stale at once: fetched again for a signed request, never revalidated (the conditions a
# revalidation adds would break the signature).
settings = ContentSettings(cache_control="public, max-age=0")
container.upload_blob("stale.bin", data, content_settings=settings)
for _ in range(2):
    got, statuses = signed_download("stale.bin")
    check("signed, stale", got, statuses, "fwd=")
    assert not any("fwd=stale" in (s or "") for s in statuses), statuses
print(f"python proxy downloads: {passed} passed")
