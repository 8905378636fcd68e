"""The tally the SDK scripts keep: each check printed as it passes, the first failure ends the
run (exit 1), and a last line `NAME: N passed, F failed` that the test harnesses look for."""

import sys


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
