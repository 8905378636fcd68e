"""A user delegation key got through one instance of a fleet signs SAS that every instance
judges alike, by the roles the development principal's token carried when it got the key
(kept in the fleet's records, not in the memory of the instance that gave it): the official
Python SDK (azure-storage-blob) unchanged, over HTTPS.

Usage: python fleet_delegation.py BLOB_ENDPOINT_A BLOB_ENDPOINT_B CONTRIBUTOR_TOKEN READER_TOKEN
(the tokens minted by `ifmatch token --backend` for the fleet; REQUESTS_CA_BUNDLE names both
instances' certificates)
"""

import sys
import uuid
from datetime import datetime, timedelta, timezone

from azure.core.credentials import AccessToken
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobClient, BlobSasPermissions, BlobServiceClient, generate_blob_sas

A, B, CONTRIBUTOR, READER = sys.argv[1:5]
checks = 0


class Credential:
    """What DefaultAzureCredential is to the SDKs: get_token gives this token."""

    def __init__(self, token):
        self.token = token

    def get_token(self, *scopes, **kwargs):
        return AccessToken(self.token, int(datetime.now(timezone.utc).timestamp()) + 3600)


now = datetime.now(timezone.utc)
through_a = BlobServiceClient(A, credential=Credential(CONTRIBUTOR))
name = f"f{uuid.uuid4().hex[:12]}"
container = through_a.create_container(name)
container.upload_blob("a.txt", b"kept")


def delegated(endpoint, blob, permission, key):
    sas = generate_blob_sas("devstoreaccount1", name, blob, user_delegation_key=key,
                            permission=permission, expiry=now + timedelta(hours=1))
    return BlobClient(endpoint, container_name=name, blob_name=blob, credential=sas)


# A contributor's key, got through A, writes and reads through B.
key = through_a.get_user_delegation_key(now - timedelta(minutes=1), now + timedelta(hours=1))
delegated(B, "b.txt", BlobSasPermissions(write=True, create=True), key).upload_blob(b"through b")
assert delegated(B, "a.txt", BlobSasPermissions(read=True), key).download_blob().readall() == b"kept"
assert container.download_blob("b.txt").readall() == b"through b"
checks += 1

# A reader's key, got through B, reads through A and writes nowhere.
through_b = BlobServiceClient(B, credential=Credential(READER))
reader_key = through_b.get_user_delegation_key(now - timedelta(minutes=1), now + timedelta(hours=1))
assert delegated(A, "a.txt", BlobSasPermissions(read=True), reader_key).download_blob().readall() == b"kept"
for endpoint in (A, B):
    try:
        delegated(endpoint, "c.txt", BlobSasPermissions(write=True, create=True), reader_key).upload_blob(b"no")
        raise AssertionError("a reader's key signed a write")
    except HttpResponseError as error:
        assert error.status_code == 403, error
        assert error.error_code == "AuthorizationPermissionMismatch", error.error_code
checks += 1

print(f"python fleet delegation: {checks} passed")
