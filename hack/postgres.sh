#!/usr/bin/env bash
# A local PostgreSQL for the journal's tests and benchmarks, from Debian's server binaries
# (/usr/lib/postgresql/<version>/bin; package `postgresql`, hack/deps.sh installs it): one data
# folder per name, on a free port of 127.0.0.1 (no other address, no Unix socket), trust auth.
# Its default collation is ICU en-US, as on many managed servers: the journal must not depend on
# the server's locale (its migrations declare COLLATE "C" where order matters).
#
#   hack/postgres.sh start [--name N]    create (once) and start it; returns when it accepts
#                                        connections; idempotent (a running server is left as is)
#   hack/postgres.sh url [--name N]      print postgres://postgres@127.0.0.1:PORT/postgres
#   hack/postgres.sh env [--name N]      print `export ERU_TEST_POSTGRES_URL=...`
#   hack/postgres.sh status [--name N]   running and accepting connections, or exit 1
#   hack/postgres.sh restart [--name N] [--immediate] [--down-seconds S]
#                                        stop the server (fast shutdown, or --immediate: like a
#                                        crash), wait S s (0), start it again on the same port and data
#   hack/postgres.sh stop [--name N]     stop what `start` started, remove its state
#
# Options and environment:
#   --name NAME / ERU_POSTGRES_NAME    server name (default "eru"); servers run side by side
#   ERU_POSTGRES_STATE                 state root (default <repo>/.postgres); one folder per name
#   ERU_POSTGRES_BIN                   folder of initdb, pg_ctl and pg_isready (default: the newest
#                                      /usr/lib/postgresql/*/bin)
# As root the server runs as the `postgres` system user (initdb and postgres refuse root), which
# owns the data folder.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
name=${ERU_POSTGRES_NAME:-eru}
immediate=""
down_seconds=0

say() { printf '[postgres %s] %s\n' "$name" "$*" >&2; }
die() { say "error: $*"; exit 1; }

cmd=${1:-}
[ $# -gt 0 ] && shift
while [ $# -gt 0 ]; do
  case "$1" in
    --name) name=${2:?--name needs a value}; shift 2 ;;
    --name=*) name=${1#*=}; shift ;;
    --immediate) immediate=1; shift ;;
    --down-seconds) down_seconds=${2:?--down-seconds needs a number}; shift 2 ;;
    *) die "unknown argument: $1 (see the header of $0)" ;;
  esac
done
[[ "$name" =~ ^[a-z0-9][a-z0-9-]*$ ]] || die "--name must be lowercase letters, digits and '-', got '$name'"
state_root=${ERU_POSTGRES_STATE:-$repo/.postgres}
state="$state_root/$name"
data="$state/data"

bin=${ERU_POSTGRES_BIN:-}
if [ -z "$bin" ]; then
  bin=$(compgen -G '/usr/lib/postgresql/*/bin/initdb' | sort -V | tail -n 1 || true)
  bin=${bin%/initdb}
fi
[ -x "${bin:-/nonexistent}/initdb" ] ||
  die "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb); run hack/deps.sh or set ERU_POSTGRES_BIN"

# as_server CMD...: run CMD as the user the server runs as (from /, which that user can read).
as_server() {
  if [ "$(id -u)" = 0 ]; then
    (cd / && runuser -u postgres -- "$@")
  else
    (cd / && "$@")
  fi
}

port() { cat "$state/port" 2>/dev/null || true; }
url() { echo "postgres://postgres@127.0.0.1:$(port)/postgres"; }

# running: the server of this data folder runs (pg_ctl reads its postmaster.pid and checks the PID).
running() { [ -s "$data/PG_VERSION" ] && as_server "$bin/pg_ctl" status -D "$data" >/dev/null 2>&1; }

accepting() { "$bin/pg_isready" -q -h 127.0.0.1 -p "$(port)" -U postgres -d postgres; }

wait_accepting() {
  local deadline=$((SECONDS + 60))
  until accepting; do
    running || { tail -n 30 "$state/postgres.log" >&2 || true; die "the server exited"; }
    [ $SECONDS -lt $deadline ] || { tail -n 30 "$state/postgres.log" >&2 || true; die "not accepting connections after 60 s"; }
    sleep 0.1
  done
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

init() {
  rm -rf "$state"
  mkdir -p "$data"
  chmod 700 "$data"
  touch "$state/postgres.log"
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || die "there is no 'postgres' user to run the server as (package postgresql)"
    chown postgres: "$data" "$state/postgres.log"
    runuser -u postgres -- test -w "$data" ||
      die "the postgres user cannot reach $data; set ERU_POSTGRES_STATE to a folder it can (e.g. under /tmp)"
  fi
  as_server "$bin/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
    --locale-provider=icu --icu-locale=en-US --no-sync >"$state/initdb.log" 2>&1 ||
    { cat "$state/initdb.log" >&2; die "initdb failed"; }
  free_port >"$state/port"
  # Appended settings win over initdb's. Durability stays the default (fsync, synchronous_commit
  # on): the benchmarks compare it with SQLite's synchronous=FULL.
  as_server tee -a "$data/postgresql.conf" >/dev/null <<CONF

# hack/postgres.sh
listen_addresses = '127.0.0.1'
port = $(port)
unix_socket_directories = ''
max_connections = 200
CONF
  as_server tee "$data/pg_hba.conf" >/dev/null <<'HBA'
# hack/postgres.sh: trust, TCP on loopback only (the server listens on 127.0.0.1 alone)
host all all 127.0.0.1/32 trust
HBA
}

server_start() {
  # the server outlives this script: it keeps none of its starter's descriptors (a lock held by
  # `flock file command` around the tests would otherwise stay held as long as the server runs)
  as_server "$bin/pg_ctl" start -D "$data" -l "$state/postgres.log" -w -t 60 -s \
    3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- ||
    { tail -n 30 "$state/postgres.log" >&2 || true; die "pg_ctl start failed"; }
  wait_accepting
}

server_stop() { # server_stop MODE
  running || return 0
  as_server "$bin/pg_ctl" stop -D "$data" -m "$1" -w -t 60 -s ||
    as_server "$bin/pg_ctl" stop -D "$data" -m immediate -w -t 60 -s
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
    wait_accepting
    say "already running on 127.0.0.1:$(port)"
    return 0
  fi
  if [ -s "$data/PG_VERSION" ] && [ -n "$(port)" ]; then
    say "starting the existing data folder again on 127.0.0.1:$(port)"
  else
    init
  fi
  server_start
  say "ready in $((SECONDS - start)) s; use: eval \"\$($0 env --name $name)\""
}

restart() {
  lock
  running || die "not running; run: $0 start --name $name"
  server_stop "$([ -n "$immediate" ] && echo immediate || echo fast)"
  [ "$down_seconds" = 0 ] || { say "stopped; starting again in ${down_seconds}s"; sleep "$down_seconds"; }
  server_start
  say "restarted on 127.0.0.1:$(port)"
}

stop() {
  lock
  if [ ! -d "$state" ]; then
    say "not running"
    return 0
  fi
  server_stop fast
  rm -rf "$state"
  say "stopped and removed $state"
}

status() {
  if running && accepting; then
    echo "running: $(url) (data $data)"
  else
    echo "not running"
    return 1
  fi
}

need_port() { [ -n "$(port)" ] || die "not running; run: $0 start --name $name"; }

case "$cmd" in
  start) start ;;
  stop) stop ;;
  restart) restart ;;
  status) status ;;
  url) need_port; url ;;
  env) need_port; echo "export ERU_TEST_POSTGRES_URL=$(url)" ;;
  *) die "usage: $0 start|stop|restart|status|url|env [--name N] (see the header)" ;;
esac
