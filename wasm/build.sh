#!/usr/bin/env bash
# Builds the Worker into build/ with worker-build, using the tools the test command installed
# (worker-build would otherwise download wasm-bindgen, wasm-opt and esbuild itself):
# wasm-bindgen from `cargo install wasm-bindgen-cli` at the version in Cargo.lock, wasm-opt and
# esbuild from this directory's node_modules (`npm ci`). Prints the size of the .wasm.
# Usage: wasm/build.sh [conformance | test]
set -euo pipefail
cd "$(dirname "$0")"
export WASM_BINDGEN_BIN="${WASM_BINDGEN_BIN:-$(command -v wasm-bindgen)}"
export WASM_OPT_BIN="${WASM_OPT_BIN:-$PWD/node_modules/.bin/wasm-opt}"
export ESBUILD_BIN="${ESBUILD_BIN:-$PWD/node_modules/.bin/esbuild}"
# `build.sh conformance`: the build with the backend conformance suite's route, in
# build-conformance/, for the tests (test/conformance.test.mjs); the Worker itself has none.
# A release build, as the Worker's: it reuses every dependency the first build compiled.
if [ "${1:-}" = conformance ]; then
  worker-build --release --out-dir build-conformance --features conformance
  exit
fi
# `build.sh test`: the test command's build, into build/ as the suites expect: the same code
# compiled for time, not size (Cargo.toml's `ci` profile, no wasm-opt pass). Its size is not
# the shipped one, which `build.sh` alone measures.
if [ "${1:-}" = test ]; then
  worker-build --profile ci --no-opt
  echo "worker wasm (test build, not the shipped size): $(stat -c %s build/index_bg.wasm) bytes raw"
  exit
fi
worker-build --release
wasm=build/index_bg.wasm
raw=$(stat -c %s "$wasm")
gz=$(gzip -9 -c "$wasm" | wc -c)
echo "worker wasm: $raw bytes raw, $gz bytes gzipped ($wasm)"
# Cloudflare's free plan takes a Worker of 3 MB compressed.
if [ "$gz" -gt 3000000 ]; then
  echo "build.sh: the Worker is $gz bytes gzipped: past Cloudflare's free plan (3 MB)" >&2
  exit 1
fi
