"""The tally the SDK scripts keep: each check printed as it passes, the first failure ends the
run (exit 1), and a last line `NAME: N passed, F failed` that the test harnesses look for."""

import sys
import threading


class Checks:
    def __init__(self, name):
        self.name = name
        self.passed = 0

    def __call__(self, what, condition, detail=""):
        if not condition:
            print(f"FAIL {what} {detail}")
            print(f"{self.name}: {self.passed} passed, 1 failed")
            sys.exit(1)
        self.passed += 1
        print(f"ok {what}")

    def done(self):
        print(f"{self.name}: {self.passed} passed, 0 failed")


def status_of(call):
    """The status `call` fails with (an SDK's HTTP error, which carries it), or 0 when it
    succeeds."""
    try:
        call()
    except Exception as error:  # noqa: BLE001 - any SDK's error that carries a status
        if getattr(error, "status_code", None) is None:
            raise
        return error.status_code
    return 0


def refused(call, status, code):
    """Runs `call`, which must fail with `status` and Azure's error `code` (its error code or
    in its text): whether it did, and what it did instead."""
    try:
        call()
    except Exception as error:  # noqa: BLE001 - any SDK's error that carries a status
        if getattr(error, "status_code", None) is None:
            raise
        text = f"{getattr(error, 'error_code', None)} {error}"
        return error.status_code == status and code in text, f"{error.status_code} {text[:300]}"
    return False, "it succeeded"


def at_once(target, count, indexed=False):
    """Runs `target` in `count` threads at once (each given its index when `indexed`) and
    waits for them all."""
    threads = [threading.Thread(target=target, args=(i,) if indexed else ()) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
