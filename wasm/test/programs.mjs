// Running the programs the suites drive (the Python SDK scripts of tests/sdk, the Rust SDK's
// program, the Azure CLI): each with its output collected, for the test to show when it fails.

import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

/** The virtual environment's Python (scripts/test makes it), or IFMATCH_PYTHON. */
export const python = process.env.IFMATCH_PYTHON ?? join(here, "../../.venv/bin/python");

/** `program` with `args`, and `env` over this process's: its exit code and all it printed. */
export function run(program, args, env = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out }));
  });
}

/** `script` of tests/sdk with `args`, under the virtual environment's Python. */
export function runPython(script, args) {
  return run(python, [join(here, "../../tests/sdk", script), ...args]);
}
