#!/usr/bin/env bash
# Times each dashboard page with 100,000 contacts in one project (docs/performance.md).
# Starts the server on port 18099 with its data under /tmp/mailroom-dashboard-bench, and
# stops it at the end; delete that directory afterwards.
set -euo pipefail
BIN=${BIN:-target/release/mailroom}
mkdir -p /tmp/mailroom-dashboard-bench
[ -f /tmp/mailroom-dashboard-bench/contacts.csv ] || python3 -c "
with open('/tmp/mailroom-dashboard-bench/contacts.csv', 'w') as f:
    f.write('email,plan,age:number\\n')
    for i in range(100000):
        f.write(f'user{i:06d}@example.com,{\"pro\" if i % 10 == 0 else \"free\"},{i % 90}\\n')
"
DIR=/tmp/mailroom-dashboard-bench/data
rm -rf "$DIR"
MAILROOM__STORAGE__PATH=$DIR MAILROOM__SERVER__PORT=18099 MAILROOM__LIMITS__REQUESTS_PER_MINUTE=0 \
  MAILROOM__ADMIN__TOKEN=perf-admin-token-0123456789abcdefghijklmnop MAILROOM__LOG__LEVEL=warn \
  MAILROOM__CONTROL__ENABLED=false "$BIN" serve > /tmp/mailroom-dashboard-bench/server.log 2>&1 &
echo $! > /tmp/mailroom-dashboard-bench/pid
B=http://127.0.0.1:18099
until curl -sf $B/health >/dev/null; do sleep 0.2; done
SK=$(curl -s -X POST $B/admin/projects -H 'Authorization: Bearer perf-admin-token-0123456789abcdefghijklmnop' \
  -H 'Content-Type: application/json' -d '{"name":"Perf"}' | sed -n 's/.*"secretKey":"\([^"]*\)".*/\1/p')
IMP=$(curl -s -X POST $B/contacts/import -H "Authorization: Bearer $SK" -H 'Content-Type: text/csv' \
  --data-binary @/tmp/mailroom-dashboard-bench/contacts.csv | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
start=$(date +%s)
until curl -s $B/contacts/imports/$IMP -H "Authorization: Bearer $SK" | grep -q COMPLETED; do sleep 1; done
echo "import of 100,000: $(( $(date +%s) - start )) s"
curl -s -X POST $B/segments -H "Authorization: Bearer $SK" -H 'Content-Type: application/json' \
  -d '{"name":"Pro","filters":{"operator":"AND","conditions":[{"field":"data.plan","operator":"equals","value":"pro"}]}}' >/dev/null
for i in $(seq 1 20); do
  curl -s -X POST $B/v1/track -H "Authorization: Bearer $SK" -H 'Content-Type: application/json' \
    -d "{\"email\":\"user0000$((i % 10))0@example.com\",\"event\":\"signup\"}" >/dev/null
done
J=/tmp/mailroom-dashboard-bench/jar
rm -f $J
TOKEN=$(curl -s -c $J $B/app/sign-in | sed -n 's/.*name="csrf" value="\([^"]*\)".*/\1/p')
curl -s -b $J -c $J -o /dev/null -X POST $B/app/sign-in --data-urlencode "csrf=$TOKEN" --data-urlencode "key=$SK"
CID=$(curl -s "$B/contacts?limit=1" -H "Authorization: Bearer $SK" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p' | head -1)
for page in /app/overview /app/contacts "/app/contacts?subscribed=yes" "/app/contacts?search=user099" /app/contacts/$CID \
            /app/segments /app/templates /app/campaigns /app/workflows /app/events "/app/events?name=signup" /app/domains /app/settings; do
  best=9; for k in 1 2 3 4 5; do
    t=$(curl -s -b $J -o /dev/null -w '%{http_code} %{time_total}' "$B$page")
    code=${t% *}; s=${t#* }
    best=$(python3 -c "print(min($best, $s))")
  done
  printf '%-32s %s  best of 5: %.1f ms\n' "$page" "$code" "$(python3 -c "print($best*1000)")"
done
CSRF=$(curl -s -b $J $B/app/segments | sed -n 's/.*name="csrf" value="\([^"]*\)".*/\1/p' | head -1)
best=9; for k in 1 2 3 4 5; do
  t=$(curl -s -b $J -o /dev/null -w '%{http_code} %{time_total}' -X POST $B/app/segments/count \
    --data-urlencode "csrf=$CSRF" -d 'match_=AND&field0=data.plan&op0=equals&value0=pro' -H 'Accept: application/json')
  best=$(python3 -c "print(min($best, ${t#* }))")
done
printf '%-32s %s  best of 5: %.1f ms\n' "POST /app/segments/count" "${t% *}" "$(python3 -c "print($best*1000)")"
kill "$(cat /tmp/mailroom-dashboard-bench/pid)"
