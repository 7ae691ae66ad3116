#!/usr/bin/env bash
# scripts/status-page-test.sh: loads tetherd's status page (GET /status on the admin API) in a real headless
# browser (Chromium from Debian) and checks what it renders: a tetherd on SQLite that has served some statements,
# one of them failing, must show itself ready, its pool, its operations, its slowest statements and the error.
# With --write it also saves the page's screenshot as docs/img/status-page.png.
#
#   bash scripts/status-page-test.sh [--write]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=lib/common.sh
source scripts/lib/common.sh

WRITE=0
[[ "${1:-}" == --write ]] && WRITE=1
apt_install_missing --no-recommends status-page chromium
BROWSER=$(command -v chromium || command -v chromium-browser) || die "status-page: chromium not found"

WORK=$ROOT/var/status-page
rm -rf "$WORK"
mkdir -p "$WORK"
go build -o bin/tetherd ./cmd/tetherd
go build -o bin/tether ./cmd/tether
PORT=$(free_port 19187)
cat >"$WORK/tetherd.toml" <<TOML
[server]
socket = "$WORK/t.sock"
default_backend = "main"
[admin]
tcp_listen = "127.0.0.1:$PORT"
[backends.main]
type = "sqlite"
dsn = "$WORK/t.db"
TOML
bin/tetherd -config "$WORK/tetherd.toml" >"$WORK/tetherd.log" 2>&1 &
PID=$!
trap 'kill -TERM "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
	[[ -S "$WORK/t-admin.sock" ]] && break
	pid_alive "$PID" || { tail_file "$WORK/tetherd.log"; die "status-page: tetherd exited"; }
	sleep 0.1
done
T=(bin/tether -config "$WORK/tetherd.toml")
"${T[@]}" query "CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER)" >/dev/null
for i in 1 2 3 4 5; do "${T[@]}" query "INSERT INTO kv VALUES (?, $i)" "k$i" >/dev/null; done
# 160 runs of one read: the most frequent statement (one in 16 sampled at random: 10 expected, none with odds of
# 3 in 100,000).
for i in $(seq 160); do "${T[@]}" query "SELECT v FROM kv WHERE k = ?" "k$((i % 5 + 1))" >/dev/null; done
"${T[@]}" query "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000) SELECT count(*) FROM c" >/dev/null
"${T[@]}" query "SELECT * FROM no_such_table" >/dev/null 2>&1 && die "status-page: a query of a missing table succeeded"

URL=http://127.0.0.1:$PORT/status
chrome=("$BROWSER" --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run
	--user-data-dir="$WORK/profile" --window-size=1280,1100)
# The DOM as the browser built it, after parsing and layout.
timeout 60 "${chrome[@]}" --dump-dom "$URL" >"$WORK/dom.html" 2>"$WORK/chromium.log" ||
	{ tail_file "$WORK/chromium.log"; die "status-page: chromium could not load $URL"; }
for want in 'class="state-ready">ready<' 'id="clients">' '<td>main</td><td>sqlite</td>' 'WITH RECURSIVE c(x)' \
	'no_such_table' 'backend_error' '<td>query</td><td>main</td><td class="n">168</td>' 'id="frequent"' \
	'<td>main</td><td><code>SELECT v FROM kv WHERE k = ?</code>' 'event loop busy'; do
	grep -qF -- "$want" "$WORK/dom.html" || { cat "$WORK/dom.html"; die "status-page: the rendered page has no: $want"; }
done
timeout 60 "${chrome[@]}" --screenshot="$WORK/status-page.png" "$URL" >/dev/null 2>>"$WORK/chromium.log" ||
	{ tail_file "$WORK/chromium.log"; die "status-page: chromium could not take the screenshot"; }
[[ -s "$WORK/status-page.png" ]] || die "status-page: no screenshot"
if ((WRITE)); then
	mkdir -p docs/img
	cp "$WORK/status-page.png" docs/img/status-page.png
	log "status-page: wrote docs/img/status-page.png"
fi
log "status-page: Chromium rendered $URL as expected (screenshot $WORK/status-page.png)"
