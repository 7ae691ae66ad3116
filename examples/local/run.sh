#!/usr/bin/env bash
# examples/local/run.sh: a PHP app on Tether on your machine, without containers: tetherd on its embedded default
# (SQLite, socket var/tether.sock) and PHP's built-in web server serving examples/local/public, whose page reads and
# writes through Tether. Ctrl-C stops both.
#
#   bash examples/local/run.sh            # then open http://127.0.0.1:8080/
#   bash examples/local/run.sh --check    # start both, fetch the page twice, check it, stop (make test runs this)
#
# The page counts its visits in var/tether.db.
# Point the page at your own database by giving tetherd a config: TETHERD_CONFIG=/path/to/tetherd.toml (its socket
# must be var/tether.sock, or set TETHER_SOCKET for PHP too).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=../../scripts/lib/common.sh
source scripts/lib/common.sh

CHECK=0
[[ "${1:-}" == --check ]] && CHECK=1
PORT=${PORT:-8080}
((CHECK)) && PORT=$(free_port 18080)
export TETHER_SOCKET=${TETHER_SOCKET:-$ROOT/var/tether.sock}
mkdir -p var
go build -o bin/tetherd ./cmd/tetherd
args=()
[[ -n "${TETHERD_CONFIG:-}" ]] && args=(-config "$TETHERD_CONFIG")
bin/tetherd "${args[@]}" >var/local-tetherd.log 2>&1 &
TETHERD=$!
php -S "127.0.0.1:$PORT" -t examples/local/public >var/local-php.log 2>&1 &
PHPD=$!
trap 'kill $PHPD 2>/dev/null; kill -TERM $TETHERD 2>/dev/null; wait 2>/dev/null' EXIT
wait_for_socket "$TETHERD" "$TETHER_SOCKET" var/local-tetherd.log 30
# PHP fetches the page (curl may not be installed).
fetch() { php -r '$b = @file_get_contents($argv[1]); if ($b === false) exit(1); echo $b;' "http://127.0.0.1:$PORT/"; }
for _ in $(seq 50); do fetch >/dev/null && break; sleep 0.1; done
if ((CHECK)); then
	first=$(fetch) || die "local example: the page failed"
	second=$(fetch) || die "local example: the page failed"
	n1=$(sed -n 's/.*visits: \([0-9]*\)<.*/\1/p' <<<"$first")
	n2=$(sed -n 's/.*visits: \([0-9]*\)<.*/\1/p' <<<"$second")
	[[ -n "$n1" && "$n2" == $((n1 + 1)) ]] || die "local example: want the visit count to go up by one, got: $first / $second"
	log "local example: OK (the page counted its visits through tetherd)"
	exit 0
fi
log "tetherd (pid $TETHERD) on $TETHER_SOCKET; the app on http://127.0.0.1:$PORT/ (Ctrl-C stops both)"
wait "$PHPD"
