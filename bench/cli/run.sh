#!/usr/bin/env bash
# bench/cli/run.sh: the CLI benchmark. Tether round trips against mysqli and pgsql, and seed E1's Cassandra reads
# through Tether against a client that connects per read, from the PHP CLI, in one run.
#
#   bash bench/cli/run.sh [--quick] [--write] [-- bench.php options]
#
# It installs the Debian 12 packages it needs when any is missing (php8.2-cli, php8.2-mysql, php8.2-pgsql,
# php8.2-msgpack, mariadb-server, postgresql, openjdk-17-jre-headless), starts a throwaway MariaDB in
# var/bench/mariadb and a throwaway PostgreSQL in var/bench/pg (scripts/lib/databases.sh) and loads bench_kv with
# 10,000 rows into each, starts a throwaway Cassandra in var/bench/cassandra (scripts/lib/cassandra.sh) and loads seed
# E1's keyspace (bench/cli/load-cassandra.php), builds bin/tetherd and starts it with a pool of 4 connections to each
# (backends maria, pg, cass), and runs bench/cli/bench.php, which measures per-call latency, tetherd's CPU per request
# (solo, solo pinned to one CPU, and with 4 PHP processes at once) and the backend connections used, then
# bench/cli/cassandra.php (seed E1: Tether against a pure-PHP CQL client connecting per read). It prints the results
# as markdown on stdout (progress on stderr) and stops tetherd, Cassandra, PostgreSQL and MariaDB (by PID) on exit,
# whatever happens.
#
# Solo latency is measured twice. Unpinned ("Latency: one PHP CLI process, one call at a time"), as a page sees it
# on an idle machine: on this 2-vCPU VM that mostly measures how fast an idle vCPU wakes up (40-70 us a hop), and a
# Tether read wakes more processes than a ping or a direct mysqli/pg read, so its ratio to them says more about the
# VM than about tetherd. Then "Latency, pinned to one CPU": tetherd and mariadbd (every thread), the postmaster and
# all its children (the pool's backends among them) pinned to CPU 0 with taskset, and the PHP process making the
# calls started under taskset -c 0, for the rows Tether ping (raw frames, PHP client), Tether point read (PHP client,
# raw frames; MariaDB and PostgreSQL), mysqli open connection prepared once and pg open connection prepared once. On
# one CPU each hand-off costs a context switch rather than a wake-up (a pipe ping-pong on this VM: ~53 us across the
# two vCPUs, ~6 us on one), and that is what tetherd's design can change: judge it by CPU per request under load
# and by lone latency pinned to one CPU. Every process's earlier affinity (all CPUs) is put back before the runs
# under load, and bench.php fails if it cannot. The mysqli p: and new-connection rows run unpinned only.
#
# The PostgreSQL rows: solo, "Tether point read, raw frames (PostgreSQL)", "Tether point read, PHP client
# (PostgreSQL)" and, as the floor, "pg open connection, prepared once" (pg_connect and pg_prepare once, pg_execute
# per read); under load, "Tether PostgreSQL point read". Each row also shows postgres' CPU per call (utime+stime of
# the postmaster and its backends). "Targets" judges the run, from its own rows, against: tetherd CPU per point read
# under load <= 2x per ping under load; tetherd context switches per solo point read <= 2 and solo point read p50
# through the PHP client <= 1.3x (Tether ping p50 + the open-connection prepared read p50), both from the pinned rows
# (the unpinned ratios follow "for comparison"); each for MariaDB and PostgreSQL, next to the older targets (CPU per
# ping under load <= 20 us, read p50 <= mysqli p: p50, unpinned).
#
#   --quick / BENCH_QUICK=1   ~1000 calls per row (10 connect-per-read Cassandra calls): proves the command works (CI),
#                             numbers are not worth quoting
#   --write / BENCH_WRITE=1   also rewrite the section between <!-- cli-bench:start --> and <!-- cli-bench:end -->
#                             in docs/benchmarks.md (refused with --quick)
#   after --, options for bench.php: --iterations N (20000), --warmup N (1000), --rounds N (5),
#                             --newconn-iterations N (2000), --load-procs N (4), --load-pings N (50000 per process),
#                             --load-reads N (20000 per process)
#   BENCH_NO_CLIENT=1         measure raw frames only (what happens when the PHP client cannot be loaded; the
#                             Cassandra part needs the client and is then skipped)
#   BENCH_PG_PORT             first port tried for PostgreSQL (15432), the next free one if busy
#   BENCH_CASSANDRA_PORT      first CQL port tried for Cassandra (19142; storage 17100, JMX 17190), the next free one if busy
#
# Files: var/bench/ (git-ignored) holds the MariaDB, PostgreSQL and Cassandra instances, tetherd's config, socket
# and log, and results.json (the pinned rows under "pinned"; cassandra.json).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib/databases.sh source-path=SCRIPTDIR/../..
source "$ROOT/scripts/lib/databases.sh"
# shellcheck source=scripts/lib/cassandra.sh source-path=SCRIPTDIR/../..
source "$ROOT/scripts/lib/cassandra.sh"
# shellcheck source=bench/lib/bench.sh
source "$ROOT/bench/lib/bench.sh"

bench_parse_args "$ROOT/bench/cli/run.sh" -- "$@"

WORK=$ROOT/var/bench
DOC=$ROOT/docs/benchmarks.md
T0=$(now)

# ---------------------------------------------------------------------------------------------------------------
# Packages

PACKAGES=(php8.2-cli php8.2-mysql php8.2-pgsql php8.2-msgpack mariadb-server postgresql openjdk-17-jre-headless)
apt_install_missing "bench" "${PACKAGES[@]}"
command -v go >/dev/null || die "go is not installed"
command -v taskset >/dev/null || die "taskset is not installed (util-linux): the pinned latency rows need it"

# ---------------------------------------------------------------------------------------------------------------
# Cleanup: whatever this script started, by PID

TETHERD_PID=
BENCH_PHP_PID=
# stop_servers stops bench.php (and its load workers), tetherd, Cassandra, PostgreSQL and MariaDB if this script
# started them; safe to call twice.
stop_servers() {
	if [[ -n "$BENCH_PHP_PID" ]]; then
		local w
		for w in $(pgrep -P "$BENCH_PHP_PID" 2>/dev/null || true); do
			kill -TERM "$w" 2>/dev/null || true
		done
		stop_pid "$BENCH_PHP_PID" bench.php 5
		BENCH_PHP_PID=
	fi
	if [[ -n "$TETHERD_PID" ]]; then
		log "tetherd: stopping pid $TETHERD_PID"
		stop_pid "$TETHERD_PID" tetherd 15
		TETHERD_PID=
		rm -f "$WORK/tetherd.pid"
	fi
	stop_cassandra
	stop_postgres
	stop_mariadb
	rm -rf "$WORK/tmp"
}
bench_trap stop_servers

mkdir -p "$WORK"
# A tetherd left by a killed run: stop it only if it is our binary running our config.
if [[ -r "$WORK/tetherd.pid" ]]; then
	old=$(cat "$WORK/tetherd.pid")
	if pid_alive "$old" && [[ "$(readlink -f "/proc/$old/exe" 2>/dev/null)" == "$ROOT/bin/tetherd"* ]] &&
		tr '\0' ' ' <"/proc/$old/cmdline" 2>/dev/null | grep -qF "$WORK/tetherd.toml"; then
		log "tetherd: stopping pid $old left over from an earlier run"
		stop_pid "$old" tetherd 15
	fi
	rm -f "$WORK/tetherd.pid"
fi
clean_db_dir "$WORK/mariadb"
clean_db_dir "$WORK/pg"
clean_cassandra_dir "$WORK/cassandra"

# ---------------------------------------------------------------------------------------------------------------
# Build, MariaDB, PostgreSQL, data, tetherd

log "bench: building bin/tetherd"
go build -o bin/tetherd ./cmd/tetherd

start_mariadb "$WORK/mariadb"
MYSQL=$(_db_bin mariadb mysql)
log "bench: loading bench_kv (10,000 rows)"
"$MYSQL" --no-defaults --socket="$MARIADB_SOCKET" --user="$TETHER_DB_USER" --password="$TETHER_DB_PASSWORD" \
	--batch "$TETHER_DB_NAME" >/dev/null <<'SQL'
CREATE TABLE bench_kv (
	id INT PRIMARY KEY,
	name VARCHAR(64),
	score INT,
	created DATETIME
) ENGINE=InnoDB;
SET SESSION max_recursive_iterations = 100000;
INSERT INTO bench_kv (id, name, score, created)
WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 10000)
SELECT n, CONCAT('name-', n), (n * 7919) % 1000, TIMESTAMP '2026-01-01 00:00:00' - INTERVAL n MINUTE FROM seq;
ANALYZE TABLE bench_kv;
SQL
# The mysqli rows connect as another user than tetherd, so that tetherd's connections can be counted apart.
"$MYSQL" --no-defaults --socket="$MARIADB_SOCKET" --user=root --batch <<SQL
CREATE USER 'bench'@'localhost' IDENTIFIED BY 'bench';
GRANT SELECT ON \`$TETHER_DB_NAME\`.* TO 'bench'@'localhost';
SQL
rows=$("$MYSQL" --no-defaults --socket="$MARIADB_SOCKET" --user="$TETHER_DB_USER" --password="$TETHER_DB_PASSWORD" \
	--batch --skip-column-names "$TETHER_DB_NAME" -e 'SELECT COUNT(*) FROM bench_kv')
[[ "$rows" == 10000 ]] || die "bench_kv has $rows rows, want 10000"

# The same table in PostgreSQL, owned by tetherd's user; the pgsql row connects as bench (password bench), as mysqli.
TETHER_PG_PORT=${BENCH_PG_PORT:-15432} start_postgres "$WORK/pg"
PSQL=$(_db_bin psql)
log "bench: loading bench_kv (10,000 rows) into PostgreSQL"
"$PSQL" -X -q -v ON_ERROR_STOP=1 -h "$PG_SOCKET_DIR" -p "$PG_PORT" -U postgres -d "$TETHER_DB_NAME" >/dev/null <<SQL
CREATE TABLE bench_kv (id int PRIMARY KEY, name varchar(64), score int, created timestamp);
INSERT INTO bench_kv
SELECT n, 'name-' || n, (n * 7919) % 1000, timestamp '2026-01-01 00:00:00' - n * interval '1 minute'
FROM generate_series(1, 10000) AS n;
VACUUM ANALYZE bench_kv;
ALTER TABLE bench_kv OWNER TO "$TETHER_DB_USER";
CREATE ROLE bench LOGIN PASSWORD 'bench';
GRANT SELECT ON bench_kv TO bench;
SQL
rows=$("$PSQL" -X -qAt -h "$PG_SOCKET_DIR" -p "$PG_PORT" -U postgres -d "$TETHER_DB_NAME" -c 'SELECT count(*) FROM bench_kv')
[[ "$rows" == 10000 ]] || die "bench_kv has $rows rows in PostgreSQL, want 10000"

# Cassandra with seed E1's keyspace; a role for tetherd and one for the connect-per-read client (passwords = names).
TETHER_CASSANDRA_PORT=${BENCH_CASSANDRA_PORT:-19142} TETHER_CASSANDRA_STORAGE_PORT=17100 TETHER_CASSANDRA_JMX_PORT=17190 \
	start_cassandra "$WORK/cassandra"
php bench/cli/load-cassandra.php "$CASSANDRA_HOST" "$CASSANDRA_USER" "$CASSANDRA_PASSWORD" "$TETHER_DB_USER" bench_cql ||
	die "cannot load seed E1's data into Cassandra"

rm -f "$WORK/tether.sock"
cat >"$WORK/tetherd.toml" <<EOF
# Written by bench/cli/run.sh for one benchmark run.
[server]
socket = "$WORK/tether.sock"
default_backend = "maria"

[log]
level = "warn"

[backends.maria]
type = "mysql"
dsn = "$MARIADB_DSN"
max_conns = 4
min_conns = 4

[backends.pg]
type = "postgres"
dsn = "$PG_DSN"
max_conns = 4
min_conns = 4

[backends.cass]
type = "cassandra"
dsn = "cassandra://$TETHER_DB_USER:$TETHER_DB_USER@$CASSANDRA_HOST/test"
max_conns = 4
EOF
log "bench: starting tetherd"
bin/tetherd -config "$WORK/tetherd.toml" </dev/null >"$WORK/tetherd.log" 2>&1 &
TETHERD_PID=$!
echo "$TETHERD_PID" >"$WORK/tetherd.pid"
wait_for_socket "$TETHERD_PID" "$WORK/tether.sock" "$WORK/tetherd.log" 15
log "bench: tetherd ready (pid $TETHERD_PID)"

# ---------------------------------------------------------------------------------------------------------------
# Machine facts, then the benchmark

bench_facts
pg_version=$(postgres_version)
cmd=$(bench_cmd bench/cli/run.sh)

log "bench: running bench/cli/bench.php$([[ "$QUICK" == 1 ]] && echo " (quick)")"
export TETHER_SOCKET=$WORK/tether.sock TETHERD_PID MARIADB_SOCKET MARIADB_PID
export BENCH_DB_NAME=$TETHER_DB_NAME BENCH_TETHER_DB_USER=$TETHER_DB_USER BENCH_MYSQLI_USER=bench BENCH_MYSQLI_PASSWORD=bench
CLK_TCK=$(getconf CLK_TCK)
export BENCH_ADMIN_USER=root BENCH_ADMIN_PASSWORD='' CLK_TCK
export PG_PID BENCH_PG_DSN="host=$PG_SOCKET_DIR port=$PG_PORT dbname=$TETHER_DB_NAME user=bench password=bench"
export BENCH_PG_ADMIN_DSN="host=$PG_SOCKET_DIR port=$PG_PORT dbname=$TETHER_DB_NAME user=postgres"
rm -rf "$WORK/tmp" && mkdir -p "$WORK/tmp"
export BENCH_TMPDIR=$WORK/tmp
bench_rc=0
bench_run_bg php -d memory_limit=512M bench/cli/bench.php "${QUICK_ARGS[@]}" --json "$WORK/results.json" \
	"${BENCH_ARGS[@]}" >"$WORK/results.md" || bench_rc=$?
((bench_rc == 0)) || die "bench/cli/bench.php failed (exit $bench_rc)"
pid_alive "$TETHERD_PID" || { tail_file "$WORK/tetherd.log"; die "tetherd died during the benchmark"; }

if [[ "${BENCH_NO_CLIENT:-}" == 1 ]]; then
	warn "BENCH_NO_CLIENT=1: skipping the Cassandra part (bench/cli/cassandra.php needs the PHP client)"
else
	log "bench: running bench/cli/cassandra.php$([[ "$QUICK" == 1 ]] && echo " (quick)")"
	bench_rc=0
	bench_run_bg env BENCH_CASSANDRA_HOST="$CASSANDRA_HOST" BENCH_CASSANDRA_ROLE=bench_cql BENCH_CASSANDRA_BACKEND=cass \
		BENCH_CASSANDRA_VERSION="$TETHER_CASSANDRA_VERSION" CASSANDRA_PID="$CASSANDRA_PID" \
		php bench/cli/cassandra.php "${QUICK_ARGS[@]}" --json "$WORK/cassandra.json" >>"$WORK/results.md" || bench_rc=$?
	((bench_rc == 0)) || die "bench/cli/cassandra.php failed (exit $bench_rc)"
	pid_alive "$TETHERD_PID" || { tail_file "$WORK/tetherd.log"; die "tetherd died during the Cassandra benchmark"; }
fi
load_after=$(cut -d' ' -f1 /proc/loadavg)
warn_logged "$WORK/tetherd.log"

{
	echo "### CLI round trips (bench/cli)"
	echo
	echo "Run on $bench_date with \`$cmd\`$([[ "$QUICK" == 1 ]] && echo ' (QUICK MODE: too few calls to quote)')."
	echo "Machine: $(nproc) vCPU ($cpu_model), $mem RAM, Linux $(uname -r); PHP $php_version (CLI), MariaDB $maria_version, PostgreSQL $pg_version, Cassandra $TETHER_CASSANDRA_VERSION, $go_version."
	bench_load_lines "$load_before" "$load_after"
	echo
	echo "The machine is a shared, noisy VM: absolute microseconds move from run to run, so quote the ratios between rows"
	echo "of one run, and tetherd's CPU per call under load, not the raw latencies."
	echo
	cat "$WORK/results.md"
} >"$WORK/section.md"

# Stop the servers before the doc is written, so nothing runs longer than the measurement.
stop_servers

cat "$WORK/section.md"

if [[ "$WRITE" == 1 ]]; then
	replace_doc_section "$DOC" cli-bench "$WORK/section.md"
	log "bench: wrote the results into docs/benchmarks.md"
fi
log "bench: done in $(since "$T0")s"
