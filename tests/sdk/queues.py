"""The Queue service through Azure's own Python SDK (azure-storage-queue), unchanged, with the
connection string a user brings from Azurite: queues and their metadata, messages put, got,
peeked, updated and deleted with their pop receipts (a stale receipt refused, as an ETag),
visibility timeouts (a message got is invisible to the others until its time), dequeue counts
(how poison messages are found), clear, the documented limits one past each, eight consumers
racing for the messages of one queue (each message processed exactly once), and shared access
signatures (account and queue).

Usage: queues.py CONNECTION_STRING [RACED]   (exits 1 on the first failed check; prints a tally)
RACED: how many messages the eight consumers race for (200; fewer over a bucket, whose
consumers of one queue take turns).
"""

import sys
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone

from checks import Checks, at_once, refused
from azure.core.exceptions import ResourceExistsError
from azure.storage.queue import (
    AccountSasPermissions,
    QueueClient,
    QueueSasPermissions,
    QueueServiceClient,
    ResourceTypes,
    generate_account_sas,
    generate_queue_sas,
)

check = Checks("python queues")


def main(connection, raced=200):
    service = QueueServiceClient.from_connection_string(connection)
    fields = dict(part.split("=", 1) for part in connection.strip(";").split(";"))
    account, key = fields["AccountName"], fields["AccountKey"]
    name = "q" + uuid.uuid4().hex[:12]

    queue = service.create_queue(name, metadata={"team": "a"})
    check("create a queue", queue.queue_name == name)
    try:
        queue.create_queue(metadata={"team": "a"})
        same = "no error"
    except ResourceExistsError as error:
        same = error.status_code  # the SDK reads Azure's 204 so
    check("creating it again with the same metadata is 204 (the SDK says it exists)", same == 204, same)
    ok, why = refused(lambda: queue.create_queue(metadata={"team": "b"}), 409, "QueueAlreadyExists")
    check("creating it again with other metadata is 409 QueueAlreadyExists", ok, why)
    listed = [q.name for q in service.list_queues(name_starts_with=name[:5])]
    check("List Queues with a prefix lists it", name in listed, listed)
    with_metadata = [q for q in service.list_queues(name_starts_with=name, include_metadata=True)]
    check("List Queues includes metadata", with_metadata[0].metadata == {"team": "a"}, with_metadata)
    for i in range(3):
        service.create_queue(f"{name}-page{i}")
    pages = service.list_queues(name_starts_with=f"{name}-page", results_per_page=2).by_page()
    paged = [[q.name for q in page] for page in pages]
    check("List Queues in pages of 2", paged == [[f"{name}-page0", f"{name}-page1"], [f"{name}-page2"]], paged)
    queue.set_queue_metadata({"team": "c", "owner": "x"})
    properties = queue.get_queue_properties()
    check("metadata set and read back", properties.metadata == {"team": "c", "owner": "x"}, properties.metadata)
    check("an empty queue counts no message", properties.approximate_message_count == 0)
    for bad in ["ab", "A-queue", "a--b", "-ab", "x" * 64]:
        ok, why = refused(lambda: service.create_queue(bad), 400, "InvalidResourceName")
        check(f"the name {bad[:10]!r} is refused 400 InvalidResourceName", ok, why)

    # Put, peek, get (with its receipt and visibility), update, delete.
    sent = queue.send_message("hello <world> & \"all\"")
    check("Put Message answers an id, a receipt and its times", sent.id and sent.pop_receipt and sent.expires_on)
    peeked = queue.peek_messages()
    check("Peek Messages sees it, undequeued", [m.content for m in peeked] == ["hello <world> & \"all\""] and peeked[0].dequeue_count == 0, peeked)
    got = queue.receive_message(visibility_timeout=2)
    check("Get Messages gives it, dequeued once, with a receipt", got.content == "hello <world> & \"all\"" and got.dequeue_count == 1 and got.pop_receipt)
    check("while it is invisible, no other consumer gets it", queue.receive_message() is None)
    check("and Peek does not see it", queue.peek_messages() == [])
    updated = queue.update_message(got, pop_receipt=got.pop_receipt, content="changed", visibility_timeout=0)
    check("Update Message answers a new receipt", updated.pop_receipt and updated.pop_receipt != got.pop_receipt)
    ok, why = refused(lambda: queue.delete_message(got.id, got.pop_receipt), 404, "MessageNotFound")
    check("Delete Message with the stale receipt is 404 MessageNotFound, as Azure documents (an ETag)", ok, why)
    ok, why = refused(lambda: queue.update_message(got.id, got.pop_receipt, visibility_timeout=0), 404, "MessageNotFound")
    check("Update Message with the stale receipt is 404 MessageNotFound", ok, why)
    for forged in ["", "x", "AAAA" * 100, "%00", "\u00e9"]:
        ok, why = refused(lambda: queue.delete_message(got.id, forged or "-"), 404, "MessageNotFound")
        check(f"a forged receipt {forged[:8]!r} never matches (404)", ok, why)
    again = queue.receive_message(visibility_timeout=30)
    check("updated to visible now, it is got again, its text changed, dequeued twice", again.content == "changed" and again.dequeue_count == 2, again)
    queue.delete_message(again.id, again.pop_receipt)
    ok, why = refused(lambda: queue.delete_message(again.id, again.pop_receipt), 404, "MessageNotFound")
    check("deleted, it is 404 MessageNotFound", ok, why)
    check("the queue is empty", queue.peek_messages() == [] and queue.get_queue_properties().approximate_message_count == 0)

    # The SDK's base64 policies (what Azure Functions and most producers put on the wire).
    from azure.storage.queue import BinaryBase64DecodePolicy, BinaryBase64EncodePolicy, TextBase64DecodePolicy, TextBase64EncodePolicy
    text64 = QueueClient.from_connection_string(connection, name, message_encode_policy=TextBase64EncodePolicy(), message_decode_policy=TextBase64DecodePolicy())
    text64.send_message("caf\u00e9 <&>")
    got64 = text64.receive_message()
    check("a message put and got with the text base64 policies round-trips", got64.content == "caf\u00e9 <&>", got64)
    text64.delete_message(got64)
    binary = QueueClient.from_connection_string(connection, name, message_encode_policy=BinaryBase64EncodePolicy(), message_decode_policy=BinaryBase64DecodePolicy())
    binary.send_message(bytes(range(256)))
    check("and a binary one with the binary policies", binary.receive_message().content == bytes(range(256)))
    queue.clear_messages()

    # Visibility on put, and a message that expires.
    queue.send_message("later", visibility_timeout=3)
    queue.send_message("short", time_to_live=3)
    queue.send_message("forever", time_to_live=-1)
    check("a message put invisible is not got at once", [m.content for m in queue.peek_messages(max_messages=32)] == ["short", "forever"])
    time.sleep(3.5)
    contents = sorted(m.content for m in queue.receive_messages(messages_per_page=32, visibility_timeout=30))
    check("once visible it is got; past its time to live it is gone", contents == ["forever", "later"], contents)
    never = [m for m in queue.peek_messages()]
    check("a message that lives forever expires on 31 Dec 9999", all(m.expires_on is None or m.expires_on.year == 9999 for m in never))

    # Dequeue counts find a poison message.
    queue.clear_messages()
    check("Clear Messages empties the queue", queue.peek_messages() == [])
    queue.send_message("poison")
    for attempt in range(1, 4):
        message = queue.receive_message(visibility_timeout=1)
        check(f"a message never deleted comes back, dequeue count {attempt}", message is not None and message.dequeue_count == attempt, message)
        time.sleep(1.1)
    queue.clear_messages()

    # Documented limits, one past each.
    queue.send_message("x" * (64 * 1024))
    ok, why = refused(lambda: queue.send_message("x" * (64 * 1024 + 1)), 400, "MessageTooLarge")
    check("a message of 64 KiB is taken; one byte more is 400 MessageTooLarge", ok, why)
    ok, why = refused(lambda: queue.send_message("x", visibility_timeout=7 * 24 * 3600 + 1), 400, "OutOfRangeQueryParameterValue")
    check("a visibility timeout past 7 days is 400", ok, why)
    ok, why = refused(lambda: queue.receive_messages(max_messages=33, messages_per_page=33).next(), 400, "OutOfRangeQueryParameterValue")
    check("Get Messages of 33 is 400", ok, why)
    ok, why = refused(lambda: queue.receive_message(visibility_timeout=0), 400, "OutOfRangeQueryParameterValue")
    check("Get Messages with a visibility timeout of 0 is 400", ok, why)
    ok, why = refused(lambda: queue.send_message("x", time_to_live=0), 400, "OutOfRangeQueryParameterValue")
    check("a time to live of 0 is 400", ok, why)
    ok, why = refused(lambda: queue.send_message("x", visibility_timeout=10, time_to_live=5), 400, "OutOfRangeQueryParameterValue")
    check("a message invisible past its time to live is 400", ok, why)
    queue.clear_messages()

    # Eight consumers racing: every message processed exactly once.
    for i in range(raced):
        queue.send_message(f"job-{i}")
    done, lock = [], threading.Lock()

    def consume():
        mine = QueueClient.from_connection_string(connection, name)
        while True:
            batch = list(mine.receive_messages(messages_per_page=8, visibility_timeout=60, max_messages=8))
            if not batch:
                return
            for message in batch:
                mine.delete_message(message)
                with lock:
                    done.append(message.content)

    at_once(consume, 8)
    check(f"eight consumers processed {raced} messages, each exactly once", sorted(done) == sorted(f"job-{i}" for i in range(raced)), len(done))

    # Shared access signatures.
    expiry = datetime.now(timezone.utc) + timedelta(hours=1)
    sas = generate_queue_sas(account, name, key, permission=QueueSasPermissions(add=True, process=True), expiry=expiry)
    producer = QueueClient(account_url=service.url, queue_name=name, credential=sas)
    producer.send_message("via sas")
    check("a queue SAS with add and process puts and gets", producer.receive_message().content == "via sas")
    ok, why = refused(lambda: producer.peek_messages(), 403, "AuthorizationPermissionMismatch")
    check("a queue SAS without read cannot peek (403)", ok, why)
    other = QueueClient(account_url=service.url, queue_name=f"{name}-page0", credential=sas)
    ok, why = refused(lambda: other.send_message("x"), 403, "AuthenticationFailed")
    check("a queue SAS for one queue signs that queue: another is 403 AuthenticationFailed", ok, why)
    account_sas = generate_account_sas(account, key, ResourceTypes(service=True, object=True), AccountSasPermissions(list=True, add=True), expiry)
    limited = QueueServiceClient(account_url=service.url, credential=account_sas)
    check("an account SAS with list lists queues", name in [q.name for q in limited.list_queues(name_starts_with=name)])
    ok, why = refused(lambda: limited.create_queue(name + "-x"), 403, "Authorization")
    check("an account SAS without containers cannot create a queue (403)", ok, why)
    wrong = QueueServiceClient(account_url=service.url, credential={"account_name": account, "account_key": "AAAA" + key[4:]})
    ok, why = refused(lambda: list(wrong.list_queues()), 403, "AuthenticationFailed")
    check("a wrong key is 403 AuthenticationFailed", ok, why)

    # Access policies and service properties.
    from azure.storage.queue import AccessPolicy
    queue.set_queue_access_policy({"read-only": AccessPolicy(permission=QueueSasPermissions(read=True), expiry=expiry)})
    check("a stored access policy is kept", list(queue.get_queue_access_policy()) == ["read-only"])
    # A queue SAS that names a stored policy takes its permissions and expiry from it; a field
    # in both is 400; a policy removed revokes every signature that names it.
    queue.send_message("for the policy")
    named = generate_queue_sas(account, name, key, policy_id="read-only")
    reader = QueueClient(account_url=service.url, queue_name=name, credential=named)
    check("a SAS naming a stored policy peeks with the policy's read", len(reader.peek_messages()) == 1)
    ok, why = refused(lambda: reader.send_message("x"), 403, "AuthorizationPermissionMismatch")
    check("... and is refused what the policy does not permit (403)", ok, why)
    both = generate_queue_sas(account, name, key, policy_id="read-only", permission=QueueSasPermissions(read=True))
    ok, why = refused(lambda: QueueClient(account_url=service.url, queue_name=name, credential=both).peek_messages(), 400, "InvalidQueryParameterValue")
    check("a SAS giving permissions its stored policy also gives is 400", ok, why)
    unknown = generate_queue_sas(account, name, key, policy_id="nobody")
    ok, why = refused(lambda: QueueClient(account_url=service.url, queue_name=name, credential=unknown).peek_messages(), 403, "AuthenticationFailed")
    check("a SAS naming a policy the queue does not have is 403 AuthenticationFailed", ok, why)
    queue.set_queue_access_policy({"open-ended": AccessPolicy(permission=QueueSasPermissions(read=True))})
    ok, why = refused(lambda: reader.peek_messages(), 403, "AuthenticationFailed")
    check("removing the stored policy revokes the SAS that names it", ok, why)
    no_expiry = generate_queue_sas(account, name, key, policy_id="open-ended")
    ok, why = refused(lambda: QueueClient(account_url=service.url, queue_name=name, credential=no_expiry).peek_messages(), 403, "AuthenticationFailed")
    check("a SAS whose policy and itself give no expiry is 403", ok, why)
    timed = generate_queue_sas(account, name, key, policy_id="open-ended", expiry=expiry)
    check("... and with its own expiry it reads", len(QueueClient(account_url=service.url, queue_name=name, credential=timed).peek_messages()) == 1)
    six = {f"p{i}": AccessPolicy(permission=QueueSasPermissions(read=True), expiry=expiry) for i in range(6)}
    ok, why = refused(lambda: queue.set_queue_access_policy(six), 400, "")
    check("a sixth stored policy is refused (400)", ok, why)
    props = service.get_service_properties()
    check("the service's properties are answered", "cors" in props)
    # CORS: the rules set are applied, a browser's preflight answered without credentials.
    from azure.storage.queue import CorsRule
    import requests
    app = "https://app.example"
    service.set_service_properties(cors=[CorsRule([app], ["GET", "PUT"], allowed_headers=["x-ms-*", "content-type"], exposed_headers=["x-ms-request-id"], max_age_in_seconds=120)])
    kept = service.get_service_properties()
    check("CORS rules set are kept, and what the request left out too", len(kept["cors"]) == 1 and kept["cors"][0].allowed_origins == app and kept["hour_metrics"] is not None, kept["cors"])
    preflight = requests.options(queue.url, headers={"Origin": app, "Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "x-ms-version,content-type"})
    check("a preflight a rule allows is 200 with its Access-Control headers",
          preflight.status_code == 200 and preflight.headers.get("access-control-allow-origin") == app and preflight.headers.get("access-control-max-age") == "120" and "PUT" in preflight.headers.get("access-control-allow-methods", ""),
          (preflight.status_code, dict(preflight.headers)))
    stranger = requests.options(queue.url, headers={"Origin": "https://else.example", "Access-Control-Request-Method": "PUT"})
    check("a preflight no rule allows is 403 CorsPreflightFailure", stranger.status_code == 403 and "CorsPreflightFailure" in stranger.text, stranger.status_code)
    bare = requests.options(queue.url, headers={"Origin": app})
    check("an OPTIONS without Access-Control-Request-Method is 400", bare.status_code == 400, bare.status_code)
    seen = {}
    queue.get_queue_properties(headers={"Origin": app}, raw_response_hook=lambda r: seen.update({k.lower(): v for k, v in r.http_response.headers.items()}))
    check("an actual request from an allowed origin carries its Access-Control headers",
          seen.get("access-control-allow-origin") == app and seen.get("access-control-expose-headers") == "x-ms-request-id", seen)
    service.set_service_properties(cors=[])

    service.delete_queue(name)
    ok, why = refused(lambda: queue.get_queue_properties(), 404, "QueueNotFound")
    check("a deleted queue is 404 QueueNotFound", ok, why)
    ok, why = refused(lambda: queue.send_message("x"), 404, "QueueNotFound")
    check("a message to a deleted queue is 404", ok, why)
    check.done()


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:3]))
