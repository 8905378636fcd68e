#!/usr/bin/env bash
# The test command. Installs what the checks need (rustfmt, clippy, the wasm32 target,
# redis-server; idempotently, loudly failing when it cannot), then runs everything CI checks:
# formatting, clippy, the core, the blob front, the Table and Cosmos dialects on wasm32, that the fuzz
# targets compile, every test of the workspace
# (benches included, once each in test mode, so they keep compiling) and the doc tests.
# Then the Worker (wasm/): installs wasm-bindgen-cli (the version in wasm/Cargo.lock),
# worker-build and the node packages (npm ci), builds it, and runs the shared end-to-end suite
# against the native server and the Worker in miniflare, and the records conformance suite
# inside the Worker against its Durable Object (a second, debug build with the suite's route).
# It also installs golang-go, for the differential test of the Tower layer against Go's
# net/http ServeContent, the Azure Python SDK into .venv (the JS SDK is a node package), for
# the SDK tests against both targets (wasm/test/sdk.test.mjs) with adlfs and Debian's rclone,
# and the servers the
# object-store tests run against: moto's S3 server (into .venv) and Azurite (npm, under
# target/azurite), and Debian's Chromium with playwright-core (npm ci in tests/browser) for a real
# browser through the proxy. Then every block of README.md and docs/ (scripts/doc-blocks: the
# shell, Python and JavaScript ones; the Rust ones are examples/tests/doc_blocks.rs). Last, the
# field's HTTP caching suite against the proxy (scripts/cache-tests,
# which installs it from npm under target/cache-tests), with a floor.
# Usage: bash scripts/test
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }
die() { printf 'scripts/test: %s\n' "$*" >&2; exit 1; }

# One build from scratch: incremental caches would only take disk (several GB over the test
# binaries). A caller may still set it.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

step "disk (a fresh build of every target peaks at 2.6 GB under target/, measured)"
df -h . | tail -n 1
free_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
[ "${free_kb:-0}" -ge $((3 * 1024 * 1024)) ] \
  || die "less than 3 GB free here ($((free_kb / 1024)) MB): the build would fail halfway; free some disk first"

step "toolchain"
command -v cargo >/dev/null || die "cargo is not installed"
if command -v rustup >/dev/null; then
  for component in rustfmt clippy; do
    rustup component list --installed | grep -q "^${component}" \
      || rustup component add "$component" || die "cannot install the $component component"
  done
  rustup target list --installed | grep -qx wasm32-unknown-unknown \
    || rustup target add wasm32-unknown-unknown || die "cannot install the wasm32-unknown-unknown target"
fi
cargo --version

step "redis-server (the distributed mode's tests start their own)"
if ! command -v redis-server >/dev/null; then
  command -v apt-get >/dev/null || die "redis-server is missing and there is no apt-get to install it"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; } \
    || die "cannot install redis-server from Debian's packages"
fi
redis-server --version

step "go (the Tower layer is compared with Go's net/http ServeContent)"
if ! command -v go >/dev/null; then
  command -v apt-get >/dev/null || die "go is missing and there is no apt-get to install it"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null; } \
    || die "cannot install golang-go from Debian's packages"
fi
go version

step "rclone (the SDK tests copy and move blobs server-side with Debian's rclone)"
if ! command -v rclone >/dev/null; then
  command -v apt-get >/dev/null || die "rclone is missing and there is no apt-get to install it"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rclone >/dev/null; } \
    || die "cannot install rclone from Debian's packages"
fi
rclone version | sed -n 1p

step "python: the Azure SDK in a virtual environment (.venv)"
command -v python3 >/dev/null || die "python3 is needed for the Azure Python SDK's tests"
if [ ! -x .venv/bin/python ]; then
  rm -rf .venv
  if ! python3 -m venv .venv 2>/dev/null; then
    # Debian's python3 keeps venv (ensurepip) in a package of its own.
    rm -rf .venv
    command -v apt-get >/dev/null || die "python3 -m venv failed and there is no apt-get to install python3-venv"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null; } \
      || die "cannot install python3-venv from Debian's packages"
    python3 -m venv .venv || die "python3 -m venv .venv failed"
  fi
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -r tests/sdk/requirements.txt \
  || die "cannot install tests/sdk/requirements.txt into .venv"
.venv/bin/python -c 'import azure.storage.blob as b; print("azure-storage-blob", b.__version__)'

step "the Azure CLI in a virtual environment of its own (target/az-venv: it is large)"
if [ "$(target/az-venv/bin/az version --query '"azure-cli"' -o tsv 2>/dev/null)" != "2.91.0" ]; then
  python3 -m venv target/az-venv || die "cannot make target/az-venv"
  target/az-venv/bin/python -m pip install -q --disable-pip-version-check azure-cli==2.91.0 \
    || die "cannot install azure-cli into target/az-venv"
fi
echo "azure-cli $(target/az-venv/bin/az version --query '"azure-cli"' -o tsv)"

step "the Worker's tools: wasm-bindgen-cli, worker-build, node packages"
bindgen=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' wasm/Cargo.lock)
[ -n "$bindgen" ] || die "no wasm-bindgen in wasm/Cargo.lock"
if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $bindgen" ]; then
  # Not --locked: its lock file names a webpki-roots that the registry mirror does not carry.
  cargo install -q wasm-bindgen-cli --version "$bindgen" || die "cannot install wasm-bindgen-cli $bindgen"
fi
if ! command -v worker-build >/dev/null; then
  cargo install -q worker-build --version 0.8.7 --locked || die "cannot install worker-build"
fi
command -v node >/dev/null && command -v npm >/dev/null || die "node and npm are needed for the Worker's tests"
(cd wasm && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci in wasm/ failed"
wasm-bindgen --version; worker-build --version; node --version

step "azurite (the object-store tests keep blob bytes in it, as in moto's S3 server)"
if [ ! -x target/azurite/node_modules/.bin/azurite-blob ]; then
  npm install --prefix target/azurite --no-audit --no-fund --loglevel=error azurite@3.35.0 \
    || die "cannot install azurite from the npm registry"
fi
target/azurite/node_modules/.bin/azurite-blob --version
.venv/bin/moto_server --help >/dev/null || die "moto_server is missing from .venv"

step "chromium and playwright-core (a real browser visits a site through the proxy)"
if [ ! -x /usr/bin/chromium ]; then
  command -v apt-get >/dev/null || die "chromium is missing and there is no apt-get to install it"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
    || die "cannot install chromium from Debian's packages"
fi
if [ ! -d tests/browser/node_modules/playwright-core ]; then
  (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error) \
    || die "npm ci in tests/browser failed"
fi
# Debian's launcher script complains on stderr before it prints the version.
/usr/bin/chromium --version 2>/dev/null

