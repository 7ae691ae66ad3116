#!/usr/bin/env bash
# bench/replicas/run.sh: issue 21's benchmark rows. A page of 20 point reads through tetherd (nginx + php-fpm, the
# PHP client, as bench/web) on a MariaDB backend of one server (the primary alone) and on the same backend with
# `replicas = [the replica]` (a GTID pair from scripts/lib/replicas.sh, semi-synchronous), both backends in one
# tetherd so that their rows run in the same minute; first with the primary idle, then while writers keep it busy.
# Then the same on PostgreSQL (a streaming pair, pg_basebackup -R, asynchronous): backends pone and prep.
#
#   bash bench/replicas/run.sh [--quick] [--write] [-- bench.php options]
#
# Per row: req/s with the web host saturated (ab -c = php-fpm's workers), page p50 and p99 at a fixed rate below
# saturation (vegeta, as bench/web/twohost.php), and the reads each server served during the row, counted on the
# servers (MariaDB: Com_select deltas from SHOW GLOBAL STATUS, less the monitor's own probes measured in an idle
# interval; PostgreSQL: the page's statement's calls in pg_stat_statements, which the probes never run)
# with tetherd's own routed-read counters (/status.json pools[].topology.hosts[].reads) as a cross-check. The loaded
# phase runs 4 writers (bench/replicas/writer.php: INSERTs of 20 rows and a summary row recomputed from 2,000 rows,
# autocommit) straight on the primary for the whole phase and reports the writes the primary committed meanwhile.
#
# Placement on this 2-CPU machine (taskset; the output says it again): CPU 0 the primary and the writers; CPU 1 the
# replica, the web host (nginx, php-fpm, tetherd) and the load generators (ab, vegeta). So the replica competes
# with the web host for CPU 1: with the primary idle, moving the reads to the replica moves database work onto the
# web host's CPU, and the saturated req/s can only fall; what the machine can show is the loaded phase: reads the
# replica serves do not queue behind the primary's writers on CPU 0.
#
#   --quick / BENCH_QUICK=1   short runs (make test): every page checked, every row run end to end; no timing asserted
#   --write / BENCH_WRITE=1   also rewrite the section between <!-- replicas-bench:start --> and
#                             <!-- replicas-bench:end --> in docs/benchmarks.md (refused with --quick)
#   after --, options for bench.php: --dbs mariadb,postgres (both), --seconds S (5; each measured run), --rate R
#                             (page/s for the latency runs; default per phase: half the lower saturated req/s of its
#                             two rows), --rounds N (3; rows alternate)
#
# Environment (all optional): BENCH_REPLICAS_MARIADB_PORT (23780, the first port tried for the primary; the replica
# takes the next free one), BENCH_REPLICAS_PG_PORT (23785, the same for PostgreSQL), BENCH_REPLICAS_NGINX_PORT
# (23790), BENCH_REPLICAS_WRITERS (4), BENCH_REPLICAS_FPM_CHILDREN (16), BENCH_REPLICAS_POOL (tetherd's max_conns per host: php-fpm's workers, so that a saturated run measures the
# servers, not a wait for a connection; acquire_timeout is 30s either way).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib/replicas.sh
source "$ROOT/scripts/lib/replicas.sh"
# shellcheck source=bench/lib/bench.sh
source "$ROOT/bench/lib/bench.sh"

VEGETA_VERSION=v12.13.0
bench_parse_args "$ROOT/bench/replicas/run.sh" -- "$@"
bench_rerun_as_root bench/replicas/run.sh "replicas bench"

RP=$ROOT/var/bench/replicas
DOC=$ROOT/docs/benchmarks.md
T0=$(now)
BENCH_DATE=$(date -u)
LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)
PRIMARY_CPU=0
OTHER_CPU=1
WRITERS=${BENCH_REPLICAS_WRITERS:-4}
FPM_CHILDREN=${BENCH_REPLICAS_FPM_CHILDREN:-16}
POOL=${BENCH_REPLICAS_POOL:-$FPM_CHILDREN}
DB=$TETHER_DB_NAME

apt_install_missing "replicas bench" php8.2-cli php8.2-fpm php8.2-mysql php8.2-msgpack php8.2-curl nginx apache2-utils \
	php8.2-pgsql mariadb-server postgresql curl util-linux
command -v go >/dev/null || die "go is not installed"
(($(nproc) >= 2)) || die "the replicas bench pins the primary and the replica apart: it needs 2 CPUs; this machine has $(nproc)"

# ---------------------------------------------------------------------------------------------------------------
# Cleanup: whatever this script started, by PID

TETHERD_PID='' FPM_PID='' NGINX_PID='' BENCH_PHP_PID=''
stop_all() {
	[[ -n "$BENCH_PHP_PID" ]] && { stop_pid "$BENCH_PHP_PID" bench.php 10; BENCH_PHP_PID=; }
	[[ -n "$NGINX_PID" ]] && { log "nginx: stopping pid $NGINX_PID"; stop_pid "$NGINX_PID" nginx 20; }
	[[ -n "$FPM_PID" ]] && { log "php-fpm: stopping pid $FPM_PID"; stop_pid "$FPM_PID" php-fpm 20; }
	[[ -n "$TETHERD_PID" ]] && { log "tetherd: stopping pid $TETHERD_PID"; stop_pid "$TETHERD_PID" tetherd 15; }
	NGINX_PID='' FPM_PID='' TETHERD_PID=''
	stop_mariadb_pair
	stop_postgres_pair
}
bench_trap stop_all

if [[ -e "$RP" || -L "$RP" ]]; then
	stop_leftover "$RP" nginx/nginx.pid nginx
	stop_leftover "$RP" fpm/php-fpm.pid php-fpm8.2
	stop_leftover "$RP" tetherd/tetherd.pid tetherd
	stop_leftover "$RP" mariadb/replica/mysqld.pid mariadbd
	stop_leftover "$RP" mariadb/primary/mysqld.pid mariadbd
	clean_db_dir "$RP/mariadb"
	clean_db_dir "$RP/pg"
	remove_workdir "$RP" tether-replicas
fi
make_workdir "$RP" tether-replicas "replicas bench" www-data
mkdir -p "$RP"/{run,tetherd,nginx/tmp,fpm,results}

log "replicas bench: building bin/tetherd"
go build -o bin/tetherd ./cmd/tetherd || die "go build ./cmd/tetherd failed"
if [[ ! -x bin/vegeta ]]; then
	# vegeta, a well-kept constant-rate HTTP load generator (as bench/web/twohost.sh): latency at a fixed rate.
	log "replicas bench: installing vegeta $VEGETA_VERSION into bin/"
	GOBIN=$ROOT/bin go install "github.com/tsenart/vegeta/v12@$VEGETA_VERSION" || die "go install vegeta failed"
fi

# pin CPU PID... sets the CPU affinity of each PID, all its threads and its descendants (taskset -a -p).
pin() {
	local cpu=$1 pid child
	shift
	for pid in "$@"; do
		taskset -a -p -c "$cpu" "$pid" >/dev/null || die "taskset -a -p -c $cpu $pid failed"
		for child in $(pgrep -P "$pid" || true); do pin "$cpu" "$child"; done
	done
}

# ---------------------------------------------------------------------------------------------------------------
# The pair: primary on CPU 0, replica on CPU 1

TETHER_REPLICA_MARIADB_PORT=${BENCH_REPLICAS_MARIADB_PORT:-23780} start_mariadb_pair "$RP/mariadb"
pin "$PRIMARY_CPU" "$MARIADB_PRIMARY_PID"
pin "$OTHER_CPU" "$MARIADB_REPLICA_PID"
log "replicas bench: primary (pid $MARIADB_PRIMARY_PID) on CPU $PRIMARY_CPU, replica (pid $MARIADB_REPLICA_PID) on CPU $OTHER_CPU"
log "replicas bench: loading bench_kv (10,000 rows) and bench_w (the writers' table) on the primary"
_rep_mariadb_sql "$MARIADB_PRIMARY_SOCKET" <<SQL || die "loading the tables failed"
USE \`$DB\`;
CREATE TABLE bench_kv (id INT PRIMARY KEY, name VARCHAR(64), score INT, created DATETIME) ENGINE=InnoDB;
SET SESSION max_recursive_iterations = 100000;
INSERT INTO bench_kv (id, name, score, created)
WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 10000)
SELECT n, CONCAT('name-', n), (n * 7919) % 1000, TIMESTAMP '2026-01-01 00:00:00' - INTERVAL n MINUTE FROM seq;
ANALYZE TABLE bench_kv;
CREATE TABLE bench_w (id BIGINT AUTO_INCREMENT PRIMARY KEY, writer INT NOT NULL, v INT NOT NULL,
  pad VARCHAR(200) NOT NULL, KEY (writer, v)) ENGINE=InnoDB;
CREATE TABLE bench_w_sum (writer INT PRIMARY KEY, n INT NOT NULL, bytes BIGINT NOT NULL) ENGINE=InnoDB;
SQL
mariadb_pair_wait 30

# pg_stat_statements counts each statement's executions as they end, on the primary and on the standby (which
# copies this postgresql.conf): the reads each server served. pg_stat_user_tables would flush a backend's counts
# only once it has been idle for 10 s.
TETHER_PG_CONF="shared_preload_libraries = 'pg_stat_statements'
${TETHER_PG_CONF:-}" TETHER_REPLICA_PG_PORT=${BENCH_REPLICAS_PG_PORT:-23785} start_postgres_pair "$RP/pg"
# The postmaster forks a backend per connection: pinning it (and what runs already) pins every later backend.
pin "$PRIMARY_CPU" "$PG_PRIMARY_PID"
pin "$OTHER_CPU" "$PG_REPLICA_PID"
log "replicas bench: PostgreSQL primary (pid $PG_PRIMARY_PID) on CPU $PRIMARY_CPU, replica (pid $PG_REPLICA_PID) on CPU $OTHER_CPU"
_rep_psql "$PG_PRIMARY_SOCKET_DIR" "$PG_PRIMARY_PORT" "$DB" >/dev/null <<SQL || die "loading the PostgreSQL tables failed"
CREATE EXTENSION pg_stat_statements;
CREATE TABLE bench_kv (id int PRIMARY KEY, name varchar(64), score int, created timestamp);
INSERT INTO bench_kv
SELECT n, 'name-' || n, (n * 7919) % 1000, timestamp '2026-01-01 00:00:00' - n * interval '1 minute'
FROM generate_series(1, 10000) AS n;
ANALYZE bench_kv;
ALTER TABLE bench_kv OWNER TO "$TETHER_DB_USER";
CREATE TABLE bench_w (id bigserial PRIMARY KEY, writer int NOT NULL, v int NOT NULL, pad varchar(200) NOT NULL);
CREATE INDEX ON bench_w (writer, v);
CREATE TABLE bench_w_sum (writer int PRIMARY KEY, n int NOT NULL, bytes bigint NOT NULL);
SQL
postgres_pair_wait 30

# ---------------------------------------------------------------------------------------------------------------
# The web host on CPU 1: tetherd (two backends over the same primary), php-fpm, nginx

WWW=$RP/www
mkdir -p "$WWW/htdocs" "$WWW/clients/php"
cp bench/web/pages/lib.php bench/replicas/pages/*.php "$WWW/htdocs/"
cp -r clients/php/autoload.php clients/php/src "$WWW/clients/php/"
cp bench/web/conf/content-length.php "$WWW/content-length.php"
TETHER_SOCKET=$RP/run/tether.sock
check_socket_path "$TETHER_SOCKET"
cat >"$WWW/htdocs/config.php" <<EOF
<?php
// Written by bench/replicas/run.sh.
return [
    'db_name' => '$DB',
    'mysql_socket' => '$MARIADB_PRIMARY_SOCKET',
    'tether_socket' => '$TETHER_SOCKET',
    'tether_autoload' => '$WWW/clients/php/autoload.php',
];
EOF
chmod -R a+rX "$WWW"

cat >"$RP/tetherd/tetherd.toml" <<EOF
# Written by bench/replicas/run.sh: the same primary as a backend of one server (one; PostgreSQL pone) and with its
# replica (rep; PostgreSQL prep).
[server]
socket = "$TETHER_SOCKET"
socket_mode = "0660"
socket_group = "www-data"
default_backend = "one"

[log]
level = "warn"

[backends.one]
type = "mysql"
dsn = "$TETHER_TEST_MYSQL_PRIMARY_DSN"
max_conns = $POOL
acquire_timeout = "30s"

[backends.rep]
type = "mysql"
dsn = "$TETHER_TEST_MYSQL_PRIMARY_DSN"
replicas = ["$TETHER_TEST_MYSQL_REPLICA_DSN"]
max_conns = $POOL
acquire_timeout = "30s"
max_replica_lag = "10s"
monitor_interval = "1s"

[backends.pone]
type = "postgres"
dsn = "$TETHER_TEST_POSTGRES_PRIMARY_DSN"
max_conns = $POOL
acquire_timeout = "30s"

[backends.prep]
type = "postgres"
dsn = "$TETHER_TEST_POSTGRES_PRIMARY_DSN"
replicas = ["$TETHER_TEST_POSTGRES_REPLICA_DSN"]
max_conns = $POOL
acquire_timeout = "30s"
max_replica_lag = "10s"
monitor_interval = "1s"
EOF
log "tetherd: on CPU $OTHER_CPU, backends one/pone (the primary) and rep/prep (primary + replica)"
taskset -c "$OTHER_CPU" bin/tetherd -config "$RP/tetherd/tetherd.toml" </dev/null >"$RP/tetherd/tetherd.log" 2>&1 &
TETHERD_PID=$!
echo "$TETHERD_PID" >"$RP/tetherd/tetherd.pid"
await tetherd "$TETHERD_PID" "$RP/tetherd/tetherd.log" 30 test -S "$TETHER_SOCKET"
ADMIN_SOCKET=$RP/run/tether-admin.sock
await "tetherd admin" "$TETHERD_PID" "$RP/tetherd/tetherd.log" 30 test -S "$ADMIN_SOCKET"

NGINX_PORT=$(free_port "${BENCH_REPLICAS_NGINX_PORT:-23790}")
fpm_sock=$RP/run/php-fpm.sock
render bench/web/conf/php-fpm.conf "$RP/fpm/php-fpm.conf" DIR="$RP/fpm" FPM_SOCKET="$fpm_sock" CHILDREN="$FPM_CHILDREN" \
	PREPEND="$WWW/content-length.php" FPM_FRESH_SOCKET="$RP/run/php-fpm-fresh.sock" FRESH_CHILDREN=1
log "php-fpm: on CPU $OTHER_CPU, pm = static, $FPM_CHILDREN workers"
taskset -c "$OTHER_CPU" php-fpm8.2 --nodaemonize --fpm-config "$RP/fpm/php-fpm.conf" </dev/null >"$RP/fpm/stdout.log" 2>&1 &
FPM_PID=$!
await php-fpm "$FPM_PID" "$RP/fpm/error.log" 30 test -S "$fpm_sock"
render bench/apps/conf/nginx.conf "$RP/nginx/nginx.conf" DIR="$RP/nginx" PORT="$NGINX_PORT" HTDOCS="$WWW/htdocs" \
	FPM_SOCKET="$fpm_sock"
log "nginx: on CPU $OTHER_CPU, 127.0.0.1:$NGINX_PORT"
taskset -c "$OTHER_CPU" nginx -p "$RP/nginx" -c "$RP/nginx/nginx.conf" -e "$RP/nginx/error.log" </dev/null >"$RP/nginx/stdout.log" 2>&1 &
NGINX_PID=$!
await nginx "$NGINX_PID" "$RP/nginx/error.log" 30 curl -fsS -o /dev/null "http://127.0.0.1:$NGINX_PORT/reads.php?b=one&n=1&id=1"

# ---------------------------------------------------------------------------------------------------------------
# The driver (bench.php) on CPU 1 with ab and vegeta; the writers it starts go to CPU 0

log "replicas bench: running bench/replicas/bench.php$([[ "$QUICK" == 1 ]] && echo " (quick)")"
rc=0
REP_PRIMARY_SOCKET=$MARIADB_PRIMARY_SOCKET REP_REPLICA_SOCKET=$MARIADB_REPLICA_SOCKET REP_DB=$DB \
	REP_PG_PRIMARY_DSN="$TETHER_TEST_POSTGRES_PRIMARY_ADMIN_DSN" REP_PG_REPLICA_DSN="$TETHER_TEST_POSTGRES_REPLICA_ADMIN_DSN" \
	REP_PG_REPLICA_SOCKET_DIR="$PG_REPLICA_SOCKET_DIR" REP_ADMIN_SOCKET=$ADMIN_SOCKET REP_URL="http://127.0.0.1:$NGINX_PORT" \
	REP_WORKERS=$FPM_CHILDREN REP_WRITERS=$WRITERS REP_PRIMARY_CPU=$PRIMARY_CPU \
	bench_run_bg taskset -c "$OTHER_CPU" php -d memory_limit=512M bench/replicas/bench.php --out "$RP/results/run.json" \
	"${QUICK_ARGS[@]}" "${BENCH_ARGS[@]}" || rc=$?
if ((rc != 0)); then
	tail_file "$RP/fpm/error.log" 20
	tail_file "$RP/tetherd/tetherd.log" 20
	die "bench/replicas/bench.php failed (exit $rc); logs in $RP"
fi
pid_alive "$TETHERD_PID" || { tail_file "$RP/tetherd/tetherd.log"; die "tetherd died during the run"; }

export BENCH_REPLICAS_CMD BENCH_REPLICAS_DATE=$BENCH_DATE BENCH_REPLICAS_LOAD_BEFORE=$LOAD_BEFORE
BENCH_REPLICAS_CMD=$(bench_cmd bench/replicas/run.sh)
BENCH_REPLICAS_LOAD_AFTER=$(cut -d' ' -f1 /proc/loadavg)
BENCH_REPLICAS_MARIADB_VERSION=$(mariadb_version)
BENCH_REPLICAS_PG_VERSION=$(postgres_version)
export BENCH_REPLICAS_LOAD_AFTER BENCH_REPLICAS_MARIADB_VERSION BENCH_REPLICAS_PG_VERSION
export BENCH_REPLICAS_SETUP="CPU $PRIMARY_CPU: the primaries (mariadbd; postgres and its backends) and the $WRITERS writers (loaded phases); CPU $OTHER_CPU: the replicas, tetherd, nginx, php-fpm (pm = static, $FPM_CHILDREN workers), ab, vegeta and the driver; pinned with taskset"
export BENCH_REPLICAS_POOL=$POOL
stop_all
warn_logged "$RP/tetherd/tetherd.log"
php bench/replicas/bench.php --report "$RP/results/run.json" >"$RP/results/section.md"
cat "$RP/results/section.md"
if [[ "$WRITE" == 1 ]]; then
	replace_doc_section "$DOC" replicas-bench "$RP/results/section.md"
	log "replicas bench: wrote the results into docs/benchmarks.md"
fi
log "replicas bench: done in $(since "$T0")s"
