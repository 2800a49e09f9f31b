#!/usr/bin/env bash
# Gateway benchmarks (issue 8): the proxy overhead of `pchronicle serve
# --gateway` with full capture on, measured with wrk on loopback against the
# deterministic upstream of the Gateway tests (examples/mock_upstream.rs),
# first calling the upstream directly and then through the Gateway, for a
# non-streamed and a streamed (SSE) chat completion. Afterwards every
# answered request must be in events.lance. Writes Markdown.
#
#   bash benches/gateway.sh [DURATION_SECONDS]     (default 10)
source "$(dirname "$0")/common.sh"
DURATION="${1:-10}"
ensure_tools
command -v wrk >/dev/null 2>&1 || { as_root apt-get update -qq; as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; }
build_release
UPSTREAM_BIN="$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release/examples/mock_upstream"
WORK=$(mktemp -d)
trap 'kill $GW $UP 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/ds"

"$UPSTREAM_BIN" 0 2> "$WORK/upstream.log" &
UP=$!
UPURL=$(wait_line "$WORK/upstream.log" "mock upstream listening: ")

cat > "$WORK/warehouse.toml" <<TOML
[[datasets]]
name = "live"
uri = "./ds"
TOML
cat > "$WORK/gateway.toml" <<TOML
listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
agent_id = "bench"
capture_level = "full"
[network]
allow_hosts = ["127.0.0.1"]
allow_http = true
[[models]]
name = "*"
provider = "openai"
upstream = "$UPURL"
api_key_env = "BENCH_KEY"
TOML
start_gateway() { # LOG: sets GW, GWURL, ADMIN
  BENCH_KEY=sk-bench "$PC" serve --config "$WORK/warehouse.toml" --gateway "$WORK/gateway.toml" -q 2> "$1" &
  GW=$!
  GWURL=$(wait_line "$1" "gateway listening: ")
  ADMIN=$(wait_line "$1" "gateway admin: ")
  ADMIN="${ADMIN%/admin/status}"
}
start_gateway "$WORK/gateway.log"

body() { # STREAM
  printf '{"model":"gpt-bench","stream":%s,"messages":[{"role":"system","content":"You are a careful assistant."},{"role":"user","content":"Summarise the last deployment log in two sentences."}]}' "$1"
}
for s in false true; do
  cat > "$WORK/post-$s.lua" <<LUA
wrk.method = "POST"
wrk.body = '$(body "$s")'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["x-pchronicle-session-id"] = "bench-$s"
LUA
done

TOTAL=0
run() { # LABEL URL STREAM THREADS CONNECTIONS
  local out rps p50 p99 n
  out=$(wrk -t"$4" -c"$5" -d"${DURATION}s" --latency -s "$WORK/post-$3.lua" "$2/v1/chat/completions")
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p50=$(echo "$out" | awk '$1=="50%" {print $2}')
  p99=$(echo "$out" | awk '$1=="99%" {print $2}')
  n=$(echo "$out" | awk '/requests in/ {print $1}')
  if echo "$out" | grep -q "Non-2xx"; then echo "non-2xx answers: $out" >&2; exit 1; fi
  echo "$n" > "$WORK/last-n"
  echo "| $1 | $4×$5 | $rps | $p50 | $p99 |"
}
via() { run "$@"; TOTAL=$((TOTAL + $(cat "$WORK/last-n"))); }

echo "Upstream: the deterministic test upstream (examples/mock_upstream.rs) on 127.0.0.1; Gateway: \`pchronicle serve --gateway\`, capture_level = full, every request and response made durable (fdatasync, group commit) before the client sees the end of the answer; load: wrk for ${DURATION} s per row, all on the same 2-core machine."
echo
echo "| Request | wrk threads × connections | requests/s | p50 | p99 |"
echo "|---|---:|---:|---:|---:|"
for s in false true; do
  kind=$([ "$s" = true ] && echo "streamed (SSE)" || echo "non-streamed")
  run "$kind, upstream directly" "$UPURL" "$s" 1 1
  via "$kind, through the Gateway" "$GWURL" "$s" 1 1
  run "$kind, upstream directly" "$UPURL" "$s" 2 16
  via "$kind, through the Gateway" "$GWURL" "$s" 2 16
done

# Every answered request is captured: two events each, all in events.lance.
for _ in $(seq 600); do
  PENDING=$(curl -sf "$ADMIN/admin/status" | jq -r '.wal.pending')
  [ "$PENDING" = false ] && break
  sleep 0.1
done
STATUS=$(curl -sf "$ADMIN/admin/status")
RSS=$(awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$GW/status")
kill "$GW"; wait "$GW" 2>/dev/null || true
export PCHRONICLE_CACHE_DIR="$WORK/cache"
T0=$(date +%s.%N)
EVENTS=$("$PC" query "$WORK/ds" "SELECT count(*) AS n FROM dataset.events" --format csv 2>/dev/null | tail -1)
EVENTS_MS=$(ms_since "$T0")
steps_ms() { # prints "STEPS MS" for one whole-process read of the projection
  local t0 n
  t0=$(date +%s.%N)
  n=$("$PC" query "$WORK/ds" "SELECT count(*) AS n FROM dataset.steps" --format csv 2>/dev/null | tail -1)
  echo "$n $(ms_since "$t0")"
}
median_ms() { for _ in 1 2 3; do steps_ms | cut -d' ' -f2; done | sort -n | sed -n 2p; }
# Without a cache directory every read projects the events in memory.
NOCACHE_MS=$(PCHRONICLE_CACHE_DIR=/dev/null median_ms)
read -r STEPS PROJ_MS <<< "$(steps_ms)"
WARM_MS=$(median_ms)
FRAGMENTS=$(find "$WORK/ds/events.lance/data" -name '*.lance' | wc -l)
CAPTURED=$(echo "$STATUS" | jq '.captured_events')
REQS=$(echo "$STATUS" | jq '.requests')
# Then about 10,000 more events (two seconds of load), and the first read after.
start_gateway "$WORK/gateway2.log"
wrk -t2 -c16 -d2s -s "$WORK/post-false.lua" "$GWURL/v1/chat/completions" > /dev/null
for _ in $(seq 600); do
  [ "$(curl -sf "$ADMIN/admin/status" | jq -r '.wal.pending')" = false ] && break
  sleep 0.1
done
kill "$GW"; wait "$GW" 2>/dev/null || true
EVENTS2=$("$PC" query "$WORK/ds" "SELECT count(*) AS n FROM dataset.events" --format csv 2>/dev/null | tail -1)
read -r STEPS2 AFTER_MS <<< "$(steps_ms)"
echo
echo "Through the Gateway: $REQS requests answered (wrk counted $TOTAL completed), $CAPTURED events captured, $EVENTS rows in events.lance after the run ($(du -sm "$WORK/ds/events.lance" | cut -f1) MB, $FRAGMENTS data files, $(echo "$STATUS" | jq '.sink.appends') appends, $(echo "$STATUS" | jq '.sink.compactions') compactions); Gateway RSS $RSS MiB at the end of the load."
echo
echo "Reading it back, \`pchronicle query DS \"SELECT count(*) FROM dataset.steps\"\` (whole process; the captured sessions project into $STEPS steps):"
echo
echo "| Read | time |"
echo "|---|---:|"
echo "| \`SELECT count(*) FROM dataset.events\` (envelope columns only, no payload parsed) | $EVENTS_MS ms |"
echo "| without the projection cache (every read projects the $EVENTS events; median of 3) | $NOCACHE_MS ms |"
echo "| first read of this version (projects and writes the projection) | $PROJ_MS ms |"
echo "| later reads of the same version (median of 3) | $WARM_MS ms |"
echo "| first read after $((EVENTS2 - EVENTS)) more events ($STEPS2 steps) | $AFTER_MS ms |"
if [ "$EVENTS" -lt $((2 * TOTAL)) ]; then echo "captured events missing: $EVENTS < 2 × $TOTAL" >&2; exit 1; fi
