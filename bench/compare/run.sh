#!/usr/bin/env bash
# bench/compare/run.sh: two tetherd builds side by side, in one run: the point read and the page of 20 point reads
# (one call each) through the PHP client, each build against the same MariaDB, rounds interleaved. For a change that
# must not move the numbers (a re-lay, a refactor): the rows of the two builds must be within noise of each other.
#
#   bash bench/compare/run.sh [--quick] [--write] [--before REV] [--after REV] [--delay D] [--pool N]
#
# REV is a git revision (default: --before HEAD~1, --after the working tree); each is built into
# var/bench-compare/tetherd-{before,after} (the working tree with `go build`, a revision from `git archive`). It
# starts a throwaway MariaDB in var/bench-compare/mariadb with bench_kv (10,000 rows), two tetherds (pool of 4 each,
# on their own sockets), and runs bench/compare/bench.php: ROUNDS rounds, each measuring both builds one after the
# other (the order alternates), solo (one PHP process, one call at a time: p50 and mean latency, tetherd CPU per
# call) and under load (4 PHP processes at once: calls per second, tetherd CPU per call), for a point read, a page
# of 20 reads one call each and a page of 20 reads in one batch. It prints markdown: the median over rounds of each
# row for each build and their ratio (after / before). It stops what it started, by PID.
#
#   --delay D                 tetherd reaches MariaDB over TCP through bench/relay, which adds D each way (a Go
#                             duration: 500us), as a database on another host; the relay's own measured round trip
#                             is printed with the results. Default: the Unix socket, no relay.
#   --pool N                  each tetherd's max_conns and min_conns (4)
#
#   --quick / BENCH_QUICK=1   2 rounds of ~500 calls: proves the command works, numbers not worth quoting
#   --write / BENCH_WRITE=1   also rewrite the section between <!-- compare-bench:start --> and
#                             <!-- compare-bench:end --> in docs/benchmarks.md (refused with --quick)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib/databases.sh source-path=SCRIPTDIR/../..
source "$ROOT/scripts/lib/databases.sh"
# shellcheck source=bench/lib/bench.sh
source "$ROOT/bench/lib/bench.sh"

BEFORE=HEAD~1
AFTER=
DELAY=
POOL=4
rest=()
while (($#)); do
	case $1 in
	--before) BEFORE=${2:?--before needs a revision}; shift ;;
	--after) AFTER=${2:?--after needs a revision}; shift ;;
	--delay) DELAY=${2:?--delay needs a duration}; shift ;;
	--pool) POOL=${2:?--pool needs a number}; shift ;;
	*) rest+=("$1") ;;
	esac
	shift
done
bench_parse_args "$ROOT/bench/compare/run.sh" -- "${rest[@]}"
ARGS=(--before "$BEFORE" ${AFTER:+--after "$AFTER"} ${DELAY:+--delay "$DELAY"} --pool "$POOL" "${ARGS[@]}")

WORK=$ROOT/var/bench-compare
DOC=$ROOT/docs/benchmarks.md
apt_install_missing "bench" php8.2-cli php8.2-mysql php8.2-msgpack mariadb-server
command -v go >/dev/null || die "go is not installed"

PIDS=()
BENCH_PHP_PID=
RELAY_PID=
stop_all() {
	local p
	if [[ -n "$BENCH_PHP_PID" ]]; then stop_pid "$BENCH_PHP_PID" bench.php 5; BENCH_PHP_PID=; fi
	for p in "${PIDS[@]}"; do stop_pid "$p" tetherd 15; done
	PIDS=()
	if [[ -n "$RELAY_PID" ]]; then stop_pid "$RELAY_PID" relay 5; RELAY_PID=; fi
	stop_mariadb
}
bench_trap stop_all
mkdir -p "$WORK"
for which in before after; do stop_leftover "$WORK" "tetherd-$which.pid" "tetherd-$which"; done
clean_db_dir "$WORK/mariadb"

# build REV OUT builds tetherd at git revision REV (empty: the working tree) into OUT and prints what it built.
build() {
	local rev=$1 out=$2 src
	if [[ -z "$rev" ]]; then
		go build -o "$out" ./cmd/tetherd
		printf 'working tree (%s%s)' "$(git rev-parse --short HEAD)" "$(git diff --quiet HEAD -- . 2>/dev/null || echo ', modified')"
		return
	fi
	src=$WORK/src-$(basename "$out")
	rm -rf "$src" && mkdir -p "$src"
	git archive "$rev" | tar -x -C "$src"
	(cd "$src" && go build -o "$out" ./cmd/tetherd) || die "cannot build $rev"
	rm -rf "$src"
	git rev-parse --short "$rev"
}
log "compare: building before ($BEFORE) and after (${AFTER:-working tree})"
before_desc=$(build "$BEFORE" "$WORK/tetherd-before")
after_desc=$(build "$AFTER" "$WORK/tetherd-after")

start_mariadb "$WORK/mariadb"
MYSQL=$(_db_bin mariadb mysql)
"$MYSQL" --no-defaults --socket="$MARIADB_SOCKET" --user="$TETHER_DB_USER" --password="$TETHER_DB_PASSWORD" \
	--batch "$TETHER_DB_NAME" >/dev/null <<'SQL'
CREATE TABLE bench_kv (id INT PRIMARY KEY, name VARCHAR(64), score INT, created DATETIME) ENGINE=InnoDB;
SET SESSION max_recursive_iterations = 100000;
INSERT INTO bench_kv (id, name, score, created)
WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 10000)
SELECT n, CONCAT('name-', n), (n * 7919) % 1000, TIMESTAMP '2026-01-01 00:00:00' - INTERVAL n MINUTE FROM seq;
ANALYZE TABLE bench_kv;
SQL

DSN=$MARIADB_DSN
relay_line=
if [[ -n "$DELAY" ]]; then
	go build -o "$WORK/relay" ./bench/relay
	relay_port=$(free_port 14306)
	"$WORK/relay" -listen "127.0.0.1:$relay_port" -target "127.0.0.1:$MARIADB_PORT" -delay "$DELAY" \
		</dev/null >"$WORK/relay.log" 2>&1 &
	RELAY_PID=$!
	await relay "$RELAY_PID" "$WORK/relay.log" 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$relay_port"
	DSN="$TETHER_DB_USER:$TETHER_DB_PASSWORD@tcp(127.0.0.1:$relay_port)/$TETHER_DB_NAME"
	relay_line=$("$WORK/relay" -measure -delay "$DELAY" -n 1000 2>&1 | sed -n '3p' | sed 's/^relay: //')
fi

for which in before after; do
	rm -f "$WORK/$which.sock"
	cat >"$WORK/tetherd-$which.toml" <<TOML
# Written by bench/compare/run.sh for one run.
[server]
socket = "$WORK/$which.sock"
default_backend = "maria"

[log]
level = "warn"

[backends.maria]
type = "mysql"
dsn = "$DSN"
max_conns = $POOL
min_conns = $POOL
TOML
	"$WORK/tetherd-$which" -config "$WORK/tetherd-$which.toml" </dev/null >"$WORK/tetherd-$which.log" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	echo "$pid" >"$WORK/tetherd-$which.pid"
	wait_for_socket "$pid" "$WORK/$which.sock" "$WORK/tetherd-$which.log" 15
	printf -v "PID_${which^^}" '%s' "$pid"
done

bench_facts
cmd=$(bench_cmd bench/compare/run.sh)
load_before=$(cut -d' ' -f1 /proc/loadavg)
log "compare: running bench/compare/bench.php$([[ "$QUICK" == 1 ]] && echo " (quick)")"
bench_rc=0
bench_run_bg env BEFORE_SOCKET="$WORK/before.sock" BEFORE_PID="$PID_BEFORE" AFTER_SOCKET="$WORK/after.sock" \
	AFTER_PID="$PID_AFTER" CLK_TCK="$(getconf CLK_TCK)" php bench/compare/bench.php "${QUICK_ARGS[@]}" \
	>"$WORK/results.md" || bench_rc=$?
((bench_rc == 0)) || die "bench/compare/bench.php failed (exit $bench_rc)"
load_after=$(cut -d' ' -f1 /proc/loadavg)
{
	echo "### Two builds side by side (bench/compare)"
	echo
	echo "Run on $bench_date with \`$cmd\`$([[ "$QUICK" == 1 ]] && echo ' (QUICK MODE: too few calls to quote)')."
	echo "Before: $before_desc. After: $after_desc."
	echo "Machine: $(nproc) vCPU ($cpu_model), $mem RAM; PHP $php_version (CLI), MariaDB $maria_version, $go_version."
	bench_load_lines "$load_before" "$load_after"
	echo "Each tetherd: a pool of $POOL; MariaDB $([[ -n "$DELAY" ]] && echo "over TCP through bench/relay adding $DELAY each way (relay -measure: $relay_line)" || echo "over its Unix socket")."
	echo
	cat "$WORK/results.md"
} >"$WORK/section.md"
stop_all
cat "$WORK/section.md"
if [[ "$WRITE" == 1 ]]; then
	replace_doc_section "$DOC" compare-bench "$WORK/section.md"
	log "compare: docs/benchmarks.md updated"
fi
