"""Every endpoint over HTTPS (`ifmatch serve --https`), with the official SDKs unchanged: blobs,
queues and tables through one connection string whose endpoints are `https://`, the client
trusting the certificate the server made (REQUESTS_CA_BUNDLE) and nothing else; a SAS for HTTPS
only is taken over HTTPS; a bearer token, which the SDKs send over HTTPS only, reaches the server
(one it cannot verify is refused 401 with the challenge: tokens.py has the rest).

Usage: python https.py CONNECTION_STRING
"""

import sys
import uuid
from datetime import datetime, timedelta, timezone

from azure.core.credentials import AccessToken
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableServiceClient
from azure.storage.blob import AccountSasPermissions, BlobServiceClient, ResourceTypes, generate_account_sas
from azure.storage.queue import QueueServiceClient

CONNECTION = sys.argv[1]
checks = 0

blobs = BlobServiceClient.from_connection_string(CONNECTION)
assert blobs.url.startswith("https://"), blobs.url
container = blobs.create_container("c" + uuid.uuid4().hex[:12])
container.upload_blob("a.txt", b"over tls")
assert container.download_blob("a.txt").readall() == b"over tls"
checks += 1

sas = generate_account_sas(
    blobs.account_name,
    blobs.credential.account_key,
    ResourceTypes(object=True),
    AccountSasPermissions(read=True),
    datetime.now(timezone.utc) + timedelta(hours=1),
    protocol="https",
)
by_sas = BlobServiceClient(blobs.url, credential=sas)
assert by_sas.get_blob_client(container.container_name, "a.txt").download_blob().readall() == b"over tls"
checks += 1


class Token:
    """A credential as DefaultAzureCredential is one, giving a token no issuer signed."""

    def get_token(self, *scopes, **kwargs):
        return AccessToken("not.a.token", int(datetime.now(timezone.utc).timestamp()) + 3600)


try:
    BlobServiceClient(blobs.url, credential=Token()).get_blob_client(container.container_name, "a.txt").download_blob()
    raise AssertionError("a bearer token was taken")
except HttpResponseError as error:
    assert error.status_code == 401, error
    assert error.error_code == "InvalidAuthenticationInfo", error
checks += 1

queues = QueueServiceClient.from_connection_string(CONNECTION)
assert queues.url.startswith("https://"), queues.url
queue = queues.create_queue("q" + uuid.uuid4().hex[:12])
queue.send_message("hello")
assert [m.content for m in queue.receive_messages()] == ["hello"]
checks += 1

tables = TableServiceClient.from_connection_string(CONNECTION)
assert tables.url.startswith("https://"), tables.url
table = tables.create_table("t" + uuid.uuid4().hex[:12])
table.upsert_entity({"PartitionKey": "p", "RowKey": "r", "value": 7})
assert table.get_entity("p", "r")["value"] == 7
checks += 1

print(f"python https: {checks} passed")
