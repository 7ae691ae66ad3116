#!/usr/bin/env bash
# scripts/ops-test.sh: reloads and binary upgrades under load, as an operator would run them, with real PHP
# workers (tests/ops/load.php: the PHP client on persistent sockets, as php-fpm keeps them) running reads and
# transactions all along. Not one PHP request may fail:
#
#  1. reloads   RELOADS times `tether reload`, each changing every pool's max_conns in the config file
#               (server.Server.Reload swaps the pools between two requests; the old ones drain);
#  2. upgrades  UPGRADES times `tether upgrade`: a new tetherd process starts from bin/tetherd, inherits the
#               sockets, and the old one hands its clients over and exits (docs/operations.md);
#  3. afterwards the PHP workers report their counts, every old tetherd process is gone, the last one still
#               serves, and SIGTERM stops it leaving no socket file.
#
# Backends: SQLite, plus MariaDB and PostgreSQL when TETHER_TEST_MYSQL_DSN / TETHER_TEST_POSTGRES_DSN are set
# (scripts/test.sh sets them to its throwaway servers).
#
#   bash scripts/ops-test.sh [--reloads N] [--upgrades N] [--workers N]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=lib/common.sh
source scripts/lib/common.sh

RELOADS=100 UPGRADES=5 WORKERS=6
while (($#)); do
	case $1 in
	--reloads) RELOADS=$2; shift 2 ;;
	--upgrades) UPGRADES=$2; shift 2 ;;
	--workers) WORKERS=$2; shift 2 ;;
	*) die "ops-test: unknown argument $1" ;;
	esac
done

WORK=$ROOT/var/ops-test
rm -rf "$WORK"
mkdir -p "$WORK"
go build -o bin/tetherd ./cmd/tetherd
go build -o bin/tether ./cmd/tether
BACKENDS=(main)
write_config() { # write_config MAX_CONNS
	{
		printf '[server]\nsocket = "%s"\nshutdown_grace = "10s"\n[log]\nlevel = "info"\n' "$WORK/t.sock"
		printf '[backends.main]\ntype = "sqlite"\ndsn = "%s"\nmax_conns = %d\n' "$WORK/t.db" "$1"
		if [[ -n "${TETHER_TEST_MYSQL_DSN:-}" ]]; then
			printf '[backends.maria]\ntype = "mysql"\ndsn = "%s"\nmax_conns = %d\n' "$TETHER_TEST_MYSQL_DSN" "$1"
		fi
		if [[ -n "${TETHER_TEST_POSTGRES_DSN:-}" ]]; then
			printf '[backends.pg]\ntype = "postgres"\ndsn = "%s"\nmax_conns = %d\n' "$TETHER_TEST_POSTGRES_DSN" "$1"
		fi
	} >"$WORK/tetherd.toml.new"
	mv "$WORK/tetherd.toml.new" "$WORK/tetherd.toml"
}
write_config 4
[[ -n "${TETHER_TEST_MYSQL_DSN:-}" ]] && BACKENDS+=(maria)
[[ -n "${TETHER_TEST_POSTGRES_DSN:-}" ]] && BACKENDS+=(pg)
T=(bin/tether -config "$WORK/tetherd.toml")

bin/tetherd -config "$WORK/tetherd.toml" >>"$WORK/tetherd.log" 2>&1 &
FIRST=$!
LOAD_PIDS=()
cleanup() {
	set +e
	for p in "${LOAD_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	# Whichever tetherd processes this run started (the upgrades' too): each was started from our config.
	for p in $(pgrep -f "bin/tetherd -config $WORK/tetherd.toml"); do kill -TERM "$p" 2>/dev/null; done
	wait 2>/dev/null
}
trap cleanup EXIT
wait_for_socket "$FIRST" "$WORK/t.sock" "$WORK/tetherd.log" 30
for be in "${BACKENDS[@]}"; do
	"${T[@]}" query -backend "$be" "DROP TABLE IF EXISTS ops_load" >/dev/null
	"${T[@]}" query -backend "$be" "CREATE TABLE ops_load (id BIGINT PRIMARY KEY, n INT)" >/dev/null
done
pid_of() { "${T[@]}" -json status | php -r 'echo json_decode(stream_get_contents(STDIN), true)["pid"];'; }
PIDS=("$(pid_of)")

DURATION=$((RELOADS / 20 + UPGRADES * 2 + 4))
log "ops-test: $WORKERS PHP workers for ${DURATION}s on ${BACKENDS[*]}: $RELOADS reloads, $UPGRADES upgrades meanwhile"
for w in $(seq 1 "$WORKERS"); do
	php tests/ops/load.php "$WORK/t.sock" "$DURATION" "$w" "${BACKENDS[@]}" >"$WORK/load-$w.json" 2>"$WORK/load-$w.err" &
	LOAD_PIDS+=($!)
done
sleep 1
t0=$(now)
for i in $(seq 1 "$RELOADS"); do
	write_config $((4 + i % 2 * 2))
	"${T[@]}" reload >>"$WORK/reloads.log" 2>&1 || { tail_file "$WORK/reloads.log"; die "ops-test: reload $i failed"; }
	sleep 0.03
done
log "ops-test: $RELOADS reloads in $(since "$t0")s"
t0=$(now)
for i in $(seq 1 "$UPGRADES"); do
	"${T[@]}" -json upgrade >"$WORK/upgrade-$i.json" 2>>"$WORK/upgrades.log" ||
		{ tail_file "$WORK/upgrades.log"; tail_file "$WORK/tetherd.log"; die "ops-test: upgrade $i failed"; }
	PIDS+=("$(php -r 'echo json_decode(file_get_contents($argv[1]), true)["new_pid"];' "$WORK/upgrade-$i.json")")
	sleep 1
done
log "ops-test: $UPGRADES upgrades in $(since "$t0")s; tetherd pids: ${PIDS[*]}"
for p in "${LOAD_PIDS[@]}"; do wait "$p" || die "ops-test: a PHP worker exited non-zero"; done
LOAD_PIDS=()

ok=0 failed=0
for w in $(seq 1 "$WORKERS"); do
	read -r o f < <(php -r '$r = json_decode(file_get_contents($argv[1]), true); echo $r["ok"], " ", $r["failed"], "\n";' "$WORK/load-$w.json")
	ok=$((ok + o)) failed=$((failed + f))
done
if ((failed > 0)); then
	cat "$WORK"/load-*.err >&2
	die "ops-test: $failed of $((ok + failed)) PHP requests failed across $RELOADS reloads and $UPGRADES upgrades"
fi
((ok > 1000)) || die "ops-test: only $ok PHP requests ran"
# Every upgrade gave a new process, and every old one has exited.
[[ $(printf '%s\n' "${PIDS[@]}" | sort -u | wc -l) == $((UPGRADES + 1)) ]] || die "ops-test: pids ${PIDS[*]}: an upgrade kept the old process"
LAST=${PIDS[-1]}
for p in "${PIDS[@]::${#PIDS[@]}-1}"; do
	wait_pid_exit "$p" 15 || die "ops-test: old tetherd $p still runs after its upgrade"
done
"${T[@]}" ping >/dev/null || die "ops-test: the last tetherd does not answer"
kill -TERM "$LAST"
wait_pid_exit "$LAST" 20 || die "ops-test: tetherd $LAST did not stop on SIGTERM"
[[ ! -e "$WORK/t.sock" ]] || die "ops-test: the socket file is left behind"
log "ops-test: PASSED: $ok PHP requests, 0 failed, across $RELOADS reloads and $UPGRADES upgrades (${BACKENDS[*]})"
