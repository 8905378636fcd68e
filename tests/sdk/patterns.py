"""The patterns of Azure's concurrency docs, run with the official Python SDK (azure-storage-blob)
against any Blob endpoint, unchanged: ifmatch (native or Worker) or Azurite.

Usage: python patterns.py CONNECTION_STRING [--public-check]
Prints one line per check and a tally; exits 1 if any check failed. IFMATCH_ONLY=a,b runs only
the checks whose names start with one of those (the fleets' tests run the data protection ones).
"""

import hashlib
import os
import random
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
import uuid
from datetime import datetime, timedelta, timezone

from checks import at_once
from azure.core import MatchConditions
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.storage.blob import (
    AccountSasPermissions,
    BlobClient,
    BlobSasPermissions,
    BlobServiceClient,
    ContainerClient,
    ContainerSasPermissions,
    ResourceTypes,
    generate_account_sas,
    generate_blob_sas,
    generate_container_sas,
)

CONNECTION = sys.argv[1]
SERVICE = BlobServiceClient.from_connection_string(CONNECTION)
ACCOUNT = SERVICE.account_name
KEY = SERVICE.credential.account_key
results = []


ONLY = tuple(p for p in os.environ.get("IFMATCH_ONLY", "").split(",") if p)


def check(name):
    def run(fn):
        if ONLY and not name.startswith(ONLY):
            return fn
        try:
            fn()
            results.append((name, None))
            print(f"ok   {name}", flush=True)
        except Exception as error:  # noqa: BLE001 - every failure is reported, none stops the run
            results.append((name, error))
            print(f"FAIL {name}: {type(error).__name__}: {error}", flush=True)
            traceback.print_exc(limit=3)
        return fn

    return run


def fresh_container(**kwargs):
    name = "c" + uuid.uuid4().hex[:20]
    SERVICE.create_container(name, **kwargs)
    return SERVICE.get_container_client(name)


def error_code(error):
    return getattr(error, "error_code", None)


def expect(exception, fn, code=None):
    try:
        fn()
    except exception as error:
        if code is not None and error_code(error) != code:
            raise AssertionError(f"expected {code}, got {error_code(error)}: {error}") from error
        return error
    raise AssertionError(f"expected {exception.__name__}")


@check("containers: create, exists, properties, delete (a container, not a blob)")
def _():
    container = fresh_container()
    assert container.exists()
    assert container.get_container_properties().name == container.container_name
    expect(ResourceExistsError, lambda: SERVICE.create_container(container.container_name), "ContainerAlreadyExists")
    container.upload_blob("a.txt", b"hello")
    container.delete_container()
    assert not container.exists()
    expect(ResourceNotFoundError, lambda: container.get_blob_client("a.txt").download_blob().readall())


@check("optimistic concurrency: If-Match with the ETag read, 412 after another writer")
def _():
    blob = fresh_container().get_blob_client("doc.txt")
    blob.upload_blob(b"v1")
    etag = blob.get_blob_properties().etag
    blob.upload_blob(b"v2", overwrite=True, etag=etag, match_condition=MatchConditions.IfNotModified)
    expect(
        ResourceModifiedError,
        lambda: blob.upload_blob(b"lost", overwrite=True, etag=etag, match_condition=MatchConditions.IfNotModified),
        "ConditionNotMet",
    )
    assert blob.download_blob().readall() == b"v2"


@check("conditional download: If-None-Match with the current ETag is 304")
def _():
    blob = fresh_container().get_blob_client("photo.jpg")
    etag = blob.upload_blob(b"\xff\xd8 a photo")["etag"]
    # Azure's 304 carries x-ms-error-code: ConditionNotMet, from which this SDK raises
    # ResourceModifiedError rather than its generated layer's ResourceNotModifiedError: what it
    # does against Azure. The status is what the caller checks.
    error = expect(
        HttpResponseError,
        lambda: blob.download_blob(etag=etag, match_condition=MatchConditions.IfModified).readall(),
    )
    assert error.status_code == 304, error.status_code
    blob.upload_blob(b"\xff\xd8 another", overwrite=True)
    assert blob.download_blob(etag=etag, match_condition=MatchConditions.IfModified).readall() == b"\xff\xd8 another"


@check("create-only: upload without overwrite is 409 BlobAlreadyExists the second time")
def _():
    blob = fresh_container().get_blob_client("once")
    blob.upload_blob(b"first")
    expect(ResourceExistsError, lambda: blob.upload_blob(b"second"), "BlobAlreadyExists")
    assert blob.download_blob().readall() == b"first"


@check("a counter under contention: If-Match, exponential backoff with jitter, exact total")
def _():
    blob = fresh_container().get_blob_client("counter")
    blob.upload_blob(b"0")
    workers, increments = 8, 10
    retries = []

    def work():
        client = BlobClient.from_connection_string(CONNECTION, blob.container_name, blob.blob_name)
        for _ in range(increments):
            delay = 0.01
            while True:
                download = client.download_blob()
                value = int(download.readall())
                try:
                    client.upload_blob(
                        str(value + 1).encode(),
                        overwrite=True,
                        etag=download.properties.etag,
                        match_condition=MatchConditions.IfNotModified,
                    )
                    break
                except ResourceModifiedError:
                    retries.append(1)
                    time.sleep(delay * random.uniform(0.5, 1.5))
                    delay = min(delay * 2, 0.5)

    at_once(work, workers)
    total = int(blob.download_blob().readall())
    assert total == workers * increments, f"{total} != {workers * increments}"
    print(f"     ({len(retries)} retries after 412)")


@check("lease-guarded writes: without the lease 412 LeaseIdMissing, with it 201")
def _():
    blob = fresh_container().get_blob_client("guarded")
    blob.upload_blob(b"v1")
    lease = blob.acquire_lease(lease_duration=15)
    expect(HttpResponseError, lambda: blob.upload_blob(b"intruder", overwrite=True), "LeaseIdMissing")
    expect(
        HttpResponseError,
        lambda: blob.upload_blob(b"wrong", overwrite=True, lease=str(uuid.uuid4())),
        "LeaseIdMismatchWithBlobOperation",
    )
    blob.upload_blob(b"v2", overwrite=True, lease=lease)
    lease.release()
    assert blob.download_blob().readall() == b"v2"


@check("a container lease guards delete")
def _():
    container = fresh_container()
    lease = container.acquire_lease(lease_duration=15)
    expect(HttpResponseError, lambda: container.delete_container(), "LeaseIdMissing")
    assert container.exists()
    container.delete_container(lease=lease)
    assert not container.exists()


@check("the whole lease lifecycle: acquire, renew, change, break, release")
def _():
    blob = fresh_container().get_blob_client("cycle")
    blob.upload_blob(b"x")
    lease = blob.acquire_lease(lease_duration=15)
    props = blob.get_blob_properties()
    assert (props.lease.state, props.lease.status, props.lease.duration) == ("leased", "locked", "fixed")
    expect(ResourceExistsError, lambda: blob.acquire_lease(lease_duration=15), "LeaseAlreadyPresent")
    lease.renew()
    new_id = str(uuid.uuid4())
    lease.change(proposed_lease_id=new_id)
    assert lease.id == new_id
    seconds = lease.break_lease(lease_break_period=1)
    assert 0 <= seconds <= 1, seconds
    assert blob.get_blob_properties().lease.state == "breaking"
    time.sleep(1.5)
    assert blob.get_blob_properties().lease.state == "broken"
    again = blob.acquire_lease(lease_duration=-1)
    assert blob.get_blob_properties().lease.duration == "infinite"
    again.release()
    assert blob.get_blob_properties().lease.state == "available"


@check("leader election: one leader among candidates, another after it resigns")
def _():
    container = fresh_container()
    container.upload_blob("leader", b"")
    winners, lock = [], threading.Lock()

    def candidate(i):
        client = BlobClient.from_connection_string(CONNECTION, container.container_name, "leader")
        try:
            lease = client.acquire_lease(lease_duration=15)
            with lock:
                winners.append((i, lease))
        except ResourceExistsError:
            pass

    at_once(candidate, 6, indexed=True)
    assert len(winners) == 1, winners
    winners[0][1].release()
    follower = container.get_blob_client("leader").acquire_lease(lease_duration=15)
    follower.release()


@check("a lock: a lease as a mutex around a read-modify-write, no lost update")
def _():
    container = fresh_container()
    container.upload_blob("state", b"0")
    container.upload_blob("lock", b"")

    def work():
        client = ContainerClient.from_connection_string(CONNECTION, container.container_name)
        lock = client.get_blob_client("lock")
        state = client.get_blob_client("state")
        for _ in range(5):
            while True:
                try:
                    lease = lock.acquire_lease(lease_duration=15)
                    break
                except ResourceExistsError:
                    time.sleep(random.uniform(0.005, 0.02))
            value = int(state.download_blob().readall())
            state.upload_blob(str(value + 1).encode(), overwrite=True)  # no condition: the lock orders
            lease.release()

    at_once(work, 4)
    assert int(container.get_blob_client("state").download_blob().readall()) == 20


@check("a work queue by leases: each item processed exactly once")
def _():
    container = fresh_container()
    items = [f"item-{i:03d}" for i in range(24)]
    for item in items:
        container.upload_blob(item, item.encode())
    processed, lock = [], threading.Lock()

    def worker():
        client = ContainerClient.from_connection_string(CONNECTION, container.container_name)
        for blob in client.list_blobs():
            item = client.get_blob_client(blob.name)
            try:
                lease = item.acquire_lease(lease_duration=15)
            except (ResourceExistsError, ResourceNotFoundError):
                continue  # another worker has it, or has finished it
            with lock:
                processed.append(blob.name)
            item.delete_blob(lease=lease)

    at_once(worker, 4)
    assert sorted(processed) == items, (len(processed), len(set(processed)))


@check("auth: a request signed with a wrong key is 403 AuthenticationFailed, nothing changed")
def _():
    container = fresh_container()
    wrong = CONNECTION.replace(KEY, "AAAA" + KEY[4:]) if KEY[:4] != "AAAA" else CONNECTION.replace(KEY, "BBBB" + KEY[4:])
    intruder = BlobServiceClient.from_connection_string(wrong).get_container_client(container.container_name)
    expect(ClientAuthenticationError, lambda: intruder.upload_blob("x", b"x"), "AuthenticationFailed")
    expect(ClientAuthenticationError, lambda: intruder.delete_container(), "AuthenticationFailed")
    assert container.exists()
    assert not container.get_blob_client("x").exists()


@check("auth: service SAS, each missing permission refused, expired and not yet valid refused")
def _():
    container = fresh_container()
    container.upload_blob("doc", b"secret")
    endpoint = container.url
    expiry = datetime.now(timezone.utc) + timedelta(hours=1)

    def blob_with(permission, expiry=expiry, name="doc"):
        sas = generate_blob_sas(
            ACCOUNT, container.container_name, name, account_key=KEY, permission=permission, expiry=expiry
        )
        return BlobClient.from_blob_url(f"{endpoint}/{name}?{sas}")

    assert blob_with(BlobSasPermissions(read=True)).download_blob().readall() == b"secret"
    expect(HttpResponseError, lambda: blob_with(BlobSasPermissions(write=True)).download_blob().readall(), "AuthorizationPermissionMismatch")
    expect(HttpResponseError, lambda: blob_with(BlobSasPermissions(read=True)).upload_blob(b"x", overwrite=True), "AuthorizationPermissionMismatch")
    expect(HttpResponseError, lambda: blob_with(BlobSasPermissions(read=True)).delete_blob(), "AuthorizationPermissionMismatch")
    blob_with(BlobSasPermissions(write=True)).upload_blob(b"written by SAS", overwrite=True)
    blob_with(BlobSasPermissions(create=True), name="new").upload_blob(b"created by SAS")
    container.upload_blob("other", b"another secret")
    doc_sas = generate_blob_sas(ACCOUNT, container.container_name, "doc", account_key=KEY, permission=BlobSasPermissions(read=True), expiry=expiry)
    expect(ClientAuthenticationError, lambda: BlobClient.from_blob_url(f"{endpoint}/other?{doc_sas}").download_blob().readall(), "AuthenticationFailed")
    expired = datetime.now(timezone.utc) - timedelta(minutes=1)
    expect(ClientAuthenticationError, lambda: blob_with(BlobSasPermissions(read=True), expiry=expired).download_blob().readall(), "AuthenticationFailed")
    later = generate_blob_sas(
        ACCOUNT, container.container_name, "doc", account_key=KEY, permission=BlobSasPermissions(read=True),
        start=datetime.now(timezone.utc) + timedelta(hours=1), expiry=expiry + timedelta(hours=1),
    )
    expect(ClientAuthenticationError, lambda: BlobClient.from_blob_url(f"{endpoint}/doc?{later}").download_blob().readall(), "AuthenticationFailed")
    blob_with(BlobSasPermissions(delete=True)).delete_blob()
    assert not container.get_blob_client("doc").exists()

    listing = generate_container_sas(ACCOUNT, container.container_name, account_key=KEY, permission=ContainerSasPermissions(list=True), expiry=expiry)
    lister = ContainerClient.from_container_url(f"{endpoint}?{listing}")
    assert [b.name for b in lister.list_blobs()] == ["new", "other"]
    reader = ContainerClient.from_container_url(f"{endpoint}?{generate_container_sas(ACCOUNT, container.container_name, account_key=KEY, permission=ContainerSasPermissions(read=True), expiry=expiry)}")
    expect(HttpResponseError, lambda: list(reader.list_blobs()), "AuthorizationPermissionMismatch")


@check("auth: account SAS for containers and blobs")
def _():
    expiry = datetime.now(timezone.utc) + timedelta(hours=1)
    sas = generate_account_sas(
        ACCOUNT, KEY, resource_types=ResourceTypes(container=True, object=True),
        permission=AccountSasPermissions(read=True, write=True, create=True, delete=True, list=True), expiry=expiry,
    )
    service = BlobServiceClient(account_url=SERVICE.url, credential=sas)
    name = "c" + uuid.uuid4().hex[:20]
    container = service.create_container(name)
    container.upload_blob("a", b"by account SAS")
    assert container.download_blob("a").readall() == b"by account SAS"
    container.delete_container()
    read_only = generate_account_sas(
        ACCOUNT, KEY, resource_types=ResourceTypes(container=True, object=True),
        permission=AccountSasPermissions(read=True), expiry=expiry,
    )
    service = BlobServiceClient(account_url=SERVICE.url, credential=read_only)
    expect(HttpResponseError, lambda: service.create_container("c" + uuid.uuid4().hex[:20]), "AuthorizationPermissionMismatch")


@check("auth: anonymous reads only where the container's public access level allows")
def _():
    private = fresh_container()
    private.upload_blob("doc", b"private")
    public = fresh_container(public_access="blob")
    public.upload_blob("doc", b"public")
    anonymous = lambda c: BlobClient.from_blob_url(f"{c.url}/doc")  # noqa: E731
    assert anonymous(public).download_blob().readall() == b"public"
    expect(HttpResponseError, lambda: anonymous(private).download_blob().readall())
    expect(HttpResponseError, lambda: anonymous(public).upload_blob(b"vandal", overwrite=True))
    assert public.get_blob_client("doc").download_blob().readall() == b"public"
    expect(HttpResponseError, lambda: list(ContainerClient.from_container_url(public.url).list_blobs()))
    private.set_container_access_policy(signed_identifiers={}, public_access="container")
    assert private.get_container_access_policy()["public_access"] == "container"
    assert [b.name for b in ContainerClient.from_container_url(private.url).list_blobs()] == ["doc"]
    assert anonymous(private).download_blob().readall() == b"private"


@check("Content-MD5 and CRC64: uploads with validate_content are verified; reads return the MD5")
def _():
    blob = fresh_container().get_blob_client("checked")
    data = b"hello, checked" * 1000
    blob.upload_blob(data, validate_content=True)
    assert bytes(blob.get_blob_properties().content_settings.content_md5) == hashlib.md5(data).digest()
    assert blob.download_blob(validate_content=True).readall() == data
    assert blob.download_blob(offset=5, length=100, validate_content=True).readall() == data[5:105]
    # CRC64 (azure-storage-extensions computes it): verified on upload.
    crc = fresh_container().get_blob_client("crc")
    crc.upload_blob(data, validate_content="crc64")
    assert crc.download_blob().readall() == data


@check("auth: a SAS for HTTPS only, or for other addresses, is refused; the right address passes")
def _():
    container = fresh_container()
    container.upload_blob("doc", b"x")
    expiry = datetime.now(timezone.utc) + timedelta(hours=1)

    def with_sas(**kwargs):
        sas = generate_blob_sas(
            ACCOUNT, container.container_name, "doc", account_key=KEY,
            permission=BlobSasPermissions(read=True), expiry=expiry, **kwargs,
        )
        return BlobClient.from_blob_url(f"{container.url}/doc?{sas}")

    expect(HttpResponseError, lambda: with_sas(protocol="https").download_blob().readall(), "AuthorizationProtocolMismatch")
    expect(HttpResponseError, lambda: with_sas(ip="10.1.2.3").download_blob().readall(), "AuthorizationSourceIPMismatch")
    assert with_sas(ip="127.0.0.0-127.255.255.255").download_blob().readall() == b"x"
    assert with_sas(protocol="https,http").download_blob().readall() == b"x"


@check("auth: a bearer token (Entra ID) over plain HTTP is refused, saying why")
def _():
    container = fresh_container()
    # The SDK sends bearer tokens over HTTPS only (over HTTP it refuses before sending), so
    # one is sent by hand. The native server answers 401 with the challenge (tokens are taken
    # over HTTPS: tests/sdk/tokens.py); the Worker, which checks no token yet, 403.
    request = urllib.request.Request(
        f"{container.url}?restype=container", headers={"Authorization": "Bearer x", "x-ms-version": "2021-12-02"}
    )
    try:
        urllib.request.urlopen(request)
        raise AssertionError("a bearer token was accepted")
    except urllib.error.HTTPError as error:
        code = error.headers["x-ms-error-code"]
        body = error.read()
        if error.code == 401:
            assert code == "InvalidAuthenticationInfo", code
            assert error.headers["WWW-Authenticate"].startswith("Bearer authorization_uri="), error.headers
            assert b"HTTPS only" in body, body
        else:
            assert error.code == 403 and code == "AuthenticationFailed", (error.code, code)
            assert b"bearer tokens" in body, body


@check("blob batch: delete_blobs deletes several in one request, each checked on its own")
def _():
    container = fresh_container()
    for name in ["a", "b", "c"]:
        container.upload_blob(name, name.encode())
    lease = container.get_blob_client("c").acquire_lease(lease_duration=15)
    responses = list(container.delete_blobs("a", "b", raise_on_any_failure=False))
    assert [r.status_code for r in responses] == [202, 202], [r.status_code for r in responses]
    failed = list(container.delete_blobs("c", raise_on_any_failure=False))
    assert failed[0].status_code == 412, failed[0].status_code  # leased: LeaseIdMissing
    assert [b.name for b in container.list_blobs()] == ["c"]
    lease.release()


@check("metadata and properties: round trips, and every change a new ETag")
def _():
    from azure.storage.blob import ContentSettings

    container = fresh_container()
    blob = container.get_blob_client("doc.txt")
    plain = blob.upload_blob(b"bytes")["etag"]
    assert plain == '"' + hashlib.sha256(b"bytes").hexdigest() + '"', "no metadata: the bytes' tag"
    settings = ContentSettings(content_type="text/plain", cache_control="max-age=60", content_language="en")
    tagged = blob.upload_blob(b"bytes", overwrite=True, metadata={"owner": "alice"}, content_settings=settings)["etag"]
    assert tagged != plain
    again = blob.upload_blob(b"bytes", overwrite=True, metadata={"owner": "alice"}, content_settings=settings)["etag"]
    assert again == tagged, "the same bytes and headers: the same tag"
    props = blob.get_blob_properties()
    assert props.metadata == {"owner": "alice"}
    assert (props.content_settings.content_type, props.content_settings.cache_control) == ("text/plain", "max-age=60")
    assert props.content_settings.content_language == "en"
    # Another client's metadata change: a stale If-Match on metadata loses nothing.
    other = blob.set_blob_metadata({"owner": "bob"}, etag=tagged, match_condition=MatchConditions.IfNotModified)["etag"]
    assert other != tagged
    expect(ResourceModifiedError, lambda: blob.set_blob_metadata({"owner": "mallory"}, etag=tagged, match_condition=MatchConditions.IfNotModified))
    restored = blob.set_blob_metadata({"owner": "alice"})["etag"]
    assert restored not in (tagged, other), "a change back is still a new tag"
    props_tag = blob.set_http_headers(ContentSettings(content_type="application/json"))["etag"]
    assert props_tag != restored
    props = blob.get_blob_properties()
    assert props.content_settings.content_type == "application/json"
    assert props.content_settings.cache_control is None, "Set Blob Properties clears what it omits"
    assert props.metadata == {"owner": "alice"}
    assert blob.download_blob().readall() == b"bytes"
    container.set_container_metadata({"team": "storage"})
    assert container.get_container_properties().metadata == {"team": "storage"}
    lease = blob.acquire_lease(lease_duration=15)
    expect(HttpResponseError, lambda: blob.set_blob_metadata({"x": "y"}), "LeaseIdMissing")
    blob.set_blob_metadata({"x": "y"}, lease=lease)
    lease.release()


@check("listing: walk_blobs with a delimiter, include metadata, list_containers paging")
def _():
    container = fresh_container()
    for name in ["a.txt", "dir1/b.txt", "dir1/c.txt", "dir1/sub/d.txt", "dir2/e.txt"]:
        container.upload_blob(name, b"x", metadata={"n": name.replace("/", "_").replace(".", "_")})
    top = sorted(item.name for item in container.walk_blobs())
    assert top == ["a.txt", "dir1/", "dir2/"], top
    under = sorted(item.name for item in container.walk_blobs(name_starts_with="dir1/"))
    assert under == ["dir1/b.txt", "dir1/c.txt", "dir1/sub/"], under
    with_meta = {b.name: b.metadata for b in container.list_blobs(include=["metadata"])}
    assert with_meta["dir1/b.txt"] == {"n": "dir1_b_txt"}, with_meta
    prefix = "p" + uuid.uuid4().hex[:8]
    made = sorted(f"{prefix}-{i}" for i in range(5))
    for name in made:
        SERVICE.create_container(name, metadata={"i": name[-1]})
    pages = SERVICE.list_containers(name_starts_with=prefix, include_metadata=True, results_per_page=2).by_page()
    listed = [[(c.name, c.metadata["i"]) for c in page] for page in pages]
    assert [len(p) for p in listed] == [2, 2, 1], listed
    assert [name for page in listed for name, _ in page] == made


@check("blocks: stage_block / commit_block_list under If-Match and a lease; staged blocks change nothing")
def _():
    from azure.storage.blob import BlobBlock, BlockState, ContentSettings

    container = fresh_container()
    blob = container.get_blob_client("parts.txt")
    first = blob.upload_blob(b"v1")["etag"]
    lease = blob.acquire_lease(lease_duration=15)
    expect(HttpResponseError, lambda: blob.stage_block("b1", b"x"), "LeaseIdMissing")
    blob.stage_block("b1", b"hello ", lease=lease)
    blob.stage_block("b2", b"world", lease=lease)
    committed, uncommitted = blob.get_block_list("all")
    assert committed == [] and [(b.id, b.size) for b in uncommitted] == [("b1", 6), ("b2", 5)]
    assert blob.download_blob().readall() == b"v1", "staged blocks are not the blob"
    assert blob.get_blob_properties().etag == first, "staging keeps the ETag"
    listed = [BlobBlock("b1"), BlobBlock("b2")]
    expect(ResourceModifiedError, lambda: blob.commit_block_list(listed, etag='"stale"', match_condition=MatchConditions.IfNotModified, lease=lease))
    expect(HttpResponseError, lambda: blob.commit_block_list(listed), "LeaseIdMissing")
    settings = ContentSettings(content_type="text/plain")
    tag = blob.commit_block_list(listed, etag=first, match_condition=MatchConditions.IfNotModified, lease=lease, metadata={"k": "v"}, content_settings=settings)["etag"]
    assert blob.download_blob().readall() == b"hello world"
    props = blob.get_blob_properties()
    assert (props.etag, props.metadata, props.content_settings.content_type) == (tag, {"k": "v"}, "text/plain")
    assert props.lease.state == "leased", "the commit keeps the lease"
    committed, uncommitted = blob.get_block_list("all")
    assert [(b.id, b.size) for b in committed] == [("b1", 6), ("b2", 5)] and uncommitted == []
    # A committed block reused beside a new one; an unlisted staged block is dropped.
    blob.stage_block("b3", b"!", lease=lease)
    blob.stage_block("b4", b"unused", lease=lease)
    blob.commit_block_list([BlobBlock("b1", BlockState.Committed), BlobBlock("b3", BlockState.Uncommitted)], lease=lease)
    assert blob.download_blob().readall() == b"hello !"
    assert blob.get_block_list("uncommitted")[1] == []
    expect(HttpResponseError, lambda: blob.commit_block_list([BlobBlock("zz")], lease=lease), "InvalidBlockList")
    lease.release()
    # The same bytes and headers, put whole or in blocks: the same ETag.
    whole = container.get_blob_client("whole").upload_blob(b"hello !")["etag"]
    parts = container.get_blob_client("parts")
    parts.stage_block("p1", b"hello")
    parts.stage_block("p2", b" !")
    assert parts.commit_block_list([BlobBlock("p1"), BlobBlock("p2")])["etag"] == whole
    assert whole == '"' + hashlib.sha256(b"hello !").hexdigest() + '"'
    # A blob with staged blocks only does not exist yet, and is listed only when asked.
    staged = container.get_blob_client("staged-only")
    staged.stage_block("s1", b"abc")
    assert not staged.exists()
    expect(ResourceNotFoundError, lambda: staged.download_blob().readall(), "BlobNotFound")
    assert "staged-only" not in [b.name for b in container.list_blobs()]
    assert "staged-only" in [b.name for b in container.list_blobs(include=["uncommittedblobs"])]
    assert [b.id for b in staged.get_block_list("uncommitted")[1]] == ["s1"]
    staged.commit_block_list([BlobBlock("s1")])
    assert staged.download_blob().readall() == b"abc"


# 200 MiB in scripts/test --full (IFMATCH_FULL=1); 40 MiB, ten blocks, in every run.
BIG = 200 if os.environ.get("IFMATCH_FULL") else 40


@check(f"blocks: a {BIG} MiB blob uploaded in parallel 4 MiB blocks, downloaded in parallel ranges")
def _():
    size = BIG << 20
    data = random.randbytes(size)
    container = fresh_container()
    blob = container.get_blob_client("big.bin")
    client = BlobClient.from_connection_string(
        CONNECTION, container.container_name, "big.bin", max_single_put_size=4 << 20, max_block_size=4 << 20
    )
    started = time.monotonic()
    etag = client.upload_blob(data, max_concurrency=4)["etag"]
    uploaded = time.monotonic() - started
    assert etag == '"' + hashlib.sha256(data).hexdigest() + '"', "the tag of all the bytes"
    committed, _ = blob.get_block_list()
    assert len(committed) == BIG // 4, len(committed)
    started = time.monotonic()
    back = blob.download_blob(max_concurrency=4).readall()
    downloaded = time.monotonic() - started
    assert len(back) == size and hashlib.sha256(back).digest() == hashlib.sha256(data).digest()
    part = blob.download_blob(offset=(4 << 20) - 10, length=20).readall()
    assert part == data[(4 << 20) - 10 : (4 << 20) + 10], "a range across two blocks"
    print(f"     {BIG} MiB: upload {uploaded:.1f} s, download {downloaded:.1f} s", flush=True)


@check("index tags: set_blob_tags, get_blob_tags, upload with tags, tag_count, and if_tags_match_condition 412 when false")
def _():
    blob = fresh_container().get_blob_client("tagged.txt")
    blob.upload_blob(b"v1", tags={"team": "a", "stage": "draft"})
    assert blob.get_blob_tags() == {"team": "a", "stage": "draft"}
    assert blob.get_blob_properties().tag_count == 2
    etag = blob.get_blob_properties().etag
    false = "\"team\" = 'nobody'"
    calls = [
        lambda: blob.download_blob(if_tags_match_condition=false).readall(),
        lambda: blob.get_blob_properties(if_tags_match_condition=false),
        lambda: blob.set_blob_metadata({"k": "v"}, if_tags_match_condition=false),
        lambda: blob.upload_blob(b"v2", overwrite=True, if_tags_match_condition=false),
        lambda: blob.set_blob_tags({"team": "b"}, if_tags_match_condition=false),
        lambda: blob.delete_blob(if_tags_match_condition=false),
    ]
    for call in calls:
        error = expect(HttpResponseError, call)
        assert error.status_code == 412, error
    properties = blob.get_blob_properties()
    assert properties.etag == etag and not properties.metadata, "nothing changed"
    assert blob.download_blob().readall() == b"v1"
    true = "\"team\" = 'a' AND (\"stage\" = 'draft' OR \"stage\" = 'done')"
    blob.set_blob_tags({"team": "a", "stage": "done"}, if_tags_match_condition=true)
    assert blob.get_blob_properties().etag == etag, "tags are not part of the ETag"
    blob.upload_blob(b"v2", overwrite=True, if_tags_match_condition=true)
    assert blob.download_blob().readall() == b"v2"
    assert blob.get_blob_tags() == {}, "an upload without tags clears them"


@check("find_blobs_by_tags on the account and on a container, by page, with the tags each names")
def _():
    mark = uuid.uuid4().hex[:12]
    first, second = fresh_container(), fresh_container()
    for container in (first, second):
        for name, run in (("a", mark), ("b", "other"), ("c", mark)):
            container.get_blob_client(name).upload_blob(b"x", tags={"run": run, "n": name})
    expression = f"\"run\" = '{mark}'"
    pages = list(SERVICE.find_blobs_by_tags(expression, results_per_page=3).by_page())
    found = [(b.container_name, b.name, b.tags) for page in pages for b in page]
    want = sorted((c.container_name, n, {"run": mark}) for c in (first, second) for n in "ac")
    assert found == want, found
    assert len(pages) >= 2, f"{len(pages)} pages"
    only = f"@container = '{second.container_name}' AND \"n\" >= 'b'"
    assert [b.name for b in second.find_blobs_by_tags(only)] == ["b", "c"]


@check("snapshots: create_snapshot, a snapshot read and copied, list_blobs(include=['snapshots']), delete_blob(delete_snapshots=...)")
def _():
    container = fresh_container()
    blob = container.get_blob_client("doc.txt")
    blob.upload_blob(b"v1", metadata={"v": "1"})
    first = blob.create_snapshot()["snapshot"]
    second = blob.create_snapshot(metadata={"v": "2"})["snapshot"]
    blob.upload_blob(b"v2", overwrite=True)
    old = container.get_blob_client("doc.txt", snapshot=first)
    assert old.download_blob().readall() == b"v1"
    assert old.get_blob_properties().metadata == {"v": "1"}
    assert container.get_blob_client("doc.txt", snapshot=second).get_blob_properties().metadata == {"v": "2"}
    assert blob.download_blob().readall() == b"v2"
    listed = [(b.name, b.snapshot) for b in container.list_blobs(include=["snapshots"])]
    assert listed == [("doc.txt", None), ("doc.txt", first), ("doc.txt", second)], listed
    assert [b.name for b in container.list_blobs()] == ["doc.txt"]
    expect(HttpResponseError, blob.delete_blob, "SnapshotsPresent")
    copy = container.get_blob_client("copy.txt")
    copy.start_copy_from_url(old.url)
    assert copy.download_blob().readall() == b"v1"
    old.delete_blob()
    expect(HttpResponseError, old.get_blob_properties, "BlobNotFound")
    blob.delete_blob(delete_snapshots="include")
    assert [(b.name, b.snapshot) for b in container.list_blobs(include=["snapshots"])] == [("copy.txt", None)]


def set_service_property(element):
    """One element of the account's Blob service properties, through the SDK's own signed
    pipeline (the Python SDK has no parameter for those Azure sets through its management API:
    IsVersioningEnabled, ContainerDeleteRetentionPolicy)."""
    from azure.core.rest import HttpRequest  # noqa: PLC0415 - only these checks need it

    xml = f'<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties>{element}</StorageServiceProperties>'
    url = SERVICE.url.rstrip("/") + "/?restype=service&comp=properties"
    request = HttpRequest("PUT", url, content=xml.encode(), headers={"Content-Type": "application/xml"})
    response = SERVICE._client._send_request(request)  # noqa: SLF001 - the signed pipeline
    assert response.status_code == 202, response.text()


def set_versioning(enabled):
    set_service_property(f"<IsVersioningEnabled>{str(enabled).lower()}</IsVersioningEnabled>")


@check("versions: each upload keeps the last (version_id), download_blob(version_id=), list_blobs(include=['versions']), an old version copied back, delete_blob(version_id=)")
def _():
    set_versioning(True)
    try:
        container = fresh_container()
        blob = container.get_blob_client("doc.txt")
        first = blob.upload_blob(b"v1")["version_id"]
        second = blob.upload_blob(b"v2", overwrite=True)["version_id"]
        assert first and second and first < second, (first, second)
        assert blob.download_blob(version_id=first).readall() == b"v1"
        assert blob.get_blob_properties().version_id == second
        listed = [(b.name, b.version_id, b.is_current_version) for b in container.list_blobs(include=["versions"])]
        assert listed == [("doc.txt", second, True), ("doc.txt", first, None)], listed
        blob.start_copy_from_url(f"{blob.url}?versionid={first}")
        assert blob.download_blob().readall() == b"v1", "the old version promoted"
        blob.delete_blob(version_id=first)
        expect(HttpResponseError, lambda: blob.download_blob(version_id=first).readall(), "BlobNotFound")
        blob.delete_blob()
        kept = [b.version_id for b in container.list_blobs(include=["versions"])]
        assert second in kept and len(kept) == 2, kept
    finally:
        set_versioning(False)


@check("soft delete: set_service_properties(delete_retention_policy=...), delete_blob, list_blobs(include=['deleted']), undelete_blob")
def _():
    from azure.storage.blob import RetentionPolicy  # noqa: PLC0415 - only this check needs it

    SERVICE.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=True, days=2))
    try:
        assert SERVICE.get_service_properties()["delete_retention_policy"].days == 2
        container = fresh_container()
        blob = container.get_blob_client("doc.txt")
        blob.upload_blob(b"kept")
        snapshot = blob.create_snapshot()["snapshot"]
        blob.delete_blob(delete_snapshots="include")
        expect(HttpResponseError, blob.get_blob_properties, "BlobNotFound")
        assert [b.name for b in container.list_blobs()] == []
        deleted = [(b.name, b.deleted, b.remaining_retention_days) for b in container.list_blobs(include=["deleted"])]
        assert deleted == [("doc.txt", True, 2)], deleted
        blob.undelete_blob()
        assert blob.download_blob().readall() == b"kept"
        old = container.get_blob_client("doc.txt", snapshot=snapshot)
        assert old.download_blob().readall() == b"kept", "its snapshot back too"
    finally:
        SERVICE.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=False))


@check("container soft delete: delete_container, list_containers(include_deleted=True), undelete_container with the blobs back")
def _():
    policy = "<ContainerDeleteRetentionPolicy><Enabled>{}</Enabled><Days>3</Days></ContainerDeleteRetentionPolicy>"
    set_service_property(policy.format("true"))
    try:
        container = fresh_container()
        container.get_blob_client("doc.txt").upload_blob(b"kept")
        container.delete_container()
        expect(HttpResponseError, container.get_container_properties, "ContainerNotFound")
        deleted = [c for c in SERVICE.list_containers(include_deleted=True) if c.name == container.container_name]
        assert [(c.deleted, bool(c.version)) for c in deleted] == [(True, True)], deleted
        restored = SERVICE.undelete_container(container.container_name, deleted[0].version)
        assert restored.get_blob_client("doc.txt").download_blob().readall() == b"kept"
        assert not [c for c in SERVICE.list_containers(include_deleted=True) if c.deleted and c.name == container.container_name]
    finally:
        set_service_property(policy.format("false"))


@check("change feed: ChangeFeedClient.list_changes() reads a blob's creation, metadata, snapshot and deletion, each once, in order")
def _():
    from azure.storage.blob.changefeed import ChangeFeedClient  # noqa: PLC0415 - only this check needs it

    set_service_property("<ChangeFeed><Enabled>true</Enabled></ChangeFeed>")
    try:
        container = fresh_container()
        blob = container.get_blob_client("doc.txt")
        etag = blob.upload_blob(b"v1")["etag"]
        blob.set_blob_metadata({"k": "v"})
        snapshot = blob.create_snapshot()["snapshot"]
        blob.delete_blob(delete_snapshots="include")
        feed = ChangeFeedClient.from_connection_string(CONNECTION)
        subject = f"/blobServices/default/containers/{container.container_name}/blobs/doc.txt"
        want = [
            ("BlobCreated", "PutBlob", None),
            ("BlobPropertiesUpdated", "SetBlobMetadata", None),
            ("BlobSnapshotCreated", "SnapshotBlob", snapshot),
            ("BlobDeleted", "DeleteBlob", None),
        ]
        # Published within a moment of the writes (Azure's own feed takes minutes).
        deadline = time.monotonic() + 30
        while True:
            events = [e for e in feed.list_changes() if e["subject"] == subject]
            got = [(e["eventType"], e["data"]["api"], e["data"].get("snapshot")) for e in events]
            if got == want or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert got == want, got
        created = events[0]["data"]
        assert (created["etag"], created["contentLength"], created["blobType"]) == (etag, 2, "BlockBlob"), created
        assert events[0]["data"]["sequencer"] < events[-1]["data"]["sequencer"]
        # Read again two at a time, each page from the last one's continuation token, as a reader
        # that stops and resumes does (the cursor names the chunk, its block and the event).
        token, resumed = None, []
        for _ in range(1000):
            pages = feed.list_changes(results_per_page=2).by_page(continuation_token=token)
            page = next(pages, None)
            if page is None:
                break
            page = list(page)
            resumed += [(e["eventType"], e["data"]["api"], e["data"].get("snapshot")) for e in page if e["subject"] == subject]
            token = pages.continuation_token
            if not page:
                break
        assert resumed == want, resumed
        # The feed's container is read-only.
        expect(HttpResponseError, lambda: SERVICE.get_container_client("$blobchangefeed").upload_blob("x", b"x"), "AuthorizationPermissionMismatch")
    finally:
        set_service_property("<ChangeFeed><Enabled>false</Enabled></ChangeFeed>")


@check("immutability: set_legal_hold, set_immutability_policy (Unlocked, then Locked and only extended), writes refused 409, delete_immutability_policy")
def _():
    import datetime  # noqa: PLC0415 - only this check needs it

    from azure.storage.blob import ImmutabilityPolicy  # noqa: PLC0415

    blob = fresh_container().get_blob_client("record.txt")
    blob.upload_blob(b"kept")
    assert blob.set_legal_hold(True)["legal_hold"] is True
    assert blob.get_blob_properties().has_legal_hold is True
    for write in (lambda: blob.upload_blob(b"changed", overwrite=True), blob.delete_blob):
        expect(HttpResponseError, write, "BlobImmutableDueToLegalHold")
    blob.set_legal_hold(False)
    until = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) + datetime.timedelta(days=1)
    blob.set_immutability_policy(ImmutabilityPolicy(expiry_time=until, policy_mode="Unlocked"))
    policy = blob.get_blob_properties().immutability_policy
    assert (policy.expiry_time, policy.policy_mode) == (until, "Unlocked"), (policy.expiry_time, policy.policy_mode)
    expect(HttpResponseError, blob.delete_blob, "BlobImmutableDueToPolicy")
    blob.delete_immutability_policy()
    blob.set_blob_metadata({"after": "unlock"})
    blob.set_immutability_policy(ImmutabilityPolicy(expiry_time=until, policy_mode="Locked"))
    shorter = ImmutabilityPolicy(expiry_time=until - datetime.timedelta(hours=1), policy_mode="Locked")
    # These two calls of the SDK raise without reading the error code into error_code.
    for call in (lambda: blob.set_immutability_policy(shorter), blob.delete_immutability_policy):
        error = expect(HttpResponseError, call)
        assert error.status_code == 409 and "BlobImmutableDueToPolicy" in str(error), error
    longer = ImmutabilityPolicy(expiry_time=until + datetime.timedelta(days=1), policy_mode="Locked")
    blob.set_immutability_policy(longer)
    assert blob.download_blob().readall() == b"kept"


@check("stage_block_from_url: ranges of another blob staged as blocks, then committed")
def _():
    from azure.storage.blob import BlobBlock  # noqa: PLC0415 - as the block checks import it

    container = fresh_container()
    source = container.get_blob_client("source.bin")
    source.upload_blob(b"0123456789")
    target = container.get_blob_client("target.bin")
    target.stage_block_from_url("QUFB", source.url, source_offset=2, source_length=4)
    target.stage_block_from_url("QkJC", source.url)
    target.commit_block_list([BlobBlock("QUFB"), BlobBlock("QkJC")])
    assert target.download_blob().readall() == b"23450123456789"


@check("page blobs: create_page_blob, upload_page, clear_page, get_page_ranges (and previous_snapshot_diff), resize_blob, set_sequence_number, if_sequence_number_* 412")
def _():
    container = fresh_container()
    disk = container.get_blob_client("disk.vhd")
    disk.create_page_blob(size=4096, sequence_number=1)
    assert disk.get_blob_properties().blob_type == "PageBlob"
    assert disk.download_blob().readall() == bytes(4096)
    disk.upload_page(b"a" * 1024, offset=0, length=1024)
    snapshot = disk.create_snapshot()["snapshot"]
    disk.upload_page(b"b" * 512, offset=2048, length=512, if_sequence_number_eq=1)
    disk.clear_page(offset=512, length=512)
    filled, cleared = disk.get_page_ranges()
    assert [(r["start"], r["end"]) for r in filled] == [(0, 511), (2048, 2559)], filled
    changed, gone = disk.get_page_ranges(previous_snapshot_diff=snapshot)
    assert [(r["start"], r["end"]) for r in changed] == [(2048, 2559)], changed
    assert [(r["start"], r["end"]) for r in gone] == [(512, 1023)], gone
    expected = b"a" * 512 + bytes(1536) + b"b" * 512 + bytes(1536)
    assert disk.download_blob().readall() == expected
    assert disk.download_blob(offset=2000, length=100).readall() == expected[2000:2100]
    error = expect(HttpResponseError, lambda: disk.upload_page(b"c" * 512, offset=0, length=512, if_sequence_number_lte=0))
    assert error.status_code == 412 and "SequenceNumberConditionNotMet" in str(error), error
    assert disk.set_sequence_number("increment")["blob_sequence_number"] == 2
    assert disk.set_sequence_number("max", 7)["blob_sequence_number"] == 7
    disk.resize_blob(1024)
    assert disk.get_blob_properties().size == 1024
    assert disk.download_blob().readall() == b"a" * 512 + bytes(512)
    expect(HttpResponseError, lambda: disk.upload_page(b"c" * 512, offset=1024, length=512), "InvalidPageRange")
    # An incremental copy of a snapshot: a snapshot of the destination per copy.
    backup = container.get_blob_client("backup.vhd")
    first = disk.create_snapshot()["snapshot"]
    copied = backup.start_copy_from_url(f"{disk.url}?snapshot={first}", incremental_copy=True)
    assert copied["copy_status"] == "success", copied
    properties = backup.get_blob_properties()
    assert properties.copy.incremental_copy is True and properties.copy.destination_snapshot, properties.copy
    kept = container.get_blob_client("backup.vhd", snapshot=properties.copy.destination_snapshot)
    assert kept.download_blob().readall() == b"a" * 512 + bytes(512)
    error = expect(HttpResponseError, lambda: backup.upload_page(b"c" * 512, offset=0, length=512))
    assert error.status_code == 409 and "OperationNotAllowedOnIncrementalCopyBlob" in str(error), error


@check("adlfs (fsspec): cp_file and mv copy blobs, open(path, 'ab') appends, as pandas' to_csv(mode='a') does")
def _():
    import adlfs  # noqa: PLC0415 - only this check needs it

    fs = adlfs.AzureBlobFileSystem(connection_string=CONNECTION)
    name = fresh_container().container_name
    with fs.open(f"{name}/a.csv", "wb") as f:
        f.write(b"x,y\n1,2\n")
    fs.cp_file(f"{name}/a.csv", f"{name}/b.csv")
    assert fs.cat_file(f"{name}/b.csv") == b"x,y\n1,2\n"
    fs.mv(f"{name}/b.csv", f"{name}/c.csv")
    fs.invalidate_cache()
    assert not fs.exists(f"{name}/b.csv"), "moved: the source is gone"
    assert fs.cat_file(f"{name}/c.csv") == b"x,y\n1,2\n"
    # 'ab' makes an append blob, then appends to it (a block blob refuses, as in Azure).
    for line in (b"one\n", b"two\n"):
        with fs.open(f"{name}/log.txt", "ab") as f:
            f.write(line)
    assert fs.cat_file(f"{name}/log.txt") == b"one\ntwo\n"
    assert SERVICE.get_blob_client(name, "log.txt").get_blob_properties().blob_type == "AppendBlob"
    assert sorted(p.rsplit("/", 1)[1] for p in fs.ls(name)) == ["a.csv", "c.csv", "log.txt"]


failed = [name for name, error in results if error is not None]
print(f"\npython sdk: {len(results) - len(failed)} passed, {len(failed)} failed")
sys.exit(1 if failed else 0)
