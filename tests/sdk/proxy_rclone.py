"""rclone (Debian's) through `ifmatch proxy`, with a container SAS that names the proxy, as a
user behind the proxy configures it: an upload in one request and one in blocks, a
server-side copy and a server-side move (Copy Blob, whose `x-ms-copy-source` names the
proxy, not the origin), a listing, reads, and `rclone check`'s MD5s. The container is made,
and the SAS signed, with Azure's Python SDK.

With --signed-copy, also a copy the Python SDK signs with the account's key (Shared Key signs
the source field, so the proxy leaves it naming the proxy: `ifmatch serve` knows itself by
`X-Forwarded-Host`; Azure and Azurite do not).

Usage: proxy_rclone.py PROXY_CONNECTION_STRING ACCOUNT_KEY [--signed-copy]
"""

import datetime
import os
import subprocess
import sys
import tempfile

from azure.storage.blob import BlobServiceClient, ContainerSasPermissions, generate_container_sas

service = BlobServiceClient.from_connection_string(sys.argv[1])
container = service.get_container_client("rclone")
container.create_container()
sas = generate_container_sas(
    service.account_name,
    "rclone",
    account_key=sys.argv[2],
    permission=ContainerSasPermissions(
        read=True, add=True, create=True, write=True, delete=True, list=True
    ),
    expiry=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1),
)
work = tempfile.mkdtemp()
config = os.path.join(work, "rclone.conf")
with open(config, "w") as f:
    f.write(f"[p]\ntype = azureblob\nsas_url = {container.url}?{sas}\n")
passed = 0


def ok(what):
    global passed
    passed += 1


def rclone(*args):
    done = subprocess.run(
        ["rclone", "--config", config, "--retries", "1", "--low-level-retries", "1", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"rclone {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def at(name):
    return f"p:rclone/{name}"


small = os.path.join(work, "a.txt")
with open(small, "w") as f:
    f.write("hello rclone\n")
big = os.path.join(work, "big.bin")
data = os.urandom(3 * 1024 * 1024)
with open(big, "wb") as f:
    f.write(data)

rclone("copyto", small, at("a.txt"))
ok("uploaded in one request")
rclone("copyto", big, at("big.bin"), "--azureblob-chunk-size", "1M")
ok("uploaded in blocks")
out = rclone("copyto", at("a.txt"), at("b.txt"), "-v")
assert "server-side copy" in out, out
ok("copied server-side")
out = rclone("moveto", at("b.txt"), at("c.txt"), "-v")
# A server-side copy, then the source deleted (the listing below has no b.txt).
assert "server-side copy" in out or "Moved (server-side)" in out, out
ok("moved server-side")
assert sorted(rclone("lsf", "p:rclone").split()) == ["a.txt", "big.bin", "c.txt"]
ok("listed")
assert rclone("cat", at("c.txt")) == "hello rclone\n"
for copy in ("one.bin", "two.bin"):
    rclone("copyto", at("big.bin"), os.path.join(work, copy))
    with open(os.path.join(work, copy), "rb") as f:
        assert f.read() == data
ok("read, twice")
out = rclone("check", work, "p:rclone", "--include", "big.bin")
assert "0 differences found" in out, out
ok("checked by MD5")
if "--signed-copy" in sys.argv[3:]:
    copy = container.get_blob_client("d.txt")
    copy.start_copy_from_url(container.get_blob_client("a.txt").url)
    assert copy.download_blob().readall() == b"hello rclone\n"
    ok("copied with Shared Key")
print(f"rclone through the proxy: {passed} passed")
