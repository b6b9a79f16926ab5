#!/usr/bin/env bash
# make demo: vigil's main job on one machine, no accounts, no setup.
#
# It starts three demo origins (a1, a2 on level 1; b1 on level 2), a fake
# dnspup API, the control plane with examples/quickstart.hcl (chain: node,
# dnspup, direct) and two edge nodes (edge-1 also proxies visitors), then
# walks through an incident: both primaries fail, vigil fails over to level 2
# and the proxy follows, they recover, vigil fails back. On a terminal it then
# stays up so you can try it yourself; Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=bin
export VIGIL_TOKEN="${VIGIL_TOKEN:-demo-token}"
export VIGIL_ADDR="${VIGIL_ADDR:-http://127.0.0.1:8470}"
export VIGIL_NODE_TOKEN="${VIGIL_NODE_TOKEN:-demo-node-token}"
export DNSPUP_API_KEY="${DNSPUP_API_KEY:-demo}" DNSPUP_API_SECRET="${DNSPUP_API_SECRET:-demo}"
PROXY=http://127.0.0.1:8080
LOGDIR=data/demo-logs
rm -rf data/quickstart data/demo-node-1 data/demo-node-2 "$LOGDIR"
mkdir -p "$LOGDIR"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
fail_start() { echo "$1 did not start; its log:"; cat "$2"; exit 1; }
# wait_http URL SECONDS
wait_http() {
  for _ in $(seq 1 $(( $2 * 10 ))); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

for spec in 18001:a1 18002:a2 18003:b1; do
  "$BIN/vigil-demo-origin" -listen "127.0.0.1:${spec%%:*}" -name "${spec##*:}" 2>>"$LOGDIR/origins.log" &
  pids+=($!)
done
"$BIN/vigil-fake-dnspup" -listen 127.0.0.1:8475 -nodes ams-1,fra-1 >"$LOGDIR/fake-dnspup.log" 2>&1 &
pids+=($!)
wait_http http://127.0.0.1:8475/v1/health 10 || fail_start "the fake dnspup API" "$LOGDIR/fake-dnspup.log"

"$BIN/vigil" agent -config examples/quickstart.hcl >"$LOGDIR/agent.log" 2>&1 &
pids+=($!)
wait_http "$VIGIL_ADDR/healthz" 30 || fail_start "the agent" "$LOGDIR/agent.log"

"$BIN/vigil-node" -id edge-1 -labels pop=local-1 -gateway 127.0.0.1:8471 -token-env VIGIL_NODE_TOKEN \
  -control-plane "$VIGIL_ADDR" -control-plane-token-env VIGIL_TOKEN -state-dir data/demo-node-1 \
  -proxy-listen 127.0.0.1:8080 >"$LOGDIR/node-1.log" 2>&1 &
pids+=($!)
"$BIN/vigil-node" -id edge-2 -labels pop=local-2 -gateway 127.0.0.1:8471 -token-env VIGIL_NODE_TOKEN \
  -control-plane "$VIGIL_ADDR" -control-plane-token-env VIGIL_TOKEN -state-dir data/demo-node-2 \
  >"$LOGDIR/node-2.log" 2>&1 &
node2=$!
pids+=($node2)

site_json() { "$BIN/vigil" status www -json; }
# wait_for PATTERN SECONDS: poll the site's JSON until it matches.
wait_for() {
  for _ in $(seq 1 $(( $2 * 10 ))); do site_json | grep -q "$1" && return 0; sleep 0.1; done
  echo "timed out waiting for $1"; return 1
}
wait_level() { wait_for "^  \"level\": $1," "$2"; }

say "vigil is up: API and status page at $VIGIL_ADDR, a round every 2s (examples/quickstart.hcl)"
wait_for '"by": "node"' 20
wait_for '"1": "healthy"' 20
"$BIN/vigil" status www
echo
echo "Visitors through edge-1's proxy:  curl -H 'Host: www.example.com' $PROXY/"
curl -fsS -H 'Host: www.example.com' "$PROXY/"

say "Failing both primaries: bin/vigil-demo-origin fail 127.0.0.1:18001 (and :18002)"
"$BIN/vigil-demo-origin" fail 127.0.0.1:18001
"$BIN/vigil-demo-origin" fail 127.0.0.1:18002
echo "vigil needs 3 failed rounds (unhealthy_threshold) before it moves..."
wait_level 2 30
"$BIN/vigil" status www
echo
echo "The proxy follows the publication at once:"
curl -fsS -H 'Host: www.example.com' "$PROXY/"

say "The journal (bin/vigil events) and the notice as the log and webhooks get it"
"$BIN/vigil" events | tail -4
grep 'vigil.notify: Origin level' "$LOGDIR/agent.log" | tail -1 || true

say "Recovering the primaries: automatic failback after 2 good rounds"
"$BIN/vigil-demo-origin" recover 127.0.0.1:18001
"$BIN/vigil-demo-origin" recover 127.0.0.1:18002
wait_level 1 30
"$BIN/vigil" status www
curl -fsS -H 'Host: www.example.com' "$PROXY/"

say "The chain: stop edge-2, and one node vote is below min_votes, so dnspup's checkpoints decide (carry)"
kill "$node2" 2>/dev/null || true
wait_for '"by": "dnspup"' 30
"$BIN/vigil" status www

say "Why is an origin failing? bin/vigil probe www runs one dry-run round through the agent's chain"
"$BIN/vigil-demo-origin" fail 127.0.0.1:18002
"$BIN/vigil" probe www
"$BIN/vigil-demo-origin" recover 127.0.0.1:18002

if [ -t 0 ] && [ -t 1 ]; then
  say "Your turn (Ctrl-C stops everything)"
  cat <<EOT
  export VIGIL_TOKEN=$VIGIL_TOKEN
  open $VIGIL_ADDR/                      # the status page (live)
  bin/vigil status                       # the origin status card, votes by node, online nodes
  bin/vigil-demo-origin fail 127.0.0.1:18001; bin/vigil-demo-origin fail 127.0.0.1:18002
  bin/vigil events -follow               # watch the switch and the notices
  curl -H 'Host: www.example.com' $PROXY/
  bin/vigil switch www 2                 # manual switch: holds automatic failback
  bin/vigil switch www 1                 # back to the top level: releases the hold
  bin/vigil origin disable www a1
  curl -s $VIGIL_ADDR/metrics | grep ^vigil_
  Logs: $LOGDIR/
EOT
  wait
else
  say "Demo done (not a terminal, so it stops here). Logs: $LOGDIR/"
fi
