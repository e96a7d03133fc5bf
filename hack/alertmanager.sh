#!/usr/bin/env bash
# A local Alertmanager for the tests of the silence an Eru holds while it restarts, from Debian's
# package `prometheus-alertmanager` (0.25; hack/deps.sh installs it): one instance per name, on a
# free port of 127.0.0.1 (no other address), no gossip cluster, one receiver "null" that every
# alert is routed to (nothing is ever sent). Its API v2 is under /api/v2 (silences: POST
# /api/v2/silences, GET /api/v2/silence/{id}, GET /api/v2/silences?filter=..., DELETE
# /api/v2/silence/{id}).
#
#   hack/alertmanager.sh start [--name N]    create (once) and start it; returns when GET /-/ready
#                                            answers 200; idempotent (a running one is left as is;
#                                            a stopped one keeps its port and its silences)
#   hack/alertmanager.sh url [--name N]      print http://127.0.0.1:PORT
#   hack/alertmanager.sh env [--name N]      print `export ERU_TEST_ALERTMANAGER_URL=...`
#   hack/alertmanager.sh status [--name N]   running and ready, or exit 1
#   hack/alertmanager.sh stop [--name N]     stop what `start` started (TERM, then KILL after
#                                            10 s), remove its state
#
# Options and environment:
#   --name NAME / ERU_ALERTMANAGER_NAME    instance name (default "eru"); instances run side by side
#   ERU_ALERTMANAGER_STATE                 state root (default <repo>/.alertmanager); one folder per
#                                          name: alertmanager.yml, data/ (--storage.path),
#                                          alertmanager.log, pid, port
#   ERU_ALERTMANAGER_BIN                   the binary (default prometheus-alertmanager, else
#                                          alertmanager, from PATH)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
name=${ERU_ALERTMANAGER_NAME:-eru}

say() { printf '[alertmanager %s] %s\n' "$name" "$*" >&2; }
die() { say "error: $*"; exit 1; }

cmd=${1:-}
[ $# -gt 0 ] && shift
while [ $# -gt 0 ]; do
  case "$1" in
    --name) name=${2:?--name needs a value}; shift 2 ;;
    --name=*) name=${1#*=}; shift ;;
    *) die "unknown argument: $1 (see the header of $0)" ;;
  esac
done
[[ "$name" =~ ^[a-z0-9][a-z0-9-]*$ ]] || die "--name must be lowercase letters, digits and '-', got '$name'"
state_root=${ERU_ALERTMANAGER_STATE:-$repo/.alertmanager}
state="$state_root/$name"

bin=${ERU_ALERTMANAGER_BIN:-}
if [ -z "$bin" ]; then
  bin=$(command -v prometheus-alertmanager || command -v alertmanager || true)
fi
[ -x "${bin:-/nonexistent}" ] ||
  die "no Alertmanager binary (prometheus-alertmanager); run hack/deps.sh or set ERU_ALERTMANAGER_BIN"

port() { cat "$state/port" 2>/dev/null || true; }
pid() { cat "$state/pid" 2>/dev/null || true; }
url() { echo "http://127.0.0.1:$(port)"; }

# running: the process of the pid file lives and is this instance (its command line names our
# config file: a recycled PID is not mistaken for it).
running() {
  local p
  p=$(pid)
  [ -n "$p" ] && kill -0 "$p" 2>/dev/null &&
    tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | grep -qxF -- "--config.file=$state/alertmanager.yml"
}

ready() {
  [ -n "$(port)" ] &&
    curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$(port)/-/ready" 2>/dev/null
}

wait_ready() {
  local deadline=$((SECONDS + 20))
  until ready; do
    # alive: the PID just started (not `running`: until setsid execs the server, its command
    # line is still this script's, which once read as "exited" on a loaded machine)
    kill -0 "$(pid)" 2>/dev/null || { tail -n 30 "$state/alertmanager.log" >&2 || true; die "alertmanager exited"; }
    [ $SECONDS -lt $deadline ] || { tail -n 30 "$state/alertmanager.log" >&2 || true; die "not ready after 20 s"; }
    sleep 0.1
  done
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

init() {
  rm -rf "$state"
  mkdir -p "$state/data"
  cat >"$state/alertmanager.yml" <<'YAML'
# hack/alertmanager.sh: every alert goes to a receiver that sends nothing
route:
  receiver: "null"
receivers:
  - name: "null"
YAML
  free_port >"$state/port"
}

server_start() {
  # it outlives this script: setsid (its own session, no signal from our terminal) and none of
  # its starter's descriptors (the lock on fd 9 would otherwise stay held as long as it runs)
  setsid "$bin" \
    --config.file="$state/alertmanager.yml" \
    --storage.path="$state/data" \
    --web.listen-address="127.0.0.1:$(port)" \
    --cluster.listen-address= \
    </dev/null >>"$state/alertmanager.log" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
  echo $! >"$state/pid"
  wait_ready
}

server_stop() {
  local p i
  p=$(pid)
  if running; then
    kill -TERM "$p" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      kill -0 "$p" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$p" 2>/dev/null; then
      say "still running 10 s after TERM; killing it"
      kill -KILL "$p" 2>/dev/null || true
    fi
  fi
  rm -f "$state/pid"
}

# One command at a time per name: tests of several binaries may `start` at once.
lock() {
  mkdir -p "$state_root"
  exec 9>"$state_root/.$name.lock"
  flock 9
}

start() {
  local start=$SECONDS
  lock
  if running && [ -n "$(port)" ]; then
    wait_ready
    say "already running on 127.0.0.1:$(port)"
    return 0
  fi
  if [ -s "$state/alertmanager.yml" ] && [ -n "$(port)" ]; then
    say "starting the existing state again on 127.0.0.1:$(port)"
  else
    init
  fi
  server_start
  say "ready in $((SECONDS - start)) s; use: eval \"\$($0 env --name $name)\""
}

stop() {
  lock
  if [ ! -d "$state" ]; then
    say "not running"
    return 0
  fi
  server_stop
  rm -rf "$state"
  say "stopped and removed $state"
}

status() {
  if running && ready; then
    echo "running: $(url) (state $state)"
  else
    echo "not running"
    return 1
  fi
}

need_port() { [ -n "$(port)" ] || die "not running; run: $0 start --name $name"; }

case "$cmd" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  url) need_port; url ;;
  env) need_port; echo "export ERU_TEST_ALERTMANAGER_URL=$(url)" ;;
  *) die "usage: $0 start|stop|status|url|env [--name N] (see the header)" ;;
esac
