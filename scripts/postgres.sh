#!/usr/bin/env bash
# Postgres for @rx/store-pg's tests, on 127.0.0.1:5432 with a role `rx` (password `rx`, CREATEDB).
# Idempotent: installs `postgresql` from Debian's packages when missing (root only), starts a
# cluster when none runs, and creates or updates the role. Called by .ci/run and, when Postgres
# is not reachable, by the tests' global setup (packages/store-pg/test/globalSetup.ts).
#
#   bash scripts/postgres.sh          # as root: Debian's cluster (pg_ctlcluster), role rx
#   bash scripts/postgres.sh          # as another user: initdb into $RX_PG_DIR (default
#                                     # ~/.cache/rx-postgres), trust on 127.0.0.1, role rx
#
# Environment: RX_PG_PORT (default 5432).
set -euo pipefail

port="${RX_PG_PORT:-5432}"
role_sql="DO \$\$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rx') THEN
    CREATE ROLE rx LOGIN CREATEDB PASSWORD 'rx';
  ELSE
    ALTER ROLE rx LOGIN CREATEDB PASSWORD 'rx';
  END IF;
END \$\$;"

say() { echo "postgres.sh: $*" >&2; }

# The newest installed server's bin directory (Debian keeps them in /usr/lib/postgresql/<major>).
bindir() {
  local dir
  dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  [ -n "$dir" ] && [ -x "$dir/initdb" ] && echo "$dir"
}

ready() {
  local bin
  bin="$(bindir || true)"
  if [ -n "$bin" ]; then "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -t 2; return; fi
  command -v pg_isready >/dev/null 2>&1 && pg_isready -q -h 127.0.0.1 -p "$port" -t 2
}

wait_ready() {
  for _ in $(seq 1 60); do
    ready && return 0
    sleep 0.5
  done
  say "Postgres did not accept connections on 127.0.0.1:$port within 30 s"
  return 1
}

if [ "$(id -u)" = 0 ]; then
  if [ -z "$(bindir || true)" ]; then
    say "installing postgresql from Debian's packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || { sleep 5; apt-get update -qq; }
    apt-get install -y -qq postgresql >/dev/null
  fi
  if ! ready; then
    major="$(basename "$(dirname "$(bindir)")")"
    # Debian's package creates the cluster `main`; create it where a minimal install did not.
    if ! pg_lsclusters -h 2>/dev/null | awk '{print $1" "$2}' | grep -qx "$major main"; then
      say "creating cluster $major/main"
      pg_createcluster "$major" main --port "$port" >/dev/null
    fi
    say "starting cluster $major/main"
    # Without systemd as PID 1 pg_ctlcluster runs pg_ctl itself (containers, CI).
    pg_ctlcluster "$major" main start || true
    wait_ready
  fi
  # Local superuser access is `peer` for the postgres system user in Debian's pg_hba.conf.
  runuser -u postgres -- psql -q -v ON_ERROR_STOP=1 -p "$port" -h /var/run/postgresql -d postgres -c "$role_sql" >/dev/null
  say "ready on 127.0.0.1:$port (role rx)"
  exit 0
fi

# Not root: a cluster of this user's own, when none runs.
if ready; then
  say "already running on 127.0.0.1:$port"
  exit 0
fi
bin="$(bindir || true)"
if [ -z "$bin" ]; then
  say "Postgres is not installed and this user cannot install it: run 'sudo bash scripts/postgres.sh'"
  exit 1
fi
data="${RX_PG_DIR:-$HOME/.cache/rx-postgres}"
if [ ! -f "$data/PG_VERSION" ]; then
  say "initdb into $data"
  mkdir -p "$data"
  "$bin/initdb" -D "$data" -U "$(id -un)" --auth=trust >/dev/null
fi
say "starting the cluster in $data"
"$bin/pg_ctl" -D "$data" -l "$data/server.log" -w \
  -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$data" start >/dev/null
wait_ready
"$bin/psql" -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U "$(id -un)" -d postgres -c "$role_sql" >/dev/null
say "ready on 127.0.0.1:$port (role rx)"
