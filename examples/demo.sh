#!/usr/bin/env bash
# make demo: vigil's main job on one machine, no accounts, no setup.
#
# It starts three demo origins (a1, a2 on level 1; b1 on level 2), the control
# plane with examples/quickstart.hcl, then walks through an incident: both
# primaries fail, vigil fails over to level 2, they recover, vigil fails back.
# On a terminal it then stays up so you can try it yourself; Ctrl-C stops all.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=bin
export VIGIL_TOKEN="${VIGIL_TOKEN:-demo-token}"
export VIGIL_ADDR="${VIGIL_ADDR:-http://127.0.0.1:8470}"
DATA=data/quickstart
LOGDIR=data/demo-logs
rm -rf "$DATA" "$LOGDIR"
mkdir -p "$LOGDIR"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

for spec in 18001:a1 18002:a2 18003:b1; do
  "$BIN/vigil-demo-origin" -listen "127.0.0.1:${spec%%:*}" -name "${spec##*:}" 2>>"$LOGDIR/origins.log" &
  pids+=($!)
done

"$BIN/vigil" agent -config examples/quickstart.hcl >"$LOGDIR/agent.log" 2>&1 &
pids+=($!)

# Wait for the API (bounded).
for _ in $(seq 1 100); do
  if curl -fsS "$VIGIL_ADDR/healthz" >/dev/null 2>&1; then break; fi
  sleep 0.1
done
curl -fsS "$VIGIL_ADDR/healthz" >/dev/null || { echo "the agent did not start; see $LOGDIR/agent.log"; cat "$LOGDIR/agent.log"; exit 1; }

# wait_level LEVEL SECONDS: poll the API until the site is on LEVEL.
wait_level() {
  for _ in $(seq 1 $(( $2 * 10 ))); do
    lvl=$("$BIN/vigil" status www -json | sed -n 's/^  "level": \([0-9]*\),/\1/p')
    [ "$lvl" = "$1" ] && return 0
    sleep 0.1
  done
  echo "www did not reach level $1 in $2s"; return 1
}
wait_healthy() {
  for _ in $(seq 1 $(( $1 * 10 ))); do
    "$BIN/vigil" status www -json | grep -q '"1": "healthy"' && return 0
    sleep 0.1
  done
  return 1
}

say "vigil is up: the API is at $VIGIL_ADDR, a round every 2s (examples/quickstart.hcl)"
wait_healthy 15
"$BIN/vigil" status www

say "Failing both primaries: bin/vigil-demo-origin fail 127.0.0.1:18001 (and :18002)"
"$BIN/vigil-demo-origin" fail 127.0.0.1:18001
"$BIN/vigil-demo-origin" fail 127.0.0.1:18002
echo "vigil needs 3 failed rounds (unhealthy_threshold) before it moves..."
wait_level 2 20
"$BIN/vigil" status www

say "The journal (bin/vigil events) and the notice as the log and webhooks get it"
"$BIN/vigil" events | tail -4
grep 'vigil.notify: Origin level' "$LOGDIR/agent.log" | tail -1 || true

say "Recovering the primaries: automatic failback after 2 good rounds"
"$BIN/vigil-demo-origin" recover 127.0.0.1:18001
"$BIN/vigil-demo-origin" recover 127.0.0.1:18002
wait_level 1 20
"$BIN/vigil" status www

say "Why is an origin failing? bin/vigil probe runs one dry-run round"
"$BIN/vigil-demo-origin" fail 127.0.0.1:18002
"$BIN/vigil" probe -config examples/quickstart.hcl www
"$BIN/vigil-demo-origin" recover 127.0.0.1:18002

if [ -t 0 ] && [ -t 1 ]; then
  say "Your turn (Ctrl-C stops everything)"
  cat <<EOT
  export VIGIL_TOKEN=$VIGIL_TOKEN
  bin/vigil status                       # the origin status card
  bin/vigil-demo-origin fail 127.0.0.1:18001; bin/vigil-demo-origin fail 127.0.0.1:18002
  bin/vigil events -follow               # watch the switch and the notices
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
