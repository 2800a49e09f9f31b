# Shared setup for benchmark scripts: tools, the release binary, corpora.
# Source it; it sets PC (the binary), CORPUS_ROOT and BENCH_VENV.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/pchronicle-target}"
CORPUS_ROOT="${CORPUS_ROOT:-$HOME/.cache/pchronicle-bench}"
BENCH_VENV="${BENCH_VENV:-$HOME/.cache/pchronicle-bench/venv}"
mkdir -p "$CORPUS_ROOT"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

ensure_tools() {
  local missing=()
  for t in hyperfine jq rg; do command -v "$t" >/dev/null 2>&1 || missing+=("$t"); done
  if [ "${#missing[@]}" -gt 0 ]; then
    local pkgs=()
    for t in "${missing[@]}"; do case "$t" in rg) pkgs+=(ripgrep);; *) pkgs+=("$t");; esac; done
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" time
  fi
  if [ ! -x "$BENCH_VENV/bin/duckdb" ]; then
    python3 -m venv "$BENCH_VENV"
    "$BENCH_VENV/bin/pip" install -q duckdb-cli==1.5.6 duckdb==1.5.6
  fi
  export PATH="$BENCH_VENV/bin:$PATH"
}

build_release() {
  # PCHRONICLE_BENCH_NO_BUILD=1 measures the binaries already built.
  if [ -z "${PCHRONICLE_BENCH_NO_BUILD:-}" ]; then
    # The shipped static binary, and the generator (an example: it links the
    # test-only corpus feature, so it is built apart).
    (cd "$ROOT" && cargo static >&2 \
      && cargo build --release --locked --target x86_64-unknown-linux-gnu \
        --config "target.x86_64-unknown-linux-gnu.rustflags=['-C','target-feature=+crt-static','-C','relocation-model=static']" \
        --example gen_corpus --example mock_upstream >&2)
  fi
  # PCHRONICLE_BENCH_BIN measures another build of pchronicle (for example
  # one made with a different release profile) against the same corpora.
  PC="${PCHRONICLE_BENCH_BIN:-$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release/pchronicle}"
  GEN="$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release/examples/gen_corpus"
  export PC GEN
}

# start_s3 DIR : start moto's S3-protocol server on loopback (its address is
# written to DIR/endpoint); sets S3_PID, to stop it, and ENDPOINT.
start_s3() {
  "$PCHRONICLE_PYTHON" "$ROOT/tests/python/s3_server.py" --forever > "$1/endpoint" &
  S3_PID=$!
  for _ in $(seq 300); do [ -s "$1/endpoint" ] && break; sleep 0.1; done
  ENDPOINT=$(head -n1 "$1/endpoint")
}

# The generator's output version: corpora made by an older generator (before
# its observations looked like real terminal output) are not reused.
CORPUS_VERSION=2

# corpus NAME ARGS... : generate once, reuse afterwards.
corpus() {
  local name="$1"; shift
  local dir="$CORPUS_ROOT/$name-g$CORPUS_VERSION"
  if [ ! -f "$dir/.done" ]; then
    rm -rf "$dir"
    "$GEN" --out "$dir" "$@" >&2
    touch "$dir/.done"
  fi
  echo "$dir"
}

# peak_rss CMD... : print the peak resident set size in MiB of one run.
peak_rss() {
  /usr/bin/time -f '%M' "$@" 2>&1 >/dev/null | tail -1 | awk '{printf "%.0f", $1/1024}'
}

# wait_line LOG PREFIX : wait (up to 60 s) for a line starting with PREFIX in
# LOG and print the rest of it without a trailing slash (a server's URL).
wait_line() {
  local v=""
  for _ in $(seq 1200); do
    v=$(sed -n "s|^$2||p" "$1" | head -1)
    [ -n "$v" ] && break
    sleep 0.05
  done
  echo "${v%/}"
}

# ms_since T0 : milliseconds since T0 (from `date +%s.%N`).
# The file in DIR collecting one line per run of the build BIN.
runs_of() { echo "$1/$(echo "$2" | md5sum | cut -c1-8)"; }

# alternate RUNS WORK FN BIN... : RUNS rounds, each calling `FN BIN` for every
# build in turn (so a slow minute of the machine falls on all of them), each
# line FN prints appended to that build's run file (`runs_of WORK BIN`).
alternate() {
  local runs=$1 work=$2 fn=$3 bin
  shift 3
  for bin in "$@"; do : > "$(runs_of "$work" "$bin")"; done
  for _ in $(seq "$runs"); do
    for bin in "$@"; do "$fn" "$bin" >> "$(runs_of "$work" "$bin")"; done
  done
}

# The median of column COL over the lines of FILE.
median_of() { awk -v c="$2" '{print $c}' "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

ms_since() { echo "$(date +%s.%N) $1" | awk '{printf "%.0f", ($1-$2)*1000}'; }

# versus_duckdb OUT NAME TARGET OURS THEIRS WARMUP RUNS UNIT : one Markdown
# row comparing `pchronicle query TARGET OURS` with the DuckDB CLI running
# THEIRS, side by side in one hyperfine run: medians (UNIT ms or s), their
# ratio, peak RSS of each, and whether both printed the same rows (sorted
# CSV bodies, numbers rounded to 6 digits). OUT is a scratch directory.
versus_duckdb() {
  local out="$1" name="$2" target="$3" ours="$4" theirs="$5" warmup="$6" runs="$7" unit="$8"
  local p d prss drss agree
  printf '%s' "$ours" > "$out/ours.sql"
  printf '%s;' "$theirs" > "$out/theirs.sql"
  hyperfine --warmup "$warmup" --runs "$runs" --export-json "$out/h.json" \
    -n pchronicle "$PC query $target \"\$(cat $out/ours.sql)\" --format csv -q > /dev/null" \
    -n duckdb "duckdb -csv -c '.read $out/theirs.sql' > /dev/null" >&2
  p=$(jq '.results[0].median' "$out/h.json")
  d=$(jq '.results[1].median' "$out/h.json")
  prss=$(peak_rss "$PC" query "$target" "$ours" --format csv -q)
  drss=$(peak_rss duckdb -csv -c ".read $out/theirs.sql")
  "$PC" query "$target" "$ours" --format csv -q | tail -n +2 | python3 "$ROOT/benches/normalize_csv.py" > "$out/a"
  duckdb -csv -noheader -c ".read $out/theirs.sql" | python3 "$ROOT/benches/normalize_csv.py" > "$out/b"
  if cmp -s "$out/a" "$out/b"; then agree=yes; else agree=NO; fi
  awk -v n="$name" -v p="$p" -v d="$d" -v pr="$prss" -v dr="$drss" -v a="$agree" -v u="$unit" 'BEGIN{
    if (u == "ms") { pt = sprintf("%.0f ms", p * 1000); dt = sprintf("%.0f ms", d * 1000) }
    else { pt = sprintf("%.2f s", p); dt = sprintf("%.2f s", d) }
    printf "| %s | %s | %s | %.2f× | %s MiB | %s MiB | %s |\n", n, pt, dt, p / d, pr, dr, a }'
}
