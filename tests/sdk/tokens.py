"""Entra ID bearer tokens with the official Python SDKs unchanged, as production code sends them
(a credential object, as DefaultAzureCredential is one), over HTTPS: each token minted by
`ifmatch token` with a role at a scope; what the role permits is done, what it does not is
refused 403 AuthorizationPermissionMismatch; a token the server's issuer did not sign is refused
401 InvalidAuthenticationInfo with the challenge the SDKs read.

Cosmos DB the same way: `type=aad` tokens from a credential, the data actions of its built-in
data roles, 403 with substatus 5301 for an action not granted and 5300 for the management
operations a token never does. A user's permissions give resource tokens that reach what each
permission names alone, until it is deleted.

The management API (ARM, azure-mgmt-storage) the same way: a token for its audience whose role
holds its actions sets a container's own retention policy (created, locked under its etag,
extended) and legal holds, which then refuse every change of the container's blobs; a data role
manages nothing (403 AuthorizationFailed), a Storage token nothing either (401).

Usage: python tokens.py CONNECTION_STRING IFMATCH_BINARY DATA_DIRECTORY OTHER_DATA_DIRECTORY
COSMOS_ENDPOINT (the server's data directory, whose development issuer signs the tokens; another
one's, whose tokens the server must refuse)
"""

import subprocess
import sys
import uuid
import warnings
from datetime import datetime, timezone

from azure.core.credentials import AccessToken
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

CONNECTION, BINARY, DATA, OTHER, COSMOS = sys.argv[1:6]
# The Cosmos SDK does not verify a localhost endpoint's certificate, and says so each request.
warnings.filterwarnings("ignore", message="Unverified HTTPS request")
checks = 0


def minted(role, scope="/", data=DATA, audience=None):
    args = [BINARY, "token", "--data", data, "--role", role, "--scope", scope]
    if audience:
        args += ["--audience", audience]
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()


class Credential:
    """What DefaultAzureCredential is to the SDKs: get_token, for any scope, gives this token."""

    def __init__(self, token):
        self.token = token
        self.scopes = []

    def get_token(self, *scopes, **kwargs):
        self.scopes.extend(scopes)
        return AccessToken(self.token, int(datetime.now(timezone.utc).timestamp()) + 3600)


def refused(call, status=403, code="AuthorizationPermissionMismatch"):
    try:
        call()
    except HttpResponseError as error:
        assert error.status_code == status, (error.status_code, error)
        assert error.error_code == code, (error.error_code, error)
        return error
    raise AssertionError("not refused")


keyed = BlobServiceClient.from_connection_string(CONNECTION)
url = keyed.url


def blobs(role, scope="/"):
    return BlobServiceClient(url, credential=Credential(minted(role, scope)))


# A contributor writes, reads and lists; it may not set index tags (the owner's).
name = "c" + uuid.uuid4().hex[:12]
contributor = blobs("Storage Blob Data Contributor")
container = contributor.create_container(name)
container.upload_blob("a.txt", b"by token")
assert container.download_blob("a.txt").readall() == b"by token"
assert [b.name for b in container.list_blobs()] == ["a.txt"]
refused(lambda: container.get_blob_client("a.txt").set_blob_tags({"k": "v"}))
checks += 1

# The owner may.
owner = blobs("Storage Blob Data Owner").get_container_client(name)
owner.get_blob_client("a.txt").set_blob_tags({"k": "v"})
assert owner.get_blob_client("a.txt").get_blob_tags() == {"k": "v"}
checks += 1

# A reader reads and may not write or delete.
reader = blobs("Storage Blob Data Reader").get_container_client(name)
assert reader.download_blob("a.txt").readall() == b"by token"
refused(lambda: reader.upload_blob("b.txt", b"no"))
refused(lambda: reader.delete_blob("a.txt"))
refused(lambda: reader.get_blob_client("a.txt").set_blob_metadata({"m": "v"}))
checks += 1

# A role at one container's scope reaches that container alone.
other = "c" + uuid.uuid4().hex[:12]
keyed.create_container(other).upload_blob("x", b"x")
scoped = blobs("Storage Blob Data Reader", f"/blobServices/default/containers/{name}")
assert scoped.get_blob_client(name, "a.txt").download_blob().readall() == b"by token"
refused(lambda: scoped.get_blob_client(other, "x").download_blob())
refused(lambda: list(scoped.list_containers()))
checks += 1

# A token whose issuer the server does not trust (another data directory's): 401 with the
# challenge; and the SDK asked for Storage's scope.
stranger = Credential(minted("Storage Blob Data Owner", data=OTHER))
error = refused(
    lambda: BlobServiceClient(url, credential=stranger).get_blob_client(name, "a.txt").download_blob(),
    401,
    "InvalidAuthenticationInfo",
)
challenge = error.response.headers["WWW-Authenticate"]
assert challenge.startswith("Bearer authorization_uri=https://login.microsoftonline.com/"), challenge
assert "resource_id=https://storage.azure.com" in challenge, challenge
assert "https://storage.azure.com/.default" in stranger.scopes, stranger.scopes
checks += 1

# User delegation: a key for a token's principal, and SAS signed with it, which allow no more
# than both the signature and the principal's roles.
from datetime import timedelta  # noqa: E402

from azure.storage.blob import BlobClient, BlobSasPermissions, generate_blob_sas  # noqa: E402

now = datetime.now(timezone.utc)
delegating = blobs("Storage Blob Data Contributor")
key = delegating.get_user_delegation_key(now - timedelta(minutes=1), now + timedelta(hours=1))


def delegated(blob, permission, key=key):
    sas = generate_blob_sas(keyed.account_name, name, blob, user_delegation_key=key,
                            permission=permission, expiry=now + timedelta(hours=1))
    return BlobClient(url, container_name=name, blob_name=blob, credential=sas)


assert delegated("a.txt", BlobSasPermissions(read=True)).download_blob().readall() == b"by token"
delegated("d.txt", BlobSasPermissions(write=True, create=True)).upload_blob(b"delegated")
assert container.download_blob("d.txt").readall() == b"delegated"
# What the signature does not grant, refused.
refused(lambda: delegated("a.txt", BlobSasPermissions(read=True)).upload_blob(b"no", overwrite=True))
# A reader's key signs a write: refused, the principal may not write.
reader_key = blobs("Storage Blob Data Reader").get_user_delegation_key(now - timedelta(minutes=1), now + timedelta(hours=1))
writes = delegated("e.txt", BlobSasPermissions(write=True, create=True), reader_key)
refused(lambda: writes.upload_blob(b"no"))
assert delegated("a.txt", BlobSasPermissions(read=True), reader_key).download_blob().readall() == b"by token"
# A key is a token's alone, for seven days at most; a forged key signs nothing.
refused(lambda: keyed.get_user_delegation_key(now, now + timedelta(hours=1)), 403, "AuthenticationFailed")
refused(lambda: delegating.get_user_delegation_key(now, now + timedelta(days=7, minutes=5)), 400, "InvalidInput")
key.value = "Zm9yZ2Vk" * 4
refused(lambda: delegated("a.txt", BlobSasPermissions(read=True)).download_blob(), 403, "AuthenticationFailed")
checks += 1

# The management API: a container's own retention policy and legal holds.
from urllib.parse import urlsplit  # noqa: E402

from azure.core import MatchConditions  # noqa: E402
from azure.mgmt.storage import StorageManagementClient  # noqa: E402
from azure.mgmt.storage.models import ImmutabilityPolicy, LegalHold  # noqa: E402

origin = "{0.scheme}://{0.netloc}".format(urlsplit(url))
account = keyed.account_name
MANAGEMENT = "https://management.azure.com/"


def under(etag):
    """If-Match of a policy's etag, as the SDK sends it."""
    return {"etag": etag, "match_condition": MatchConditions.IfNotModified}


def management(role, audience=MANAGEMENT):
    credential = Credential(minted(role, audience=audience))
    return StorageManagementClient(credential, str(uuid.uuid4()), base_url=origin,
                                   credential_scopes=[MANAGEMENT + ".default"])


def arm_refused(call, status, code):
    try:
        call()
    except HttpResponseError as error:
        assert error.status_code == status, (error.status_code, error)
        assert error.error.code == code, (error.error.code, error)
        return
    raise AssertionError("not refused")


arm = management("Storage Account Contributor").blob_containers
kept = "c" + uuid.uuid4().hex[:12]
box = keyed.create_container(kept)
box.upload_blob("old", b"kept")
log = box.get_blob_client("log")
log.create_append_blob()
policy = arm.create_or_update_immutability_policy(
    "group", account, kept,
    parameters=ImmutabilityPolicy(immutability_period_since_creation_in_days=1,
                                  allow_protected_append_writes=True))
assert (policy.immutability_period_since_creation_in_days, policy.state) == (1, "Unlocked"), policy
assert box.get_container_properties().has_immutability_policy
refused(lambda: box.upload_blob("old", b"over", overwrite=True), 409, "BlobImmutableDueToPolicy")
refused(lambda: box.delete_blob("old"), 409, "BlobImmutableDueToPolicy")
box.upload_blob("new", b"created")
log.append_block(b"line\n")
policy = arm.lock_immutability_policy("group", account, kept, **under(policy.etag))
assert policy.state == "Locked", policy
policy = arm.extend_immutability_policy(
    "group", account, kept, **under(policy.etag),
    parameters=ImmutabilityPolicy(immutability_period_since_creation_in_days=2,
                                  allow_protected_append_writes=True))
assert policy.immutability_period_since_creation_in_days == 2, policy
arm_refused(lambda: arm.delete_immutability_policy("group", account, kept, **under(policy.etag)),
            409, "ContainerImmutabilityPolicyLocked")
arm_refused(lambda: arm.lock_immutability_policy("group", account, kept, **under('"stale"')),
            412, "ContainerImmutabilityPolicyFailure")
refused(lambda: box.delete_container(), 409, "ContainerImmutabilityPolicyLocked")
checks += 1

held = arm.set_legal_hold("group", account, kept, LegalHold(tags=["Case1", "audit"]))
assert held.has_legal_hold and held.tags == ["case1", "audit"], held
refused(lambda: log.append_block(b"more"), 409, "BlobImmutableDueToLegalHold")
container = arm.get("group", account, kept)
assert container.has_legal_hold and container.has_immutability_policy, container
assert [t.tag for t in container.legal_hold.tags] == ["case1", "audit"], container.legal_hold
held = arm.clear_legal_hold("group", account, kept, LegalHold(tags=["case1", "audit"]))
assert not held.has_legal_hold, held
log.append_block(b"again\n")
# A data role manages nothing; a token for Storage's audience is not one for management.
arm_refused(lambda: management("Storage Blob Data Reader").blob_containers.set_legal_hold(
    "group", account, kept, LegalHold(tags=["nope"])), 403, "AuthorizationFailed")
arm_refused(lambda: management("Storage Account Contributor", "https://storage.azure.com").blob_containers.get(
    "group", account, kept), 401, "InvalidAuthenticationToken")
checks += 1


def named(service, role, name):
    """The client of the queue or table `name` (by `service`'s type), with a token for `role`."""
    endpoint = service.from_connection_string(CONNECTION).url
    client = service(endpoint, credential=Credential(minted(role)))
    if service is QueueServiceClient:
        return client.get_queue_client(name)
    return client.get_table_client(name)


# Queues: a sender sends and may not receive; a processor receives and deletes.
queue_name = "q" + uuid.uuid4().hex[:12]


def queue(role):
    return named(QueueServiceClient, role, queue_name)


queue("Storage Queue Data Contributor").create_queue()
sender = queue("Storage Queue Data Message Sender")
sender.send_message("hello")
refused(lambda: list(sender.receive_messages()))
processor = queue("Storage Queue Data Message Processor")
[message] = list(processor.receive_messages())
assert message.content == "hello"
processor.delete_message(message)
refused(lambda: processor.send_message("no"))
refused(lambda: queue("Storage Queue Data Reader").delete_queue())
checks += 1

# Tables: a contributor creates and writes; a reader reads and may not write.
table_name = "t" + uuid.uuid4().hex[:12]


def table(role):
    return named(TableServiceClient, role, table_name)


writer = table("Storage Table Data Contributor")
writer.create_table()
writer.upsert_entity({"PartitionKey": "p", "RowKey": "r", "value": 7})
table_reader = table("Storage Table Data Reader")
assert table_reader.get_entity("p", "r")["value"] == 7
refused(lambda: table_reader.upsert_entity({"PartitionKey": "p", "RowKey": "s"}))
refused(lambda: table_reader.delete_entity("p", "r"))
# A blob role grants nothing on tables.
refused(lambda: table("Storage Blob Data Owner").get_entity("p", "r"))
checks += 1

# Cosmos DB: the database and container made with the key (a token never manages them).
from azure.cosmos import CosmosClient, PartitionKey  # noqa: E402
from azure.cosmos.exceptions import CosmosHttpResponseError  # noqa: E402

KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
keyed_cosmos = CosmosClient(COSMOS, credential=KEY)
database = keyed_cosmos.create_database("d" + uuid.uuid4().hex[:12])
database.create_container("orders", PartitionKey("/pk"))
database.create_container("other", PartitionKey("/pk"))


def cosmos(role, scope="/", audience=None):
    return CosmosClient(COSMOS, credential=Credential(minted(role, scope, audience=audience)))


def cosmos_refused(call, substatus):
    try:
        call()
    except CosmosHttpResponseError as error:
        assert error.status_code == 403, (error.status_code, error)
        assert error.sub_status == substatus, (error.sub_status, error)
        return
    raise AssertionError("not refused")


contributor = cosmos("Cosmos DB Built-in Data Contributor").get_database_client(database.id)
orders = contributor.get_container_client("orders")
orders.create_item({"id": "1", "pk": "a", "n": 1})
orders.upsert_item({"id": "2", "pk": "a", "n": 2})
orders.replace_item("2", {"id": "2", "pk": "a", "n": 3})
orders.patch_item("1", "a", [{"op": "incr", "path": "/n", "value": 10}])
assert orders.read_item("1", "a")["n"] == 11
assert sorted(i["id"] for i in orders.query_items("SELECT * FROM c", enable_cross_partition_query=True)) == ["1", "2"]
orders.delete_item("2", "a")
# Managing databases and containers is never a token's, even a contributor's (5300).
cosmos_refused(lambda: cosmos("Cosmos DB Built-in Data Contributor").create_database("nope"), 5300)
cosmos_refused(lambda: contributor.create_container("nope", PartitionKey("/pk")), 5300)
checks += 1

reader = cosmos("Cosmos DB Built-in Data Reader").get_database_client(database.id).get_container_client("orders")
assert reader.read_item("1", "a")["n"] == 11
assert [i["id"] for i in reader.query_items("SELECT * FROM c", partition_key="a")] == ["1"]
cosmos_refused(lambda: reader.create_item({"id": "3", "pk": "a"}), 5301)
cosmos_refused(lambda: reader.delete_item("1", "a"), 5301)
checks += 1

# A role at one container's scope reaches that container alone.
scoped = cosmos("Cosmos DB Built-in Data Contributor", f"/dbs/{database.id}/colls/orders")
scoped.get_database_client(database.id).get_container_client("orders").upsert_item({"id": "4", "pk": "b"})
other_container = scoped.get_database_client(database.id).get_container_client("other")
cosmos_refused(lambda: other_container.upsert_item({"id": "4", "pk": "b"}), 5301)
checks += 1

# A Storage role grants nothing here, even in a token for Cosmos DB's audience; a token for
# Storage's audience, or a stranger's, is refused 401.
storage_role = lambda: cosmos("Storage Blob Data Owner", audience="https://cosmos.azure.com")  # noqa: E731
cosmos_refused(lambda: storage_role().get_database_client(database.id).read(), 5301)
for credential in [
    Credential(minted("Cosmos DB Built-in Data Reader", audience="https://storage.azure.com")),
    Credential(minted("Cosmos DB Built-in Data Reader", data=OTHER)),
]:
    try:
        CosmosClient(COSMOS, credential=credential).get_database_client(database.id).read()
        raise AssertionError("a token was taken")
    except CosmosHttpResponseError as error:
        assert error.status_code == 401, error
checks += 1

# Resource tokens: a user's permissions made with the key, each token reaching exactly what its
# permission names (its container, its mode, its partition), and nothing once it is deleted.
alice = keyed_cosmos.get_database_client(database.id).create_user({"id": "alice"})
orders_link = f"dbs/{database.id}/colls/orders"
read_orders = alice.create_permission({"id": "read-orders", "permissionMode": "Read", "resource": orders_link})
write_a = alice.create_permission({"id": "write-a", "permissionMode": "All", "resource": orders_link,
                                   "resourcePartitionKey": ["a"]})
assert read_orders.properties["_token"].startswith("type=resource&ver=1.0&sig="), read_orders.properties


def by_permission(permission, container="orders"):
    client = CosmosClient(COSMOS, credential={orders_link: permission.properties["_token"]})
    return client.get_database_client(database.id).get_container_client(container)


def resource_refused(call, status):
    try:
        call()
    except CosmosHttpResponseError as error:
        assert error.status_code == status, (error.status_code, error)
        return
    raise AssertionError("not refused")


reading = by_permission(read_orders)
assert reading.read_item("1", "a")["n"] == 11
assert [i["id"] for i in reading.query_items("SELECT * FROM c", partition_key="a")] == ["1"]
resource_refused(lambda: reading.create_item({"id": "7", "pk": "a"}), 403)
writing = by_permission(write_a)
writing.upsert_item({"id": "5", "pk": "a", "by": "alice"})
assert orders.read_item("5", "a")["by"] == "alice"
resource_refused(lambda: writing.upsert_item({"id": "6", "pk": "b"}), 403)
resource_refused(lambda: by_permission(write_a, "other").upsert_item({"id": "6", "pk": "a"}), 403)
checks += 1

# One permission a resource (and partition) for a user, as Azure has it: another is 409, made
# or replaced onto it, and the scope is free again once its permission is deleted.
resource_refused(lambda: alice.create_permission(
    {"id": "all-orders", "permissionMode": "All", "resource": orders_link}), 409)
resource_refused(lambda: alice.replace_permission("write-a", {
    "id": "write-a", "permissionMode": "All", "resource": orders_link}), 409)
assert sorted(p["id"] for p in alice.list_permissions()) == ["read-orders", "write-a"]
alice.delete_permission("write-a")
resource_refused(lambda: writing.upsert_item({"id": "5", "pk": "a"}), 401)
again = alice.create_permission({"id": "write-a-again", "permissionMode": "Read", "resource": orders_link,
                                 "resourcePartitionKey": ["a"]})
assert again.properties["resourcePartitionKey"] == ["a"], again.properties
alice.delete_permission("write-a-again")
assert [u["id"] for u in keyed_cosmos.get_database_client(database.id).list_users()] == ["alice"]
# A token never manages users (5300), nor does a resource token reach them (403).
cosmos_refused(lambda: list(cosmos("Cosmos DB Built-in Data Contributor").get_database_client(database.id).list_users()), 5300)
checks += 1

print(f"python tokens: {checks} passed")
