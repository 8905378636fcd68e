"""Entra ID bearer tokens with the official Python SDKs unchanged, as production code sends them
(a credential object, as DefaultAzureCredential is one), over HTTPS: each token minted by
`ifmatch token` with a role at a scope; what the role permits is done, what it does not is
refused 403 AuthorizationPermissionMismatch; a token the server's issuer did not sign is refused
401 InvalidAuthenticationInfo with the challenge the SDKs read.

Usage: python tokens.py CONNECTION_STRING IFMATCH_BINARY DATA_DIRECTORY OTHER_DATA_DIRECTORY
(the server's data directory, whose development issuer signs the tokens; another one's, whose
tokens the server must refuse)
"""

import subprocess
import sys
import uuid
from datetime import datetime, timezone

from azure.core.credentials import AccessToken
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

CONNECTION, BINARY, DATA, OTHER = sys.argv[1:5]
checks = 0


def minted(role, scope="/", data=DATA):
    args = [BINARY, "token", "--data", data, "--role", role, "--scope", scope]
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

# Queues: a sender sends and may not receive; a processor receives and deletes.
queues_url = QueueServiceClient.from_connection_string(CONNECTION).url
queue_name = "q" + uuid.uuid4().hex[:12]


def queue(role):
    client = QueueServiceClient(queues_url, credential=Credential(minted(role)))
    return client.get_queue_client(queue_name)


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
tables_url = TableServiceClient.from_connection_string(CONNECTION).url
table_name = "t" + uuid.uuid4().hex[:12]


def table(role):
    client = TableServiceClient(tables_url, credential=Credential(minted(role)))
    return client.get_table_client(table_name)


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

print(f"python tokens: {checks} passed")
