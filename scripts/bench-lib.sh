# What every bench script shares: sourced, not run.
#   need_tools TOOL...          installs missing tools (wrk, nginx) from Debian's packages
#   check_rounds N              refuses fewer than 5 rounds (a median of fewer says little)
#   free_port / wait_port PORT  a free loopback port; waits until something listens on it
#   rps WRK_ARGS...             wrk's requests per second; fails on any error or non-2xx/3xx
#   rps_cpu PID WRK_ARGS...     "RATE MICROSECONDS": rps's rate, and the CPU time (user and system)
#                               process PID spent per request over the run: a cost that other
#                               tenants' load, which moves a rate on a shared machine, moves less
#   rps_cpu_pair PID_A URL_A PID_B URL_B [WRK_ARGS...]
#                               "RATE_A US_A RATE_B US_B": rps_cpu against both at once, a wrk each
#                               (WRK_ARGS given to both), so that whatever the machine does
#                               meanwhile hits both alike
#   started PID                 stops that server when the script exits, also when it was started
#                               inside $(...) (a subshell's array would be lost with it)
#   ratio LABEL "A..." "B..." [DIGITS]
#                               one line: the median of each side's runs (DIGITS decimals, 0 by
#                               default), and the median of the per-round ratios B/A with their
#                               min-max spread
#   callgrind_calls DUMP N      "A allocations, C clock reads": the calls a callgrind dump counts into
#                               the allocator and clock_gettime, each over N requests
#   connection SERVICE PORT     the development account's connection string for SERVICE (Blob,
#                               Queue or Table) on a loopback PORT; $cosmos_key is the Cosmos
#                               emulator's published key
# Each script alternates its sides round by round, so that a machine's drift hits both alike.
# Sourcing prints the host first (CPU model, cores, kernel, commit): hosts of one machine kind
# differ (the same bench has given ratios far apart on two of them), so a figure
# is quoted with the host it was measured on.

echo "host: $(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo), $(nproc) cores, Linux $(uname -r), commit $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo ' (changed)')"

# The keys Azurite and the Cosmos DB emulator publish, which `ifmatch serve` takes by default.
dev_key='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
cosmos_key='C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=='
connection() {
  echo "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=$dev_key;${1}Endpoint=http://127.0.0.1:$2/devstoreaccount1;"
}

bench_started=$(mktemp)
started() { echo "$1" >> "$bench_started"; }
stop_started() {
  while read -r pid; do kill "$pid" 2>/dev/null || true; done < "$bench_started"
  rm -f "$bench_started"
}
trap stop_started EXIT

need_tools() {
  local missing=()
  for tool in "$@"; do command -v "$tool" >/dev/null || missing+=("$tool"); done
  [ ${#missing[@]} -eq 0 ] && return
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
    || { echo "$(basename "$0"): cannot install ${missing[*]}" >&2; exit 1; }
}

check_rounds() {
  [ "$1" -ge 5 ] || { echo "$(basename "$0"): at least 5 rounds (got $1): a median of fewer says little" >&2; exit 1; }
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_port() {
  for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.05; done
  echo "$(basename "$0"): nothing listens on port $1" >&2
  exit 1
}

# Defaults a script may change before calling rps.
wrk_threads=2
wrk_connections=32
wrk_seconds=10
wrk_prefix=()

rps() {
  local out
  out=$("${wrk_prefix[@]}" wrk -t"$wrk_threads" -c"$wrk_connections" -d"${wrk_seconds}s" "$@")
  if grep -qE 'Socket errors|Non-2xx or 3xx' <<<"$out"; then
    echo "$(basename "$0"): errors in a run: $out" >&2
    exit 1
  fi
  awk '/^Requests\/sec:/ {print $2}' <<<"$out"
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

rps_cpu() {
  local pid=$1 before after out; shift
  before=$(cpu_ticks "$pid")
  out=$("${wrk_prefix[@]}" wrk -t"$wrk_threads" -c"$wrk_connections" -d"${wrk_seconds}s" "$@")
  after=$(cpu_ticks "$pid")
  if grep -qE 'Socket errors|Non-2xx or 3xx' <<<"$out"; then
    echo "$(basename "$0"): errors in a run: $out" >&2
    exit 1
  fi
  awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" \
    '/requests in/ {n = $1} /^Requests\/sec:/ {rate = $2} END {printf "%s %.3f\n", rate, ticks * 1e6 / hz / n}' <<<"$out"
}

rps_cpu_pair() {
  local pid_a=$1 url_a=$2 pid_b=$3 url_b=$4 out_a
  shift 4
  out_a=$(mktemp)
  rps_cpu "$pid_a" "$@" "$url_a" > "$out_a" &
  local job=$!
  local b; b=$(rps_cpu "$pid_b" "$@" "$url_b")
  wait "$job" && [ -s "$out_a" ] || { echo "$(basename "$0"): a paired run failed" >&2; exit 1; }
  echo "$(cat "$out_a") $b"
  rm -f "$out_a"
}

ratio() {
  python3 - "$@" <<'PY'
import statistics, sys
label, a, b = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
r = [y / x for x, y in zip(a, b)]
med = statistics.median
digits = int(sys.argv[4]) if len(sys.argv) > 4 else 0
print(f"{label:<44} {med(a):11.{digits}f} {med(b):11.{digits}f} {med(r):7.2f}  ({min(r):.2f}-{max(r):.2f})")
PY
}

# callgrind_calls DUMP REQUESTS -> "A allocations, C clock reads" a request: the calls a
# callgrind dump counts into the allocator's entry points (mimalloc's or the C library's) and
# into clock_gettime (a clock read costs tens of nanoseconds in a virtual machine, which
# instructions do not show).
callgrind_calls() {
  python3 - "$@" <<'PY'
import re, sys
path, requests = sys.argv[1], int(sys.argv[2])
kinds = {
    "allocations": re.compile(r"^(mi_malloc|mi_zalloc|mi_malloc_aligned|mi_zalloc_aligned|malloc|calloc)$"),
    "clock reads": re.compile(r"^clock_gettime"),
}
names, counts, target = {}, dict.fromkeys(kinds, 0), None
for line in open(path, errors="replace"):
    named = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line.strip())
    if named:
        number, name = named.groups()
        if name:
            names[number] = name
        target = names.get(number, "") if line.startswith("cfn=") else None
    elif line.startswith("calls=") and target is not None:
        for kind, pattern in kinds.items():
            if pattern.search(target):
                counts[kind] += int(line.split()[0][len("calls="):])
        target = None
print(", ".join(f"{counts[kind] / requests:.1f} {kind}" for kind in kinds))
PY
}
