// What the SDK suites assert of a call that must fail.

import assert from "node:assert/strict";

/** The error `promise` rejects with (it must reject). */
export async function failure(promise) {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail("it succeeded");
}
