#!/usr/bin/env bash
# Runs schemathesis against a live server over every operation that takes a project's
# secret key (everything but /admin), with every check. Used by .ci/run; also by hand:
#   .ci/schemathesis.sh [path/to/mailroom] [max-examples]
# Needs schemathesis on PATH (or in $SCHEMATHESIS_VENV/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${1:-${CARGO_TARGET_DIR:-$HOME/.cache/mailroom-target}/debug/mailroom}"
EXAMPLES="${2:-25}"
ST="schemathesis"
if [ -n "${SCHEMATHESIS_VENV:-}" ]; then ST="$SCHEMATHESIS_VENV/bin/schemathesis"; fi

WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

export MAILROOM__STORAGE__PATH="$WORK/data"
export MAILROOM__MAIL__FILE_DIR="$WORK/data/outbox"
# Fuzzing sends hundreds of requests a second from one key.
export MAILROOM__LIMITS__REQUESTS_PER_MINUTE=0
KEYS="$("$BIN" --config config/test.toml project create --name schemathesis)"
SECRET="$(printf '%s' "$KEYS" | python3 -c 'import json,sys; print(json.load(sys.stdin)["secretKey"])')"
PROJECT="$(printf '%s' "$KEYS" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
# A sender domain trusted by the operator, so that sends from it can be accepted.
"$BIN" --config config/test.toml domain trust example.com --project "$PROJECT" >/dev/null

"$BIN" serve --config config/test.toml >"$WORK/stdout" 2>"$WORK/server.log" &
SERVER_PID=$!
for _ in $(seq 1 100); do
  URL="$(sed -n 's/^mailroom listening on //p' "$WORK/stdout" | head -n1)"
  [ -n "$URL" ] && break
  sleep 0.1
done
if [ -z "${URL:-}" ]; then echo "the server did not start"; cat "$WORK/server.log"; exit 1; fi

CONFIG="$(pwd)/.ci/schemathesis.toml"
# Our own check: a 422 for valid data only for the rules schemathesis.toml lists.
export SCHEMATHESIS_HOOKS="$(pwd)/.ci/schemathesis_hooks.py"
cd "$WORK"   # schemathesis writes its own folder where it runs
"$ST" --config-file "$CONFIG" run "$URL/openapi.json" \
  --url "$URL" \
  -H "Authorization: Bearer $SECRET" \
  --exclude-path-regex '^/admin' \
  --checks all \
  --max-examples "$EXAMPLES" \
  --seed "${SCHEMATHESIS_SEED:-1}" \
  --no-color
