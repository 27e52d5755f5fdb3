#!/bin/sh
# Stop the peer started by `sh peer/start.sh PORT`: ends its process group.
set -eu
PORT=${1:-}
[ -n "$PORT" ] || { echo "usage: sh peer/stop.sh PORT" >&2; exit 2; }
PEER_DIR=$(cd "$(dirname "$0")" && pwd)
PIDFILE="$PEER_DIR/peer-$PORT.pid"
[ -f "$PIDFILE" ] || { echo "peer: no $PIDFILE" >&2; exit 1; }
PID=$(cat "$PIDFILE")
kill -TERM "-$PID" 2>/dev/null || true
i=0
while kill -0 "$PID" 2>/dev/null && [ "$i" -lt 20 ]; do sleep 0.25; i=$((i + 1)); done
kill -KILL "-$PID" 2>/dev/null || true
rm -f "$PIDFILE"
echo "peer: stopped (pid $PID)" >&2
