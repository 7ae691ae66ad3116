#!/usr/bin/env bash
# bench/web/run.sh: the web-server benchmark. PHP pages under nginx + php-fpm and apache2 prefork + mod_php, loaded
# with ab: an empty page, Tether, and the remedies PHP sites use today (mysqli, PDO, pg_connect, pgbouncer, a Go
# service), on MariaDB, PostgreSQL, Cassandra and Bigtable (its emulator), in one run; then the read latency inside
# the page, in long-lived and in freshly started PHP workers.
#
#   bash bench/web/run.sh [--quick] [--write] [--servers apache,nginx] [-- bench.php options]
#   bash bench/web/run.sh --two-host [twohost.sh options]   the two-host model instead (bench/web/twohost.sh)
#
# It installs the Debian 12 packages it needs when any is missing, builds bin/tetherd and bin/goservice, starts
# throwaway instances under var/bench/web (git-ignored) on loopback: MariaDB and PostgreSQL (scripts/lib/databases.sh)
# with bench_kv (10,000 rows) and one user per row, Cassandra 5.0 (scripts/lib/cassandra.sh) with seed E1's keyspace
# (bench/cli/load-cassandra.php), the Go Bigtable emulator (built from cloud.google.com/go/bigtable/cmd/emulator),
# pgbouncer, tetherd (socket group www-data), which then loads seed E2's 10,000 Bigtable rows
# (bench/web/load-bigtable.php), the Go service, and for each web server in turn that server (PHP as www-data) with
# its fresh-worker copy (php-fpm pool / apache2 whose workers serve one request each); bench/web/bench.php checks
# every page's body, then loads every row of bench/web/rows.php with ab, in interleaved rounds, then probes the read
# latency inside the pages. It prints the results as markdown on stdout (progress on stderr), draws the plots, and
# stops everything it started (by PID) on exit, whatever happens.
#
#   --quick / BENCH_QUICK=1   500 requests per row and load setting, one round: proves that the pages, servers and
#                             the command work (make test); numbers not worth quoting. Fails if any page answers
#                             wrong or any request fails.
#   --write / BENCH_WRITE=1   also rewrite the section between <!-- web-bench:start --> and <!-- web-bench:end -->
#                             in docs/benchmarks.md and the plots docs/img/web-bench-*.png (refused with --quick)
#   --servers LIST            apache, nginx or both (default apache,nginx)
#   --serve                   start everything (both web servers at once), print where, and wait for Ctrl-C: for
#                             trying pages by hand and profiling; measures nothing
#   after --, options for bench.php: --rounds N (3), --seconds S (1.5: each measured ab run is sized to last about
#                             S seconds from a calibration run), --only KEY,KEY (rows), --settings c10,c10k,c100,c100k
#
# Only the read-latency probes of seeds E1 and E2 (the hop's own cost, the fresh worker), about 2 minutes in all:
#   bash bench/web/run.sh --servers nginx -- --only tether-ping,tether-cass-row,go-cass-row,tether-cass-super,go-cass-super,tether-bt-point,go-bt-point --rounds 1 --settings c10k --seconds 1
#
# Environment (all optional): BENCH_WEB_NGINX_PORT (18080), BENCH_WEB_APACHE_PORT (18081), BENCH_WEB_APACHE_FRESH_PORT
# (18082), BENCH_WEB_GO_PORT (18089), BENCH_WEB_MARIADB_PORT (21306), BENCH_WEB_PG_PORT (21432),
# BENCH_WEB_PGBOUNCER_PORT (21532), BENCH_WEB_CASSANDRA_PORT (19242; storage 17200, JMX 17299),
# BENCH_WEB_BIGTABLE_PORT (18086): first port tried, the next free one is taken if busy; BENCH_WEB_POOL (4):
# connections per pool of tetherd, pgbouncer and the Go service (on Cassandra: per node); BENCH_WEB_FPM_CHILDREN
# (4 x nproc); BENCH_WEB_APACHE_WORKERS (150, Debian's MaxRequestWorkers); BENCH_WEB_FRESH_WORKERS (apache2: 32 spare
# one-connection workers; php-fpm: 4 one-request workers).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib/databases.sh source-path=SCRIPTDIR/../..
source "$ROOT/scripts/lib/databases.sh"
# shellcheck source=scripts/lib/cassandra.sh source-path=SCRIPTDIR/../..
source "$ROOT/scripts/lib/cassandra.sh"

# shellcheck source=bench/lib/bench.sh
source "$ROOT/bench/lib/bench.sh"

# --two-host: the two-host model (issue 20), a command of its own; see bench/web/twohost.sh.
if [[ "${1:-}" == --two-host ]]; then
	shift
	exec bash "$ROOT/bench/web/twohost.sh" "$@"
fi
bench_parse_args "$ROOT/bench/web/run.sh" --web -- "$@"
bench_rerun_as_root bench/web/run.sh "web bench"

WEB=$ROOT/var/bench/web
DOC=$ROOT/docs/benchmarks.md
IMG=$ROOT/docs/img
PY=/usr/bin/python3 # Debian's, which has python3-matplotlib; `python3` on PATH may be another one
T0=$(now)
BENCH_DATE=$(date -u)
LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)

# ---------------------------------------------------------------------------------------------------------------
# Packages

PACKAGES=(php8.2-cli php8.2-fpm php8.2-mysql php8.2-pgsql php8.2-curl php8.2-msgpack nginx apache2
	libapache2-mod-php8.2 apache2-utils mariadb-server postgresql pgbouncer python3-matplotlib curl
	openjdk-17-jre-headless)
apt_install_missing "web bench" "${PACKAGES[@]}"
command -v go >/dev/null || die "go is not installed"

# ---------------------------------------------------------------------------------------------------------------
# Cleanup: whatever this script started, by PID

TETHERD_PID='' GOSERVICE_PID='' PGBOUNCER_PID='' APACHE_PID='' APACHE_FRESH_PID='' FPM_PID='' NGINX_PID=''
BTEMULATOR_PID='' BENCH_PHP_PID='' SLEEP_PID=''

# stop_web stops the web server of the current phase, if any, with its fresh-worker copy; safe to call twice.
stop_web() {
	[[ -n "$APACHE_PID" ]] && { log "apache2: stopping pid $APACHE_PID"; stop_pid "$APACHE_PID" apache2 20; }
	[[ -n "$APACHE_FRESH_PID" ]] && { log "apache2 (fresh workers): stopping pid $APACHE_FRESH_PID"; stop_pid "$APACHE_FRESH_PID" apache2 20; }
	[[ -n "$NGINX_PID" ]] && { log "nginx: stopping pid $NGINX_PID"; stop_pid "$NGINX_PID" nginx 20; }
	[[ -n "$FPM_PID" ]] && { log "php-fpm: stopping pid $FPM_PID"; stop_pid "$FPM_PID" php-fpm 20; }
	APACHE_PID='' APACHE_FRESH_PID='' NGINX_PID='' FPM_PID=''
}

# stop_all stops everything this script started, the web servers first (they hold the connections); safe to call
# twice.
stop_all() {
	[[ -n "$SLEEP_PID" ]] && { kill "$SLEEP_PID" 2>/dev/null || true; SLEEP_PID=; }
	[[ -n "$BENCH_PHP_PID" ]] && { stop_pid "$BENCH_PHP_PID" bench.php 5; BENCH_PHP_PID=; }
	stop_web
	[[ -n "$GOSERVICE_PID" ]] && { log "goservice: stopping pid $GOSERVICE_PID"; stop_pid "$GOSERVICE_PID" goservice 10; }
	[[ -n "$PGBOUNCER_PID" ]] && { log "pgbouncer: stopping pid $PGBOUNCER_PID"; stop_pid "$PGBOUNCER_PID" pgbouncer 10 INT; }
	[[ -n "$TETHERD_PID" ]] && { log "tetherd: stopping pid $TETHERD_PID"; stop_pid "$TETHERD_PID" tetherd 15; }
	[[ -n "$BTEMULATOR_PID" ]] && { log "bigtable emulator: stopping pid $BTEMULATOR_PID"; stop_pid "$BTEMULATOR_PID" btemulator 10; }
	GOSERVICE_PID='' PGBOUNCER_PID='' TETHERD_PID='' BTEMULATOR_PID=''
	stop_cassandra
	stop_postgres
	stop_mariadb
}
bench_trap stop_all

if [[ -e "$WEB" || -L "$WEB" ]]; then
	stop_leftover "$WEB" apache/apache2.pid apache2
	stop_leftover "$WEB" apache-fresh/apache2.pid apache2
	stop_leftover "$WEB" nginx/nginx.pid nginx
	stop_leftover "$WEB" fpm/php-fpm.pid php-fpm8.2
	stop_leftover "$WEB" goservice/goservice.pid goservice
	stop_leftover "$WEB" pgbouncer/pgbouncer.pid pgbouncer
	stop_leftover "$WEB" tetherd/tetherd.pid tetherd
	stop_leftover "$WEB" bigtable/btemulator.pid btemulator
	clean_cassandra_dir "$WEB/cassandra"
	clean_db_dir "$WEB/mariadb"
	clean_db_dir "$WEB/pg"
	remove_workdir "$WEB" tether-web
fi

# PHP runs as www-data and pgbouncer as postgres: both must reach the sockets and files under WEB. When they cannot
# (a checkout under /root, say), WEB lives in /tmp, with var/bench/web a symlink to it.
make_workdir "$WEB" tether-web "web bench" www-data postgres
mkdir -p "$WEB"/{run,tetherd,goservice,pgbouncer,bigtable,nginx/tmp,fpm,apache,apache-fresh,www/htdocs,results}

# ---------------------------------------------------------------------------------------------------------------
# Databases, data, users

NPROC=$(nproc)
POOL=${BENCH_WEB_POOL:-4}
FPM_CHILDREN=${BENCH_WEB_FPM_CHILDREN:-$((4 * NPROC))}
APACHE_WORKERS=${BENCH_WEB_APACHE_WORKERS:-150}
APACHE_FRESH_WORKERS=${BENCH_WEB_FRESH_WORKERS:-32}
FPM_FRESH_CHILDREN=${BENCH_WEB_FRESH_WORKERS:-4}
DB=$TETHER_DB_NAME

log "web bench: building bin/tetherd, bin/goservice and the Bigtable emulator"
go build -o bin/tetherd ./cmd/tetherd
go build -o bin/goservice ./bench/goservice
# The emulator that gcloud runs, from the module tetherd's backend already depends on.
go build -o "$WEB/bigtable/btemulator" cloud.google.com/go/bigtable/cmd/emulator

# Every PHP worker may hold a persistent link of each kind at once (apache2's 150: 600 on MariaDB, 300 on PostgreSQL),
# and connect-per-request rows add up to -c more.
# Its own tmpdir: /tmp is shared with whatever else runs on the machine.
mkdir -p "$WEB/mariadb-tmp"
TETHER_MARIADB_PORT=${BENCH_WEB_MARIADB_PORT:-21306} \
	TETHER_MARIADB_OPTS="--max-connections=2000 --tmpdir=$WEB/mariadb-tmp ${TETHER_MARIADB_OPTS:-}" start_mariadb "$WEB/mariadb"
TETHER_PG_PORT=${BENCH_WEB_PG_PORT:-21432} TETHER_PG_CONF="max_connections = 600
${TETHER_PG_CONF:-}" start_postgres "$WEB/pg"

# One database user per way in, so that each row's backend connections can be counted apart (passwords = names);
# the *_n ones are those of the pages of N reads (rows.php), apart from the point-read pages'.
MYSQL_USERS=(mysqli_connect:bench_mysqli mysqli_pconnect:bench_mysqli_p pdo_persistent:bench_pdo_p goservice:bench_go
	mysqli_connect_n:bench_mysqli_n mysqli_pconnect_n:bench_mysqli_pn pdo_persistent_n:bench_pdo_pn)
PG_USERS=(pg_connect:bench_pg pg_pconnect:bench_pg_p pgbouncer_connect:bench_pgb pgbouncer_pconnect:bench_pgb_p
	pg_connect_n:bench_pg_n pg_pconnect_n:bench_pg_pn pgbouncer_connect_n:bench_pgb_n pgbouncer_pconnect_n:bench_pgb_pn)

MYSQL=$(_db_bin mariadb mysql)
log "web bench: loading bench_kv (10,000 rows) into MariaDB and PostgreSQL"
{
	cat <<'SQL'
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
	for u in "${MYSQL_USERS[@]}"; do
		echo "CREATE USER '${u#*:}'@'localhost' IDENTIFIED BY '${u#*:}';"
		echo "GRANT SELECT ON \`$DB\`.* TO '${u#*:}'@'localhost';"
	done
} | "$MYSQL" --no-defaults --socket="$MARIADB_SOCKET" --user=root --batch "$DB" >/dev/null
PSQL=$(_db_bin psql)
{
	cat <<SQL
CREATE TABLE bench_kv (id int PRIMARY KEY, name varchar(64), score int, created timestamp);
INSERT INTO bench_kv
SELECT n, 'name-' || n, (n * 7919) % 1000, timestamp '2026-01-01 00:00:00' - n * interval '1 minute'
FROM generate_series(1, 10000) AS n;
ANALYZE bench_kv;
ALTER TABLE bench_kv OWNER TO "$TETHER_DB_USER";
SQL
	for u in "${PG_USERS[@]}"; do
		echo "CREATE ROLE ${u#*:} LOGIN PASSWORD '${u#*:}';"
		echo "GRANT SELECT ON bench_kv TO ${u#*:};"
	done
} | "$PSQL" -X -q -v ON_ERROR_STOP=1 -h "$PG_SOCKET_DIR" -p "$PG_PORT" -U postgres -d "$DB" >/dev/null
for check in \
	"$("$MYSQL" --no-defaults --socket="$MARIADB_SOCKET" --user=root --batch --skip-column-names "$DB" -e 'SELECT COUNT(*) FROM bench_kv')" \
	"$("$PSQL" -X -qAt -h "$PG_SOCKET_DIR" -p "$PG_PORT" -U postgres -d "$DB" -c 'SELECT count(*) FROM bench_kv')"; do
	[[ "$check" == 10000 ]] || die "bench_kv has $check rows, want 10000"
done

# Cassandra: seed E1's keyspace, one role for tetherd and one for the Go service (passwords = names).
TETHER_CASSANDRA_PORT=${BENCH_WEB_CASSANDRA_PORT:-19242} TETHER_CASSANDRA_STORAGE_PORT=17200 TETHER_CASSANDRA_JMX_PORT=17299 \
	start_cassandra "$WEB/cassandra"
php bench/cli/load-cassandra.php "$CASSANDRA_HOST" "$CASSANDRA_USER" "$CASSANDRA_PASSWORD" "$TETHER_DB_USER" bench_go ||
	die "cannot load seed E1's data into Cassandra"

# The Bigtable emulator; tetherd creates seed E2's table in it (table= in its DSN), then the rows are loaded.
BT_PORT=$(free_port "${BENCH_WEB_BIGTABLE_PORT:-18086}")
BT_TABLE=bench_bt
log "bigtable emulator: starting on 127.0.0.1:$BT_PORT"
"$WEB/bigtable/btemulator" -host 127.0.0.1 -port "$BT_PORT" </dev/null >"$WEB/bigtable/btemulator.log" 2>&1 &
BTEMULATOR_PID=$!
echo "$BTEMULATOR_PID" >"$WEB/bigtable/btemulator.pid"
await "bigtable emulator" "$BTEMULATOR_PID" "$WEB/bigtable/btemulator.log" 15 grep -q 'running on' "$WEB/bigtable/btemulator.log"

# ---------------------------------------------------------------------------------------------------------------
# pgbouncer, tetherd, the Go service

PGBOUNCER_PORT=$(free_port "${BENCH_WEB_PGBOUNCER_PORT:-21532}")
chown postgres: "$WEB/pgbouncer"
render bench/web/conf/pgbouncer.ini "$WEB/pgbouncer/pgbouncer.ini" DIR="$WEB/pgbouncer" PORT="$PGBOUNCER_PORT" \
	DB="$DB" PG_SOCKET_DIR="$PG_SOCKET_DIR" PG_PORT="$PG_PORT" POOL="$POOL"
for u in "${PG_USERS[@]}"; do
	if [[ "$u" == pgbouncer_* ]]; then printf '"%s" "%s"\n' "${u#*:}" "${u#*:}"; fi
done >"$WEB/pgbouncer/userlist.txt"
chown postgres: "$WEB/pgbouncer"/*
chmod 600 "$WEB/pgbouncer/userlist.txt"
log "pgbouncer: starting on $WEB/pgbouncer and 127.0.0.1:$PGBOUNCER_PORT (pool $POOL per user, transaction mode)"
# setpriv execs (runuser would fork), so $! is pgbouncer itself; it refuses to run as root.
setpriv --reuid=postgres --regid=postgres --init-groups pgbouncer "$WEB/pgbouncer/pgbouncer.ini" \
	</dev/null >"$WEB/pgbouncer/stdout.log" 2>&1 &
PGBOUNCER_PID=$!
await pgbouncer "$PGBOUNCER_PID" "$WEB/pgbouncer/pgbouncer.log" 15 test -S "$WEB/pgbouncer/.s.PGSQL.$PGBOUNCER_PORT"
[[ "$(PGPASSWORD=bench_pgb "$PSQL" -X -qAt -h "$WEB/pgbouncer" -p "$PGBOUNCER_PORT" -U bench_pgb -d "$DB" \
	-c 'SELECT count(*) FROM bench_kv')" == 10000 ]] || die "pgbouncer: cannot read bench_kv through it"

TETHER_SOCKET=$WEB/run/tether.sock
check_socket_path "$TETHER_SOCKET"
cat >"$WEB/tetherd/tetherd.toml" <<EOF
# Written by bench/web/run.sh for one benchmark run.
[server]
socket = "$TETHER_SOCKET"
socket_mode = "0660"
socket_group = "www-data"
default_backend = "maria"

[log]
level = "warn"

# Table versions for the rows with the PHP client's local cache (tether-localcache-*).
[cache]
local = true

[backends.maria]
type = "mysql"
dsn = "$MARIADB_DSN"
max_conns = $POOL
min_conns = $POOL

[backends.pg]
type = "postgres"
dsn = "$PG_DSN"
max_conns = $POOL
min_conns = $POOL

[backends.cass]
type = "cassandra"
dsn = "cassandra://$TETHER_DB_USER:$TETHER_DB_USER@$CASSANDRA_HOST/test"
max_conns = $POOL

[backends.bt]
type = "bigtable"
dsn = "bigtable://bench/bench?emulator=127.0.0.1:$BT_PORT&table=$BT_TABLE:f"
EOF
log "tetherd: starting (pool $POOL per backend)"
bin/tetherd -config "$WEB/tetherd/tetherd.toml" </dev/null >"$WEB/tetherd/tetherd.log" 2>&1 &
TETHERD_PID=$!
echo "$TETHERD_PID" >"$WEB/tetherd/tetherd.pid"
await tetherd "$TETHERD_PID" "$WEB/tetherd/tetherd.log" 15 test -S "$TETHER_SOCKET"
php bench/web/load-bigtable.php "$TETHER_SOCKET" bt "$BT_TABLE" || die "cannot load seed E2's rows into Bigtable"

GO_PORT=$(free_port "${BENCH_WEB_GO_PORT:-18089}")
log "goservice: starting on 127.0.0.1:$GO_PORT (pool $POOL)"
BIGTABLE_EMULATOR_HOST=127.0.0.1:$BT_PORT bin/goservice -listen "127.0.0.1:$GO_PORT" -pool "$POOL" \
	-dsn "bench_go:bench_go@unix($MARIADB_SOCKET)/$DB" \
	-cassandra "$CASSANDRA_HOST" -cassandra-user bench_go -cassandra-password bench_go -cassandra-keyspace test \
	-bigtable "bench/bench/$BT_TABLE" \
	</dev/null >"$WEB/goservice/goservice.log" 2>&1 &
GOSERVICE_PID=$!
echo "$GOSERVICE_PID" >"$WEB/goservice/goservice.pid"
await goservice "$GOSERVICE_PID" "$WEB/goservice/goservice.log" 15 grep -qx ready "$WEB/goservice/goservice.log"

# ---------------------------------------------------------------------------------------------------------------
# The pages, as the web servers serve them

HTDOCS=$WEB/www/htdocs
cp bench/web/pages/*.php "$HTDOCS/"
mkdir -p "$WEB/www/tether-php"
cp -r clients/php/autoload.php clients/php/src "$WEB/www/tether-php/"
php_users() {
	local u
	for u in "$@"; do printf "        '%s' => '%s',\n" "${u%%:*}" "${u#*:}"; done
}
cat >"$HTDOCS/config.php" <<EOF
<?php
// Written by bench/web/run.sh for one run: where the pages find everything (read by pages/lib.php and bench.php).
return [
    'db_name' => '$DB',
    'mysql_socket' => '$MARIADB_SOCKET',
    'pg_socket_dir' => '$PG_SOCKET_DIR',
    'pg_port' => $PG_PORT,
    'pgbouncer_socket_dir' => '$WEB/pgbouncer',
    'pgbouncer_port' => $PGBOUNCER_PORT,
    'tether_socket' => '$TETHER_SOCKET',
    'tether_autoload' => '$WEB/www/tether-php/autoload.php',
    'tether_pool' => $POOL,
    'go_url' => 'http://127.0.0.1:$GO_PORT',
    'go_host' => '127.0.0.1',
    'go_port' => $GO_PORT,
    'cassandra_host' => '127.0.0.1',
    'cassandra_port' => $CASSANDRA_PORT,
    // Database users (MariaDB, PostgreSQL) and Cassandra roles, by the user keys of rows.php's conns.
    'users' => [
$(php_users "${MYSQL_USERS[@]}" "${PG_USERS[@]}")
        'tetherd' => '$TETHER_DB_USER',
    ],
];
EOF
chmod -R a+rX "$WEB/www"
runuser -u www-data -- test -r "$HTDOCS/lib.php" || die "www-data cannot read $HTDOCS"

# ---------------------------------------------------------------------------------------------------------------
# One phase per web server: start it, run bench.php against it, stop it (its workers' persistent connections close
# with it, so each phase counts only its own).

# start_apache starts apache2 prefork + mod_php, and its fresh-worker copy for the read-latency probe: the same
# config with MaxConnectionsPerChild 1 (each worker serves one connection, then is replaced) on its own port.
start_apache() {
	APACHE_PORT=$(free_port "${BENCH_WEB_APACHE_PORT:-18081}")
	render bench/web/conf/apache2.conf "$WEB/apache/apache2.conf" DIR="$WEB/apache" PORT="$APACHE_PORT" \
		HTDOCS="$HTDOCS" WORKERS="$APACHE_WORKERS" MIN_SPARE=5 MAX_PER_CHILD=0
	log "apache2: starting prefork + mod_php on 127.0.0.1:$APACHE_PORT ($APACHE_WORKERS workers)"
	# Its own session: on stop, apache2 signals its whole process group, which would otherwise include this script.
	# (setsid execs, not being a group leader here, so $! is apache2 itself.)
	setsid apache2 -f "$WEB/apache/apache2.conf" -DFOREGROUND </dev/null >"$WEB/apache/stdout.log" 2>&1 &
	APACHE_PID=$!
	await apache2 "$APACHE_PID" "$WEB/apache/error.log" 30 curl -fsS -o /dev/null "http://127.0.0.1:$APACHE_PORT/empty.php"
	await "apache2 workers" "$APACHE_PID" "$WEB/apache/error.log" 30 has_children "$APACHE_PID" "$APACHE_WORKERS"

	local fresh_port
	fresh_port=$(free_port "${BENCH_WEB_APACHE_FRESH_PORT:-18082}")
	render bench/web/conf/apache2.conf "$WEB/apache-fresh/apache2.conf" DIR="$WEB/apache-fresh" PORT="$fresh_port" \
		HTDOCS="$HTDOCS" WORKERS="$APACHE_FRESH_WORKERS" MIN_SPARE="$APACHE_FRESH_WORKERS" MAX_PER_CHILD=1
	log "apache2 (fresh workers): starting on 127.0.0.1:$fresh_port ($APACHE_FRESH_WORKERS spare workers, one connection each)"
	setsid apache2 -f "$WEB/apache-fresh/apache2.conf" -DFOREGROUND </dev/null >"$WEB/apache-fresh/stdout.log" 2>&1 &
	APACHE_FRESH_PID=$!
	await "apache2 (fresh workers)" "$APACHE_FRESH_PID" "$WEB/apache-fresh/error.log" 30 \
		has_children "$APACHE_FRESH_PID" "$APACHE_FRESH_WORKERS"
	URL=http://127.0.0.1:$APACHE_PORT FRESH_URL=http://127.0.0.1:$fresh_port WEB_PIDS=$APACHE_PID WORKERS=$APACHE_WORKERS
}

# start_nginx starts php-fpm, with its pool of long-lived workers and the read-latency probe's pool of fresh ones
# (pm.max_requests = 1), and nginx in front of both (/fresh/<page> goes to the second).
start_nginx() {
	NGINX_PORT=$(free_port "${BENCH_WEB_NGINX_PORT:-18080}")
	local fpm_sock=$WEB/run/php-fpm.sock fresh_sock=$WEB/run/php-fpm-fresh.sock
	check_socket_path "$fpm_sock"
	check_socket_path "$fresh_sock"
	cp bench/web/conf/content-length.php "$WEB/www/content-length.php"
	chmod a+r "$WEB/www/content-length.php"
	render bench/web/conf/php-fpm.conf "$WEB/fpm/php-fpm.conf" DIR="$WEB/fpm" FPM_SOCKET="$fpm_sock" CHILDREN="$FPM_CHILDREN" \
		PREPEND="$WEB/www/content-length.php" FPM_FRESH_SOCKET="$fresh_sock" FRESH_CHILDREN="$FPM_FRESH_CHILDREN"
	log "php-fpm: starting pm = static with $FPM_CHILDREN workers (and $FPM_FRESH_CHILDREN one-request workers)"
	php-fpm8.2 --nodaemonize --fpm-config "$WEB/fpm/php-fpm.conf" </dev/null >"$WEB/fpm/stdout.log" 2>&1 &
	FPM_PID=$!
	await php-fpm "$FPM_PID" "$WEB/fpm/error.log" 30 test -S "$fpm_sock"
	await "php-fpm workers" "$FPM_PID" "$WEB/fpm/error.log" 30 has_children "$FPM_PID" "$((FPM_CHILDREN + FPM_FRESH_CHILDREN))"
	render bench/web/conf/nginx.conf "$WEB/nginx/nginx.conf" DIR="$WEB/nginx" PORT="$NGINX_PORT" HTDOCS="$HTDOCS" \
		FPM_SOCKET="$fpm_sock" FPM_FRESH_SOCKET="$fresh_sock"
	log "nginx: starting on 127.0.0.1:$NGINX_PORT"
	nginx -p "$WEB/nginx" -c "$WEB/nginx/nginx.conf" -e "$WEB/nginx/error.log" </dev/null >"$WEB/nginx/stdout.log" 2>&1 &
	NGINX_PID=$!
	await nginx "$NGINX_PID" "$WEB/nginx/error.log" 30 curl -fsS -o /dev/null "http://127.0.0.1:$NGINX_PORT/empty.php"
	URL=http://127.0.0.1:$NGINX_PORT FRESH_URL=http://127.0.0.1:$NGINX_PORT/fresh WEB_PIDS="$NGINX_PID $FPM_PID" WORKERS=$FPM_CHILDREN
}

if [[ "$SERVE" == 1 ]]; then
	apache_url='' nginx_url='' apache_fresh_url='' nginx_fresh_url=''
	for server in ${SERVERS//,/ }; do
		"start_$server"
		printf -v "${server}_url" '%s' "$URL"
		printf -v "${server}_fresh_url" '%s' "$FRESH_URL"
	done
	{
		echo "==> web bench: serving (Ctrl-C stops everything; add ?t=1 to a page for its read time and pid in headers)"
		[[ -n "$apache_url" ]] && echo "    apache2     $apache_url/<page>.php (pid $APACHE_PID); fresh workers: $apache_fresh_url/<page>.php"
		[[ -n "$nginx_url" ]] && echo "    nginx       $nginx_url/<page>.php (pid $NGINX_PID, php-fpm $FPM_PID); fresh workers: $nginx_fresh_url/<page>.php"
		echo "    tetherd     pid $TETHERD_PID, socket $TETHER_SOCKET"
		echo "    goservice   pid $GOSERVICE_PID, http://127.0.0.1:$GO_PORT"
		echo "    pgbouncer   pid $PGBOUNCER_PID, port $PGBOUNCER_PORT"
		echo "    MariaDB     pid $MARIADB_PID, socket $MARIADB_SOCKET (root, no password)"
		echo "    PostgreSQL  pid $PG_PID, socket dir $PG_SOCKET_DIR, port $PG_PORT (postgres, trust)"
		echo "    Cassandra   pid $CASSANDRA_PID, $CASSANDRA_HOST ($CASSANDRA_USER/$CASSANDRA_PASSWORD), keyspace test"
		echo "    Bigtable    emulator pid $BTEMULATOR_PID, 127.0.0.1:$BT_PORT, bench/bench table $BT_TABLE"
	} >&2
	sleep infinity &
	SLEEP_PID=$!
	wait "$SLEEP_PID" || true
	exit 0
fi

export BENCH_WEB_CONFIG=$HTDOCS/config.php TETHERD_PID GOSERVICE_PID PGBOUNCER_PID MARIADB_PID PG_PID CASSANDRA_PID BTEMULATOR_PID
export BENCH_WEB_PG_ADMIN_DSN="host=$PG_SOCKET_DIR port=$PG_PORT user=postgres dbname=$DB"
export BENCH_WEB_CASSANDRA_ADMIN="$CASSANDRA_USER:$CASSANDRA_PASSWORD"
export CLK_TCK=${CLK_TCK:-$(getconf CLK_TCK)}
phase_files=()
for server in ${SERVERS//,/ }; do
	"start_$server"
	log "web bench: $server: running bench/web/bench.php$([[ "$QUICK" == 1 ]] && echo " (quick)")"
	rc=0
	bench_run_bg php -d memory_limit=1G bench/web/bench.php phase --server "$server" --url "$URL" \
		--fresh-url "$FRESH_URL" --web-pids "$WEB_PIDS" --workers "$WORKERS" --out "$WEB/results/$server.json" \
		"${QUICK_ARGS[@]}" "${BENCH_ARGS[@]}" || rc=$?
	((rc == 0)) || die "bench/web/bench.php failed against $server (exit $rc); logs in $WEB"
	for p in "$TETHERD_PID:tetherd:$WEB/tetherd/tetherd.log" "$PGBOUNCER_PID:pgbouncer:$WEB/pgbouncer/pgbouncer.log" \
		"$GOSERVICE_PID:goservice:$WEB/goservice/goservice.log" "$CASSANDRA_PID:cassandra:$CASSANDRA_DIR/logs/system.log" \
		"$BTEMULATOR_PID:btemulator:$WEB/bigtable/btemulator.log"; do
		IFS=: read -r pid name logf <<<"$p"
		pid_alive "$pid" || { tail_file "$logf"; die "$name died during the $server phase"; }
	done
	stop_web
	phase_files+=("$WEB/results/$server.json")
done
warn_logged "$WEB/tetherd/tetherd.log"

# ---------------------------------------------------------------------------------------------------------------
# Report

BENCH_WEB_CMD=$(bench_cmd bench/web/run.sh)
export BENCH_WEB_CMD BENCH_WEB_DATE=$BENCH_DATE BENCH_WEB_LOAD_BEFORE=$LOAD_BEFORE
BENCH_WEB_LOAD_AFTER=$(cut -d' ' -f1 /proc/loadavg)
export BENCH_WEB_WORKERS="apache2 prefork: $APACHE_WORKERS workers; php-fpm: pm = static, $FPM_CHILDREN workers"
export BENCH_WEB_POOL=$POOL
BENCH_WEB_MARIADB_VERSION=$(mariadb_version)
BENCH_WEB_PG_VERSION=$(postgres_version)
BENCH_WEB_CASSANDRA_VERSION=$TETHER_CASSANDRA_VERSION
BENCH_WEB_BIGTABLE_VERSION=$(go list -m -f '{{.Version}}' cloud.google.com/go/bigtable)
export BENCH_WEB_LOAD_AFTER BENCH_WEB_MARIADB_VERSION BENCH_WEB_PG_VERSION BENCH_WEB_CASSANDRA_VERSION BENCH_WEB_BIGTABLE_VERSION
stop_all
php bench/web/bench.php report --json "$WEB/results/results.json" "${phase_files[@]}" >"$WEB/results/section.md"

img_dir=$WEB/results/img
[[ "$WRITE" == 1 ]] && img_dir=$IMG
mkdir -p "$img_dir"
"$PY" bench/web/plot.py "$WEB/results/results.json" "$img_dir" || die "bench/web/plot.py failed"

cat "$WEB/results/section.md"

if [[ "$WRITE" == 1 ]]; then
	replace_doc_section "$DOC" web-bench "$WEB/results/section.md"
	log "web bench: wrote the results into docs/benchmarks.md and the plots into docs/img/"
fi
log "web bench: done in $(since "$T0")s"
