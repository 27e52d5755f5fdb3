#!/bin/sh
# Start the peer: the official LangGraph JS dev server (@langchain/langgraph-cli
# `langgraphjs dev`, in-memory) serving graph.mjs (graphs "bench" and "slow").
#
#   sh peer/start.sh PORT [WORKERS]
#
# PORT     port to listen on (127.0.0.1 only)
# WORKERS  background-run workers (`--n-jobs-per-worker`, CLI default 10)
#
# Prints the PID of the process that serves HTTP (the node process holding
# the port: pass it to `load.mjs --sse ... --pid`) on stdout, alone on a line.
# Stop the whole tree with `sh peer/stop.sh PORT`.
# Env: LOG_LEVEL (default warn: the per-request info log is off),
#      SLOW_NODE_MS (sleep per node of graph "slow", default 2000).
set -eu

PORT=${1:-}
WORKERS=${2:-10}
case $PORT in
  ''|*[!0-9]*) echo "usage: sh peer/start.sh PORT [WORKERS]" >&2; exit 2 ;;
esac
case $WORKERS in
  ''|*[!0-9]*) echo "WORKERS must be a positive integer" >&2; exit 2 ;;
esac

PEER_DIR=$(cd "$(dirname "$0")" && pwd)
HTTP_DIR=$(dirname "$PEER_DIR")
CLI="$HTTP_DIR/node_modules/.bin/langgraphjs"
if [ ! -x "$CLI" ]; then
  echo "peer: $CLI not found: run 'npm ci' in $HTTP_DIR first" >&2
  exit 1
fi

up() {
  node -e "fetch('http://127.0.0.1:$1/ok').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
}
port_free() {
  node -e "const s=require('net').createServer().once('error',()=>process.exit(1)).listen($1,'127.0.0.1',()=>s.close())"
}
if ! port_free "$PORT"; then
  echo "peer: port $PORT is already in use" >&2; exit 1
fi

LOG="$PEER_DIR/peer-$PORT.log"
PIDFILE="$PEER_DIR/peer-$PORT.pid"

# In-memory state is flushed to .langgraph_api/ and reloaded at start: start clean.
rm -rf "$PEER_DIR/.langgraph_api"

# No tracing, no LangSmith, no CLI analytics, no browser.
export LANGSMITH_TRACING=false LANGSMITH_TRACING_V2=false
export LANGCHAIN_TRACING=false LANGCHAIN_TRACING_V2=false
export LANGGRAPH_CLI_NO_ANALYTICS=1 BROWSER=none
export LOG_LEVEL=${LOG_LEVEL:-warn} NO_COLOR=1

cd "$PEER_DIR"
# setsid: own process group, so stop.sh can end exactly this tree.
setsid "$CLI" dev --port "$PORT" --host 127.0.0.1 --no-browser --no-reload \
  --n-jobs-per-worker "$WORKERS" --config "$PEER_DIR/langgraph.json" \
  --studio-url http://127.0.0.1 >"$LOG" 2>&1 </dev/null &
CLI_PID=$!
echo "$CLI_PID" >"$PIDFILE"

# The tree is: langgraphjs dev -> tsx cli -> node .../entrypoint.mjs (the server).
# The server is the deepest descendant whose command line names entrypoint.mjs.
descendants() {
  for c in $(pgrep -P "$1" || true); do echo "$c"; descendants "$c"; done
}
server_pid() {
  found=
  for p in $(descendants "$CLI_PID"); do
    if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q 'entrypoint.mjs' \
       && ! tr '\0' ' ' <"/proc/$p/cmdline" | grep -q 'tsx/dist/cli.mjs'; then
      found=$p
    fi
  done
  echo "$found"
}

i=0
while :; do
  if ! kill -0 "$CLI_PID" 2>/dev/null; then
    echo "peer: the dev server exited; log $LOG:" >&2; cat "$LOG" >&2
    rm -f "$PIDFILE"; exit 1
  fi
  if up "$PORT"; then
    SPID=$(server_pid)
    [ -n "$SPID" ] && break
  fi
  i=$((i + 1))
  if [ "$i" -ge 120 ]; then
    echo "peer: no answer on :$PORT after 60 s; log $LOG" >&2
    kill -TERM "-$CLI_PID" 2>/dev/null || true; rm -f "$PIDFILE"; exit 1
  fi
  sleep 0.5
done

echo "peer: LangGraph JS dev server on http://127.0.0.1:$PORT (cli pid $CLI_PID, $WORKERS workers, log $LOG)" >&2
echo "$SPID"
