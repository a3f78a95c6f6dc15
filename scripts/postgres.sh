#!/usr/bin/env bash
# A throw-away PostgreSQL server for the tests, in a temporary folder, on 127.0.0.1.
#   eval "$(scripts/postgres.sh start)"   prints the exports (CORPUS_TEST_PG_*, PGDATA_TMP)
#   scripts/postgres.sh stop "$PGDATA_TMP"
set -euo pipefail
cmd="${1:-start}"
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$pgbin" ] || { echo "postgres.sh: PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/bash -c "$*"; else bash -c "$*"; fi; }
case "$cmd" in
start)
  data=$(mktemp -d /tmp/corpus-pg.XXXXXX)
  [ "$(id -u)" = 0 ] && chown postgres "$data"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  as_pg "$pgbin/initdb -D $data/db -U postgres --auth=trust -E UTF8 --locale=C.UTF-8" >/dev/null
  as_pg "$pgbin/pg_ctl -D $data/db -l $data/log -o '-p $port -c listen_addresses=127.0.0.1 -k $data' -w start" >/dev/null
  echo "export CORPUS_TEST_PG_HOST=127.0.0.1 CORPUS_TEST_PG_PORT=$port CORPUS_TEST_PG_USER=postgres CORPUS_TEST_PG_PASSWORD=postgres PGDATA_TMP=$data"
  ;;
stop)
  data="${2:?data folder}"
  as_pg "$pgbin/pg_ctl -D $data/db -m fast -w stop" >/dev/null 2>&1 || true
  rm -rf "$data"
  ;;
esac
