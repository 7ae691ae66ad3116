#!/usr/bin/env bash
# bench/fanout/run.sh: benchmarks E5 (10 parallel calls to an upstream that sleeps 1 s: a Tether batch against
# curl_multi and pcntl_fork) and E4 (a join returning 1..500 rows to 5 concurrent clients: a Tether join against
# PDO), from the PHP CLI, in one run. bench/fanout/README.md says what is measured and how.
#
#   bash bench/fanout/run.sh [--quick] [--write] [-- bench.php options]
#
# It installs the Debian 12 packages it needs when any is missing (php8.2-cli with its built-in pcntl, php8.2-curl,
# php8.2-mysql, php8.2-msgpack, mariadb-server), builds tetherd and sleepd (bench/fanout/sleepd, the upstream that
# sleeps) into var/bench/fanout/bin, starts sleepd on a free loopback port, a throwaway MariaDB in
# var/bench/fanout/mariadb (scripts/lib/databases.sh; first port tried 13406, apart from the other benchmarks and
# the tests) with the join's tables, and tetherd with a pool of 5 connections to MariaDB and an http upstream to
# sleepd, and runs bench/fanout/bench.php. It prints the results as markdown on stdout (progress on stderr) and
# stops everything it started (by PID) on exit, whatever happens.
#
#   --quick / BENCH_QUICK=1   E5 with 100 ms sleeps, E4 with 50 joins per client: checks that every variant works and
#                             returns the same results (a failure exits non-zero); judges no timing; ~30 s
#   --write / BENCH_WRITE=1   also rewrite the section between <!-- fanout-bench:start --> and
#                             <!-- fanout-bench:end --> in docs/benchmarks.md (refused with --quick)
#   after --, options for bench.php: --only e4|e5, --e5-rounds N (5), --sleep-ms N (1000), --calls N (10),
#                             --e5-variants tether-batch,tether-async,curl-multi,fork, --join-iterations N (2000 per
#                             client and size), --join-rounds N (4), --join-procs N (5), --join-variants
#                             pdo-prepared,pdo-emulated,tether-join,tether-sql, --join-sizes 1,10,100,500,
#                             --join-hot N (the ranges start at one of N first ids: for the cached variants)
#
#   TETHERD_MAX_PROCS=N       tetherd's max_procs (default 1, tetherd's own default)
#
# Files: var/bench/fanout/ (git-ignored) holds the binaries, the MariaDB instance, tetherd's config, socket and log,
# sleepd's log, and results.json.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# A MariaDB that a caller (scripts/test.sh) started and exported is not ours: never adopt it, so never stop it.
unset MARIADB_PID MARIADB_DIR MARIADB_SOCKET MARIADB_PORT MARIADB_DSN
# shellcheck source=scripts/lib/databases.sh source-path=SCRIPTDIR/../..
source "$ROOT/scripts/lib/databases.sh"
# shellcheck source=bench/lib/bench.sh
source "$ROOT/bench/lib/bench.sh"

MAX_PROCS_GIVEN=${TETHERD_MAX_PROCS:-}
bench_parse_args "$ROOT/bench/fanout/run.sh" -- "$@"

WORK=$ROOT/var/bench/fanout
BIN=$WORK/bin
DOC=$ROOT/docs/benchmarks.md
T0=$(now)

# ---------------------------------------------------------------------------------------------------------------
# Packages

apt_install_missing "fanout" php8.2-cli php8.2-curl php8.2-mysql php8.2-msgpack mariadb-server
command -v go >/dev/null || die "go is not installed"
# pcntl is compiled into Debian's php-cli (there is no package to install); curl, PDO MySQL and msgpack are
# extensions of the packages above.
php -r 'exit(function_exists("pcntl_fork") && function_exists("curl_multi_init") && extension_loaded("pdo_mysql") && extension_loaded("msgpack") ? 0 : 1);' ||
	die "the PHP CLI lacks pcntl, curl, pdo_mysql or msgpack (php -m lists what it has)"

# ---------------------------------------------------------------------------------------------------------------
# Cleanup: whatever this script started, by PID

TETHERD_PID=
SLEEPD_PID=
BENCH_PHP_PID=
# stop_servers stops bench.php (and the workers it started), tetherd, sleepd and MariaDB if this script started
# them; safe to call twice.
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
	if [[ -n "$SLEEPD_PID" ]]; then
		log "sleepd: stopping pid $SLEEPD_PID"
		stop_pid "$SLEEPD_PID" sleepd 5
		SLEEPD_PID=
		rm -f "$WORK/sleepd.pid"
	fi
	stop_mariadb
}
bench_trap stop_servers

mkdir -p "$WORK" "$BIN"
# A tetherd or sleepd left by a killed run: stop it only if it is our binary (by its path in var/bench/fanout).
for name in tetherd sleepd; do
	if [[ -r "$WORK/$name.pid" ]]; then
		old=$(cat "$WORK/$name.pid")
		if pid_alive "$old" && [[ "$(readlink -f "/proc/$old/exe" 2>/dev/null)" == "$BIN/$name"* ]]; then
			log "$name: stopping pid $old left over from an earlier run"
			stop_pid "$old" "$name" 15
		fi
		rm -f "$WORK/$name.pid"
	fi
done
clean_db_dir "$WORK/mariadb"

# ---------------------------------------------------------------------------------------------------------------
# Build, sleepd, MariaDB, data, tetherd

# Our own binaries, not bin/tetherd: another benchmark may be rebuilding or running that one meanwhile.
log "fanout: building tetherd and sleepd into $BIN"
go build -o "$BIN/tetherd" ./cmd/tetherd
go build -o "$BIN/sleepd" ./bench/fanout/sleepd

rm -f "$WORK/sleepd.addr"
"$BIN/sleepd" -listen 127.0.0.1:0 -addr-file "$WORK/sleepd.addr" </dev/null >"$WORK/sleepd.log" 2>&1 &
SLEEPD_PID=$!
echo "$SLEEPD_PID" >"$WORK/sleepd.pid"
deadline=$((SECONDS + 10))
until [[ -s "$WORK/sleepd.addr" ]]; do
	pid_alive "$SLEEPD_PID" || { tail_file "$WORK/sleepd.log"; SLEEPD_PID=; die "sleepd exited during startup"; }
	((SECONDS < deadline)) || { tail_file "$WORK/sleepd.log"; die "sleepd: no address after 10s"; }
	sleep 0.05
done
SLEEPD_URL="http://$(cat "$WORK/sleepd.addr")"
log "fanout: sleepd ready on $SLEEPD_URL (pid $SLEEPD_PID)"

TETHER_MARIADB_PORT=${TETHER_MARIADB_PORT:-13406} start_mariadb "$WORK/mariadb"
MYSQL=$(_db_bin mariadb mysql)
log "fanout: loading users (10,000 rows) and groups (20 rows)"
# 20 groups whose names start with 20 different capitals, so that every order agrees: MariaDB's collation
# (utf8mb4_unicode_ci) and tetherd's sort by bytes. The codes are not in name order. Every 50th user has no group
# (NULL) and every 97th a code that no group has, so the left join has rows without a match.
"$MYSQL" --no-defaults --socket="$MARIADB_SOCKET" --user="$TETHER_DB_USER" --password="$TETHER_DB_PASSWORD" \
	--batch "$TETHER_DB_NAME" >/dev/null <<'SQL'
CREATE TABLE `groups` (
	code VARCHAR(8) PRIMARY KEY,
	name VARCHAR(64) NOT NULL,
	description VARCHAR(255) NOT NULL
) ENGINE=InnoDB;
INSERT INTO `groups` (code, name, description) VALUES
	('g01', 'Moore', 'the Moore group'), ('g02', 'Davis', 'the Davis group'), ('g03', 'Turner', 'the Turner group'),
	('g04', 'Irving', 'the Irving group'), ('g05', 'Baker', 'the Baker group'), ('g06', 'Parker', 'the Parker group'),
	('g07', 'Garcia', 'the Garcia group'), ('g08', 'Scott', 'the Scott group'), ('g09', 'Adams', 'the Adams group'),
	('g10', 'Lewis', 'the Lewis group'), ('g11', 'Quinn', 'the Quinn group'), ('g12', 'Evans', 'the Evans group'),
	('g13', 'Owens', 'the Owens group'), ('g14', 'Harris', 'the Harris group'), ('g15', 'Reed', 'the Reed group'),
	('g16', 'Clark', 'the Clark group'), ('g17', 'Nelson', 'the Nelson group'), ('g18', 'Fisher', 'the Fisher group'),
	('g19', 'King', 'the King group'), ('g20', 'Jones', 'the Jones group');
CREATE TABLE users (
	id INT PRIMARY KEY,
	name VARCHAR(64) NOT NULL,
	email VARCHAR(128) NOT NULL,
	group_code VARCHAR(8) NULL,
	score INT NOT NULL,
	created DATETIME NOT NULL,
	KEY (group_code)
) ENGINE=InnoDB;
SET SESSION max_recursive_iterations = 100000;
INSERT INTO users (id, name, email, group_code, score, created)
WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 10000)
SELECT n, CONCAT('user-', n), CONCAT('user', n, '@example.com'),
	CASE WHEN n % 50 = 0 THEN NULL WHEN n % 97 = 0 THEN 'zz' ELSE CONCAT('g', LPAD((n * 7919) % 20 + 1, 2, '0')) END,
	(n * 31) % 1000, TIMESTAMP '2026-01-01 00:00:00' - INTERVAL n MINUTE
FROM seq;
ANALYZE TABLE users, `groups`;
SQL
rows=$("$MYSQL" --no-defaults --socket="$MARIADB_SOCKET" --user="$TETHER_DB_USER" --password="$TETHER_DB_PASSWORD" \
	--batch --skip-column-names "$TETHER_DB_NAME" -e 'SELECT COUNT(*), COUNT(DISTINCT group_code) FROM users')
[[ "$rows" == $'10000\t21' ]] || die "users: COUNT(*), COUNT(DISTINCT group_code) = $rows, want 10000, 21"

TETHERD_MAX_PROCS=${TETHERD_MAX_PROCS:-1}
[[ "$TETHERD_MAX_PROCS" =~ ^[1-9][0-9]*$ ]] || die "TETHERD_MAX_PROCS=$TETHERD_MAX_PROCS: want a positive integer"
rm -f "$WORK/tether.sock"
cat >"$WORK/tetherd.toml" <<EOF
# Written by bench/fanout/run.sh for one benchmark run.
[server]
socket = "$WORK/tether.sock"
default_backend = "maria"
max_procs = $TETHERD_MAX_PROCS

[log]
level = "warn"

# As many connections as E4 has clients, which is what PDO uses.
[backends.maria]
type = "mysql"
dsn = "$MARIADB_DSN"
max_conns = 5
min_conns = 5

# E5's upstream: room for all 10 calls of a batch at once.
[backends.sleep]
type = "http"
dsn = "$SLEEPD_URL"
max_conns = 16
EOF
log "fanout: starting tetherd"
"$BIN/tetherd" -config "$WORK/tetherd.toml" </dev/null >"$WORK/tetherd.log" 2>&1 &
TETHERD_PID=$!
echo "$TETHERD_PID" >"$WORK/tetherd.pid"
wait_for_socket "$TETHERD_PID" "$WORK/tether.sock" "$WORK/tetherd.log" 15
log "fanout: tetherd ready (pid $TETHERD_PID)"

# ---------------------------------------------------------------------------------------------------------------
# Machine facts, then the benchmark

bench_facts
curl_version=$(php -r 'echo curl_version()["version"];')
cmd=$(bench_cmd bench/fanout/run.sh)
if [[ -n "$MAX_PROCS_GIVEN" ]]; then cmd="TETHERD_MAX_PROCS=$MAX_PROCS_GIVEN $cmd"; fi

log "fanout: running bench/fanout/bench.php$([[ "$QUICK" == 1 ]] && echo " (quick)")"
CLK_TCK=$(getconf CLK_TCK)
export TETHER_SOCKET=$WORK/tether.sock TETHERD_PID TETHER_HTTP_BACKEND=sleep SLEEPD_URL SLEEPD_PID
export MARIADB_SOCKET MARIADB_PID CLK_TCK TETHERD_MAX_PROCS
export BENCH_DB_NAME=$TETHER_DB_NAME BENCH_DB_USER=$TETHER_DB_USER BENCH_DB_PASSWORD=$TETHER_DB_PASSWORD
bench_rc=0
bench_run_bg php -d memory_limit=512M bench/fanout/bench.php "${QUICK_ARGS[@]}" --json "$WORK/results.json" \
	"${BENCH_ARGS[@]}" >"$WORK/results.md" || bench_rc=$?
((bench_rc == 0)) || die "bench/fanout/bench.php failed (exit $bench_rc)"
pid_alive "$TETHERD_PID" || { tail_file "$WORK/tetherd.log"; die "tetherd died during the benchmark"; }
load_after=$(cut -d' ' -f1 /proc/loadavg)
warn_logged "$WORK/tetherd.log"

{
	echo "### Fan-out and join (bench/fanout)"
	echo
	echo "Run on $bench_date with \`$cmd\`$([[ "$QUICK" == 1 ]] && echo ' (QUICK MODE: too few calls to quote)')."
	echo "Machine: $(nproc) vCPU ($cpu_model), $mem RAM, Linux $(uname -r); PHP $php_version (CLI; libcurl $curl_version), MariaDB $maria_version, $go_version."
	echo "tetherd: max_procs $TETHERD_MAX_PROCS$([[ "$TETHERD_MAX_PROCS" == 1 ]] && echo ' (its default)'), a pool of 5 MariaDB connections, an http upstream to sleepd with max_conns 16."
	bench_load_lines "$load_before" "$load_after"
	echo
	cat "$WORK/results.md"
} >"$WORK/section.md"

# Stop the servers before the doc is written, so nothing runs longer than the measurement.
stop_servers

cat "$WORK/section.md"

if [[ "$WRITE" == 1 ]]; then
	replace_doc_section "$DOC" fanout-bench "$WORK/section.md"
	log "fanout: wrote the results into docs/benchmarks.md"
fi
log "fanout: done in $(since "$T0")s"
