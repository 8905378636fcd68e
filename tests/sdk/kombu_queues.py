"""kombu's Azure Storage Queues transport (`azurestoragequeues://`, what Celery workers use), unchanged,
against the Queue service: a producer publishes 200 messages, two consumers take them with
acknowledgements, and every message is delivered exactly once; an empty queue says so.

Usage: kombu_queues.py ACCOUNT_KEY QUEUE_ACCOUNT_URL   (exits 1 on the first failed check)
"""

import sys
import threading
import uuid

from checks import Checks, at_once
from kombu import Connection

check = Checks("kombu queues")


def main(key, account_url):
    url = f"azurestoragequeues://{key}@{account_url}"
    name = "k" + uuid.uuid4().hex[:12]
    with Connection(url, transport_options={"polling_interval": 0.05}) as connection:
        producer = connection.SimpleQueue(name)
        for n in range(200):
            producer.put({"n": n})
        check("a producer publishes 200 messages", producer.qsize() == 200, producer.qsize())
        producer.close()

    got, lock = [], threading.Lock()

    def consume():
        with Connection(url, transport_options={"polling_interval": 0.05}) as connection:
            queue = connection.SimpleQueue(name)
            while True:
                try:
                    message = queue.get(block=True, timeout=2)
                except queue.Empty:
                    break
                with lock:
                    got.append(message.payload["n"])
                message.ack()
            queue.close()

    at_once(consume, 2)
    check("two consumers get every message exactly once", sorted(got) == list(range(200)), len(got))
    with Connection(url) as connection:
        queue = connection.SimpleQueue(name)
        check("the queue is empty after", queue.qsize() == 0, queue.qsize())
        queue.close()
    check.done()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
