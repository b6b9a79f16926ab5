#!/usr/bin/env bash
# make demo: vigil's main job on one machine, no accounts, no setup.
#
# It starts three demo origins (a1, a2 on level 1; b1 on level 2), a fake
# dnspup API, the control plane with examples/quickstart.hcl (chain: node,
# dnspup, direct) and two edge nodes (edge-1 also proxies visitors), then
# walks through an incident: both primaries fail, vigil fails over to level 2
# and the proxy follows, they recover, vigil fails back. On a terminal it then
# stays up so you can try it yourself; Ctrl-C stops everything.
#
# If a process it started exits (a port already taken, say), the demo stops
# at once, names it and prints the end of its log.
#
# Everything listens on 127.0.0.1. To move a port (the defaults are shown):
#   VIGIL_DEMO_API_PORT=8470              the agent's API and status page
#   VIGIL_DEMO_GATEWAY_PORT=8471          the node gateway the edge nodes dial
#   VIGIL_DEMO_DNSPUP_PORT=8475           the fake dnspup API
#   VIGIL_DEMO_ORIGIN_PORTS=18001,18002,18003   origins a1, a2 and b1
#   VIGIL_DEMO_PROXY_PORT=8080            edge-1's visitor proxy
# and elsewhere:
#   VIGIL_DEMO_DATA_DIR=data              state, logs (DIR/demo-logs) and the
#                                         derived config (DIR/demo/quickstart.hcl)
#   VIGIL_DEMO_BIN=bin                    the binaries and plugins (make build)
#   VIGIL_DEMO_PORT_CHECK=1               0: skip the "is the port free" check
# e.g. VIGIL_DEMO_API_PORT=9470 make demo. When anything differs from the
# default, the agent runs on a copy of examples/quickstart.hcl with those
# addresses and paths replaced (DIR/demo/quickstart.hcl).
set -euo pipefail
cd "$(dirname "$0")/.."

API_PORT=${VIGIL_DEMO_API_PORT:-8470}
GATEWAY_PORT=${VIGIL_DEMO_GATEWAY_PORT:-8471}
DNSPUP_PORT=${VIGIL_DEMO_DNSPUP_PORT:-8475}
PROXY_PORT=${VIGIL_DEMO_PROXY_PORT:-8080}
ORIGIN_PORTS=${VIGIL_DEMO_ORIGIN_PORTS:-18001,18002,18003}
DATA=${VIGIL_DEMO_DATA_DIR:-data}
BIN=${VIGIL_DEMO_BIN:-bin}
SRC_CONFIG=examples/quickstart.hcl

die() { echo "demo: $*" >&2; exit 1; }

read -r A1_PORT A2_PORT B1_PORT extra <<<"${ORIGIN_PORTS//,/ }" || true
[ -n "${B1_PORT:-}" ] && [ -z "${extra:-}" ] ||
  die "VIGIL_DEMO_ORIGIN_PORTS must be three ports (a1, a2, b1), e.g. 18001,18002,18003; got '$ORIGIN_PORTS'"

# The ports, as NAME VARIABLE PORT.
ports=(
  "the agent's API" VIGIL_DEMO_API_PORT "$API_PORT"
  "the node gateway" VIGIL_DEMO_GATEWAY_PORT "$GATEWAY_PORT"
  "the fake dnspup API" VIGIL_DEMO_DNSPUP_PORT "$DNSPUP_PORT"
  "edge-1's proxy" VIGIL_DEMO_PROXY_PORT "$PROXY_PORT"
  "origin a1" VIGIL_DEMO_ORIGIN_PORTS "$A1_PORT"
  "origin a2" VIGIL_DEMO_ORIGIN_PORTS "$A2_PORT"
  "origin b1" VIGIL_DEMO_ORIGIN_PORTS "$B1_PORT"
)
declare -A owner=()
for ((i = 0; i < ${#ports[@]}; i += 3)); do
  name=${ports[i]} var=${ports[i + 1]} port=${ports[i + 2]}
  [[ $port =~ ^[1-9][0-9]*$ ]] && ((port <= 65535)) || die "$var: '$port' is not a port ($name)"
  [ -z "${owner[$port]:-}" ] || die "port $port is given twice, for ${owner[$port]} and for $name ($var): every demo port must differ"
  owner[$port]="$name ($var)"
done
for dir in "$DATA" "$BIN"; do
  [[ $dir == *[\"\\]* ]] && die "'$dir': the demo's paths cannot hold \" or \\ (they go into the config)"
done
for b in vigil vigil-node vigil-demo-origin vigil-fake-dnspup vigil-source-node vigil-source-dnspup vigil-source-direct; do
  [ -x "$BIN/$b" ] || die "$BIN/$b is missing: run make build (or make demo, which builds first)"
done

# Relative paths in a configuration are taken from its file's folder: the
# derived configuration names the demo's folders absolutely.
DATA_ABS=$DATA BIN_ABS=$BIN
[[ $DATA_ABS == /* ]] || DATA_ABS=$PWD/$DATA
[[ $BIN_ABS == /* ]] || BIN_ABS=$PWD/$BIN

# The settings of examples/quickstart.hcl the demo depends on, as NAME
# DEFAULT NEW: each NAME = "DEFAULT" must be in the file (spaced as it may be).
settings=(
  listen 127.0.0.1:8470 "127.0.0.1:$API_PORT"
  listen 127.0.0.1:8471 "127.0.0.1:$GATEWAY_PORT"
  api_base http://127.0.0.1:8475 "http://127.0.0.1:$DNSPUP_PORT"
  address http://127.0.0.1:18001 "http://127.0.0.1:$A1_PORT"
  address http://127.0.0.1:18002 "http://127.0.0.1:$A2_PORT"
  address http://127.0.0.1:18003 "http://127.0.0.1:$B1_PORT"
  data_dir ../data/quickstart "$DATA_ABS/quickstart"
  plugin_dir ../bin "$BIN_ABS"
)
sed_re() { printf '%s' "$1" | sed 's/[][\\.*^$|]/\\&/g'; }
sed_repl() { printf '%s' "$1" | sed 's/[\\&|]/\\&/g'; }
# setting_re NAME VALUE: the basic regular expression of NAME = "VALUE".
setting_re() { printf '\\<%s *= *"%s"' "$1" "$(sed_re "$2")"; }
CONFIG=$SRC_CONFIG
sed_script=()
for ((i = 0; i < ${#settings[@]}; i += 3)); do
  key=${settings[i]} from=${settings[i + 1]} to=${settings[i + 2]}
  grep -q -- "$(setting_re "$key" "$from")" "$SRC_CONFIG" ||
    die "$SRC_CONFIG no longer has $key = \"$from\": update examples/demo.sh to match"
  if [ "$from" != "$to" ]; then
    # t: at most one replacement a line, so a new value is never replaced again.
    sed_script+=(-e "s|\\(\\<$key *= *\\)\"$(sed_re "$from")\"|\\1\"$(sed_repl "$to")\"|" -e t)
  fi
done
rm -f "$DATA/demo/quickstart.hcl"
if ((${#sed_script[@]})); then
  CONFIG=$DATA/demo/quickstart.hcl
  mkdir -p "$DATA/demo"
  {
    echo "# Written by examples/demo.sh from $SRC_CONFIG with the demo's ports and paths"
    echo "# (VIGIL_DEMO_*); edit that file, not this one."
    sed "${sed_script[@]}" "$SRC_CONFIG"
  } >"$CONFIG"
  for ((i = 0; i < ${#settings[@]}; i += 3)); do
    grep -q -- "$(setting_re "${settings[i]}" "${settings[i + 2]}")" "$CONFIG" ||
      die "could not write ${settings[i]} = \"${settings[i + 2]}\" into $CONFIG"
  done
fi

# port_taken I [DETAIL]: say that the port ports[I] names is taken, and how
# to move the demo off it.
port_taken() {
  local name=${ports[$1]} var=${ports[$1 + 1]} port=${ports[$1 + 2]}
  echo "demo: port $port ($name) is already in use on 127.0.0.1${2:+: $2}" >&2
  echo "  stop what holds it, or move the demo off it: $var=<a free port> make demo" >&2
  if [ "$var" = VIGIL_DEMO_ORIGIN_PORTS ]; then
    echo "  (VIGIL_DEMO_ORIGIN_PORTS lists the ports of a1,a2,b1; now $ORIGIN_PORTS)" >&2
  fi
}
if [ "${VIGIL_DEMO_PORT_CHECK:-1}" != 0 ]; then
  for ((i = 0; i < ${#ports[@]}; i += 3)); do
    port=${ports[i + 2]}
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      holder=
      if command -v ss >/dev/null; then holder=$(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'users:.*' | head -n 1) || true; fi
      port_taken "$i" "$holder"
      exit 1
    fi
  done
fi

export VIGIL_TOKEN="${VIGIL_TOKEN:-demo-token}"
# The CLI talks to the demo's agent, whatever VIGIL_ADDR said before.
export VIGIL_ADDR="http://127.0.0.1:$API_PORT"
export VIGIL_NODE_TOKEN="${VIGIL_NODE_TOKEN:-demo-node-token}"
export DNSPUP_API_KEY="${DNSPUP_API_KEY:-demo}" DNSPUP_API_SECRET="${DNSPUP_API_SECRET:-demo}"
A1=127.0.0.1:$A1_PORT A2=127.0.0.1:$A2_PORT
PROXY=http://127.0.0.1:$PROXY_PORT
GATEWAY=127.0.0.1:$GATEWAY_PORT
LOGDIR=$DATA/demo-logs
rm -rf "$DATA/quickstart" "$DATA/demo-node-1" "$DATA/demo-node-2" "$LOGDIR"
mkdir -p "$LOGDIR"

# The processes the demo started and watches: pid, name and log, by index.
pids=() names=() logs=()
reported=
# start NAME LOG COMMAND...: run COMMAND in the background, watched.
start() {
  local name=$1 log=$2
  shift 2
  "$@" >"$log" 2>&1 &
  pids+=($!) names+=("$name") logs+=("$log")
}
# port_hint LOG: if LOG says a demo port is taken, say how to move it.
port_hint() {
  local taken j
  taken=$(grep -o ':[0-9]*: bind: address already in use' "$1" | head -n 1 | cut -d: -f2) || true
  [ -n "$taken" ] || return 0
  for ((j = 0; j < ${#ports[@]}; j += 3)); do
    if [ "${ports[j + 2]}" = "$taken" ]; then port_taken "$j"; return 0; fi
  done
}
# unwatch PID: the demo stops that process itself.
unwatch() {
  local i
  for i in "${!pids[@]}"; do [ "${pids[i]}" = "$1" ] && unset 'pids[i]'; done
  return 0
}
# report_dead: name every watched process that has exited, with the end of
# its log; false if none has.
report_dead() {
  local i rc found=1
  for i in "${!pids[@]}"; do
    kill -0 "${pids[i]}" 2>/dev/null && continue
    rc=0
    wait "${pids[i]}" 2>/dev/null || rc=$?
    printf '\n\033[1mdemo: %s exited (status %s, pid %s); the last 20 lines of %s:\033[0m\n' \
      "${names[i]}" "$rc" "${pids[i]}" "${logs[i]}" >&2
    tail -n 20 "${logs[i]}" | sed 's/^/  | /' >&2
    port_hint "${logs[i]}"
    unset 'pids[i]'
    found=0 reported=1
  done
  return $found
}
# check_alive: stop the demo if a watched process has exited.
check_alive() {
  if report_dead; then exit 1; fi
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  # A failed step may be a process that died: say which (not on Ctrl-C,
  # which the agent sees too).
  case $rc in 0 | 130 | 143) ;; *) [ -n "$reported" ] || report_dead || true ;; esac
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# wait_http URL SECONDS (or until a watched process exits)
wait_http() {
  for _ in $(seq 1 $(($2 * 10))); do
    check_alive
    curl -fsS --max-time 1 -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "demo: timed out after $2s waiting for $1" >&2
  return 1
}

start "origin a1" "$LOGDIR/origin-a1.log" "$BIN/vigil-demo-origin" -listen "$A1" -name a1
start "origin a2" "$LOGDIR/origin-a2.log" "$BIN/vigil-demo-origin" -listen "$A2" -name a2
start "origin b1" "$LOGDIR/origin-b1.log" "$BIN/vigil-demo-origin" -listen "127.0.0.1:$B1_PORT" -name b1
start "the fake dnspup API" "$LOGDIR/fake-dnspup.log" \
  "$BIN/vigil-fake-dnspup" -listen "127.0.0.1:$DNSPUP_PORT" -nodes ams-1,fra-1
wait_http "http://127.0.0.1:$DNSPUP_PORT/v1/health" 10

start "the agent (vigil agent -config $CONFIG)" "$LOGDIR/agent.log" "$BIN/vigil" agent -config "$CONFIG"
wait_http "$VIGIL_ADDR/healthz" 30

start "edge node edge-1" "$LOGDIR/node-1.log" \
  "$BIN/vigil-node" -id edge-1 -labels pop=local-1 -gateway "$GATEWAY" -token-env VIGIL_NODE_TOKEN \
  -control-plane "$VIGIL_ADDR" -control-plane-token-env VIGIL_TOKEN -state-dir "$DATA/demo-node-1" \
  -proxy-listen "127.0.0.1:$PROXY_PORT"
start "edge node edge-2" "$LOGDIR/node-2.log" \
  "$BIN/vigil-node" -id edge-2 -labels pop=local-2 -gateway "$GATEWAY" -token-env VIGIL_NODE_TOKEN \
  -control-plane "$VIGIL_ADDR" -control-plane-token-env VIGIL_TOKEN -state-dir "$DATA/demo-node-2"
node2=$!

site_json() { "$BIN/vigil" status www -json; }
# wait_for PATTERN SECONDS: poll the site's JSON until it matches (or until a
# watched process exits).
wait_for() {
  for _ in $(seq 1 $(($2 * 10))); do
    check_alive
    site_json | grep -q "$1" && return 0
    sleep 0.1
  done
  echo "demo: timed out after $2s waiting for $1" >&2
  return 1
}
wait_level() { wait_for "^  \"level\": $1," "$2"; }

say "vigil is up: API and status page at $VIGIL_ADDR, a round every 2s ($CONFIG)"
wait_for '"by": "node"' 20
wait_for '"1": "healthy"' 20
"$BIN/vigil" status www
echo
echo "Visitors through edge-1's proxy:  curl -H 'Host: www.example.com' $PROXY/"
curl -fsS -H 'Host: www.example.com' "$PROXY/"

say "Failing both primaries: $BIN/vigil-demo-origin fail $A1 (and $A2)"
"$BIN/vigil-demo-origin" fail "$A1"
"$BIN/vigil-demo-origin" fail "$A2"
echo "vigil needs 3 failed rounds (unhealthy_threshold) before it moves..."
wait_level 2 30
"$BIN/vigil" status www
echo
echo "The proxy follows the publication at once:"
curl -fsS -H 'Host: www.example.com' "$PROXY/"

say "The journal ($BIN/vigil events) and the notice as the log and webhooks get it"
"$BIN/vigil" events | tail -4
grep 'vigil.notify: Origin level' "$LOGDIR/agent.log" | tail -1 || true

say "Recovering the primaries: automatic failback after 2 good rounds"
"$BIN/vigil-demo-origin" recover "$A1"
"$BIN/vigil-demo-origin" recover "$A2"
wait_level 1 30
"$BIN/vigil" status www
curl -fsS -H 'Host: www.example.com' "$PROXY/"

say "The chain: stop edge-2, and one node vote is below min_votes, so dnspup's checkpoints decide (carry)"
unwatch "$node2"
kill "$node2" 2>/dev/null || true
wait_for '"by": "dnspup"' 30
"$BIN/vigil" status www

say "Why is an origin failing? $BIN/vigil probe www runs one dry-run round through the agent's chain"
"$BIN/vigil-demo-origin" fail "$A2"
"$BIN/vigil" probe www
"$BIN/vigil-demo-origin" recover "$A2"
check_alive

if [ -t 0 ] && [ -t 1 ]; then
  say "Your turn (Ctrl-C stops everything)"
  cat <<EOT
  export VIGIL_TOKEN=$VIGIL_TOKEN VIGIL_ADDR=$VIGIL_ADDR
  open $VIGIL_ADDR/                      # the status page (live)
  $BIN/vigil status                       # the origin status card, votes by node, online nodes
  $BIN/vigil-demo-origin fail $A1; $BIN/vigil-demo-origin fail $A2
  $BIN/vigil events -follow               # watch the switch and the notices
  curl -H 'Host: www.example.com' $PROXY/
  $BIN/vigil switch www 2                 # manual switch: holds automatic failback
  $BIN/vigil switch www 1                 # back to the top level: releases the hold
  $BIN/vigil origin disable www a1
  curl -s $VIGIL_ADDR/metrics | grep ^vigil_
  Logs: $LOGDIR/   Config: $CONFIG
EOT
  while :; do
    check_alive
    sleep 1
  done
else
  say "Demo done (not a terminal, so it stops here). Logs: $LOGDIR/"
fi
