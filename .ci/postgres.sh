#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests, in a temporary directory of its own.
#   eval "$(.ci/postgres.sh start)"   # exports MAILROOM_TEST_POSTGRES_URL and PG_TEST_DIR
#   .ci/postgres.sh stop "$PG_TEST_DIR"
# Installs Debian's postgresql when initdb is missing. As root (CI), the cluster runs as
# the `postgres` user (PostgreSQL refuses to run as root). It listens on a unix socket
# in its directory only (listen_addresses = ''), so its port is just the socket's name
# and cannot clash with another cluster or service on this machine.
set -euo pipefail

pg_bin() {
  local initdb
  initdb="$(command -v initdb 2>/dev/null || true)"
  if [ -n "$initdb" ]; then
    dirname "$(readlink -f "$initdb")"
    return
  fi
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

start() {
  local bin
  bin="$(pg_bin)"
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    export DEBIAN_FRONTEND=noninteractive
    # Only the binaries: no cluster of the package's own on port 5432.
    mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/mailroom-ci.conf
    apt-get update -qq >&2 && apt-get install -y -qq postgresql >/dev/null
    bin="$(pg_bin)"
  fi
  # The API test harness makes each test's schema with psql.
  if ! command -v psql >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 && apt-get install -y -qq postgresql-client >/dev/null
  fi
  local dir port run_as=()
  dir="$(mktemp -d /tmp/mailroom-pg.XXXXXX)"
  port=$((20000 + RANDOM % 40000))
  if [ "$(id -u)" = 0 ]; then
    chown postgres: "$dir"
    run_as=(runuser -u postgres --)
  fi
  "${run_as[@]}" "$bin/initdb" -D "$dir/data" -U mailroom -A trust --no-sync >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
  # TLS for the tests of storage.postgres.tls: a CA of the run's own and a certificate
  # for localhost and 127.0.0.1 that it signed, served on loopback TCP beside the socket.
  if ! command -v openssl >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 && apt-get install -y -qq openssl >/dev/null
  fi
  (
    cd "$dir"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3 -subj "/CN=mailroom test CA" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
      -keyout ca.key -out ca.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3 \
      -extfile server.ext -out server.crt 2>/dev/null
    chmod 600 server.key ca.key
    chmod 644 ca.crt
    if [ "$(id -u)" = 0 ]; then chown postgres: server.key server.crt; fi
  )
  # Connections: one lock session and storage.postgres.pool_size per test server, with
  # a test thread per core each starting servers. A port taken on loopback: another.
  local tries=0
  until "${run_as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
    -o "-c listen_addresses='127.0.0.1' -c unix_socket_directories='$dir' -p $port -c max_connections=400 -c shared_buffers=128MB -c ssl=on -c ssl_cert_file='$dir/server.crt' -c ssl_key_file='$dir/server.key'" >&2; do
    tries=$((tries + 1))
    if [ "$tries" -ge 5 ]; then cat "$dir/server.log" >&2; exit 1; fi
    port=$((20000 + RANDOM % 40000))
  done
  echo "export PG_TEST_DIR='$dir'"
  echo "export MAILROOM_TEST_POSTGRES_TLS_URL='postgresql://mailroom@localhost:$port/postgres'"
  echo "export MAILROOM_TEST_POSTGRES_CA='$dir/ca.crt'"
  # The socket directory as the URL's host, percent-encoded (libpq and tokio-postgres
  # both read a host that starts with / as a socket directory).
  echo "export MAILROOM_TEST_POSTGRES_URL='postgresql://mailroom@${dir//\//%2F}:$port/postgres'"
}

stop() {
  local dir="$1" bin run_as=()
  [ -d "$dir/data" ] || return 0
  bin="$(pg_bin)"
  [ "$(id -u)" = 0 ] && run_as=(runuser -u postgres --)
  "${run_as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:?the cluster directory}" ;;
  *) echo "usage: $0 start | stop DIR" >&2; exit 2 ;;
esac
