#!/usr/bin/env bash
# bench/web/twohost.sh: the two-host model of issue 20. A web host and a database host on this 2-CPU machine: the
# database servers and the relays on CPU 0, nginx + php-fpm, tetherd and pgbouncer on CPU 1 (taskset); MariaDB and
# PostgreSQL reached only over TCP through bench/relay, which adds a fixed delay each way, with TLS (each server its
# own CA; TETHER_DB_REQUIRE_TLS=1: the servers refuse TCP clients without it). bench/web's pages of 1 and 20 point
# reads and bench/apps's WordPress and Laravel pages, every row over that same path, at each delay in turn.
#
#   bash bench/web/twohost.sh [--quick] [--write] [--delays 100us,500us] [-- twohost.php options]
#   bash bench/web/run.sh --two-host [...]          # the same
#
# Per row: req/s with the web host's CPU saturated (ab -c = php-fpm's workers), page p50 and p99 at a fixed rate
# below every row's saturation (vegeta, installed into bin/ with go install), CPU per page on the web host and on
# the database host apart (utime+stime of their processes from /proc/PID/stat: the machine may be shared, so
# per-CPU /proc/stat would count strangers' work), the relays' CPU on its own line, and the backend connections
# each row's database user held (counted on the servers). Then the round trip the relays really give (measured
# from CPU 1 through the relay and directly, over TLS), each relay's -measure report and exit line, and issue 20's
# targets as met / not met.
#
#   --quick / BENCH_QUICK=1   one delay (0.5 ms), 100 requests per run: proves every page answers right over this
#                             path and the command works (make test); fails on any wrong page or failed request
#   --write / BENCH_WRITE=1   also rewrite the section between <!-- twohost-bench:start --> and
#                             <!-- twohost-bench:end --> in docs/benchmarks.md (refused with --quick)
#   --delays LIST             one-way delays, Go durations (default 100us,500us)
#   after --, options for twohost.php: --seconds S (3; each measured run), --only KEY,KEY (rows)
#
# Environment (all optional): BENCH_TWOHOST_TETHER_TLS (1; 0: tetherd reaches the databases through the relays
# WITHOUT TLS, for trying the harness while tetherd refuses TLS DSNs; the servers then accept non-TLS TCP, every
# other row's user still REQUIRE SSL / its client sslmode=verify-full, and the output says so on every Tether row);
# BENCH_TWOHOST_POOL (tetherd's default max_conns, 8; also pgbouncer's pool size); BENCH_TWOHOST_FPM_CHILDREN (32:
# enough for 20 round trips a page to saturate the web host's CPU); BENCH_TWOHOST_DB_CPU (0), BENCH_TWOHOST_WEB_CPU
# (1), BENCH_TWOHOST_RELAY_CPU (the database host's; on a machine with a third CPU the relays' cost, 70-120 us of
# CPU a chunk, can be kept off the database host); first ports tried: BENCH_TWOHOST_NGINX_PORT (18280), BENCH_TWOHOST_MARIADB_PORT (23306),
# BENCH_TWOHOST_PG_PORT (23432), BENCH_TWOHOST_RELAY_PORT (23506, MariaDB's; PostgreSQL's the next free one),
# BENCH_TWOHOST_PGBOUNCER_PORT (23532).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib/databases.sh source-path=SCRIPTDIR/../..
source "$ROOT/scripts/lib/databases.sh"
# shellcheck source=bench/lib/bench.sh
source "$ROOT/bench/lib/bench.sh"

DELAYS=100us,500us
VEGETA_VERSION=v12.13.0
delays_given=0
args=()
while (($#)); do
	case $1 in
	--delays)
		DELAYS=${2:?--delays needs a list}
		delays_given=1
		shift
		;;
	*) args+=("$1") ;;
	esac
	shift
done
bench_parse_args "$ROOT/bench/web/twohost.sh" -- "${args[@]}"
if [[ "$QUICK" == 1 && "$delays_given" == 0 ]]; then DELAYS=500us; fi
ARGS=("${args[@]}")
((delays_given)) && ARGS+=(--delays "$DELAYS")
bench_rerun_as_root bench/web/twohost.sh "two-host bench"

TH=$ROOT/var/bench/twohost
DOC=$ROOT/docs/benchmarks.md
T0=$(now)
BENCH_DATE=$(date -u)
LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)
DB_CPU=${BENCH_TWOHOST_DB_CPU:-0}
WEB_CPU=${BENCH_TWOHOST_WEB_CPU:-1}
RELAY_CPU=${BENCH_TWOHOST_RELAY_CPU:-$DB_CPU}
TETHER_TLS=${BENCH_TWOHOST_TETHER_TLS:-1}
POOL=${BENCH_TWOHOST_POOL:-8}
FPM_CHILDREN=${BENCH_TWOHOST_FPM_CHILDREN:-32}
DB=$TETHER_DB_NAME

PACKAGES=(php8.2-cli php8.2-fpm php8.2-mysql php8.2-pgsql php8.2-curl php8.2-msgpack nginx apache2-utils
	mariadb-server postgresql pgbouncer wordpress php-laravel-framework curl util-linux)
apt_install_missing "two-host bench" "${PACKAGES[@]}"
command -v go >/dev/null || die "go is not installed"
(($(nproc) >= 2)) || die "the two-host model needs 2 CPUs (database host and web host); this machine has $(nproc)"

# ---------------------------------------------------------------------------------------------------------------
# Cleanup: whatever this script started, by PID

TETHERD_PID='' PGBOUNCER_PID='' FPM_PID='' NGINX_PID='' RELAY_MY_PID='' RELAY_PG_PID='' BENCH_PHP_PID=''

# stop_web_host stops what one delay's phase started (web server, tetherd, pgbouncer, relays); safe to call twice.
# The relays last: they log what they forwarded and the CPU it cost on SIGTERM.
stop_web_host() {
	[[ -n "$NGINX_PID" ]] && { log "nginx: stopping pid $NGINX_PID"; stop_pid "$NGINX_PID" nginx 20; }
	[[ -n "$FPM_PID" ]] && { log "php-fpm: stopping pid $FPM_PID"; stop_pid "$FPM_PID" php-fpm 20; }
	[[ -n "$TETHERD_PID" ]] && { log "tetherd: stopping pid $TETHERD_PID"; stop_pid "$TETHERD_PID" tetherd 15; }
	[[ -n "$PGBOUNCER_PID" ]] && { log "pgbouncer: stopping pid $PGBOUNCER_PID"; stop_pid "$PGBOUNCER_PID" pgbouncer 10 INT; }
	[[ -n "$RELAY_MY_PID" ]] && { log "relay (MariaDB): stopping pid $RELAY_MY_PID"; stop_pid "$RELAY_MY_PID" relay 10; }
	[[ -n "$RELAY_PG_PID" ]] && { log "relay (PostgreSQL): stopping pid $RELAY_PG_PID"; stop_pid "$RELAY_PG_PID" relay 10; }
	NGINX_PID='' FPM_PID='' TETHERD_PID='' PGBOUNCER_PID='' RELAY_MY_PID='' RELAY_PG_PID=''
}
stop_all() {
	[[ -n "$BENCH_PHP_PID" ]] && { stop_pid "$BENCH_PHP_PID" twohost.php 5; BENCH_PHP_PID=; }
	stop_web_host
	stop_postgres
	stop_mariadb
}
bench_trap stop_all

if [[ -e "$TH" || -L "$TH" ]]; then
	stop_leftover "$TH" nginx/nginx.pid nginx
	stop_leftover "$TH" fpm/php-fpm.pid php-fpm8.2
	stop_leftover "$TH" tetherd/tetherd.pid tetherd
	stop_leftover "$TH" pgbouncer/pgbouncer.pid pgbouncer
	stop_leftover "$TH" relay/mariadb.pid relay
	stop_leftover "$TH" relay/pg.pid relay
	clean_db_dir "$TH/mariadb"
	clean_db_dir "$TH/pg"
	remove_workdir "$TH" tether-twohost
fi
make_workdir "$TH" tether-twohost "two-host bench" www-data postgres
mkdir -p "$TH"/{run,tetherd,pgbouncer,relay,nginx/tmp,fpm,results,mariadb-tmp}

log "two-host bench: building bin/tetherd and bin/relay"
for try in 1 2 3 4; do
	go build -o bin/tetherd ./cmd/tetherd && break
	((try < 4)) || die "go build ./cmd/tetherd failed"
	warn "go build ./cmd/tetherd failed (try $try); trying again in 20 s"
	sleep 20
done
go build -o bin/relay ./bench/relay
# vegeta, a well-kept constant-rate HTTP load generator, measures each page's latency at a fixed rate below
# saturation (twohost.php): ab holds a concurrency, and on a row that saturates a host that measures the queue.
log "two-host bench: installing vegeta $VEGETA_VERSION into bin/"
for try in 1 2 3 4; do
	GOBIN=$ROOT/bin go install "github.com/tsenart/vegeta/v12@$VEGETA_VERSION" && break
	((try < 4)) || die "go install vegeta failed"
	warn "go install vegeta failed (try $try); trying again in 20 s"
	sleep 20
done

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
# The database host: MariaDB and PostgreSQL on CPU $DB_CPU, TLS required on TCP

REQUIRE_TLS=1
# Without TLS for tetherd (trial runs), the servers must let its user in on plain TCP; every other user of the rows
# is made REQUIRE SSL below, and the PostgreSQL rows' clients insist on it (sslmode=verify-full).
[[ "$TETHER_TLS" == 1 ]] || REQUIRE_TLS=0
mkdir -p "$TH/mariadb-tmp"
TETHER_DB_REQUIRE_TLS=$REQUIRE_TLS TETHER_MARIADB_PORT=${BENCH_TWOHOST_MARIADB_PORT:-23306} \
	TETHER_MARIADB_OPTS="--max-connections=1000 --tmpdir=$TH/mariadb-tmp ${TETHER_MARIADB_OPTS:-}" start_mariadb "$TH/mariadb"
TETHER_DB_REQUIRE_TLS=$REQUIRE_TLS TETHER_PG_PORT=${BENCH_TWOHOST_PG_PORT:-23432} TETHER_PG_CONF="max_connections = 400
${TETHER_PG_CONF:-}" start_postgres "$TH/pg"
# PostgreSQL forks a backend per connection from the postmaster: pinning the postmaster (and what runs already)
# pins every later backend too.
pin "$DB_CPU" "$MARIADB_PID" "$PG_PID"
log "two-host bench: database host on CPU $DB_CPU (mariadbd $MARIADB_PID, postgres $PG_PID); TLS required on TCP: $([[ $REQUIRE_TLS == 1 ]] && echo yes || echo "no (BENCH_TWOHOST_TETHER_TLS=0)")"

# One database user per way in (password = name), reachable only from 127.0.0.1 (TCP: through the relay, never the
# Unix socket) and only with TLS. wp_native also from localhost for the WordPress install (dropped after it).
MYSQL_USERS=(mysqli_connect_n:bench_mysqli_n mysqli_pconnect_n:bench_mysqli_pn pdo_persistent_n:bench_pdo_pn
	wp_native:wp_native lv_native:lv_native lv_persistent:lv_persistent)
PG_USERS=(pg_connect_n:bench_pg_n pg_pconnect_n:bench_pg_pn pgbouncer_pconnect_n:bench_pgb_pn)
MYSQL=$(_db_bin mariadb mysql)
PSQL=$(_db_bin psql)
log "two-host bench: loading bench_kv (10,000 rows) into MariaDB and PostgreSQL"
{
	cat <<'SQL'
CREATE TABLE bench_kv (id INT PRIMARY KEY, name VARCHAR(64), score INT, created DATETIME) ENGINE=InnoDB;
SET SESSION max_recursive_iterations = 100000;
INSERT INTO bench_kv (id, name, score, created)
WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 10000)
SELECT n, CONCAT('name-', n), (n * 7919) % 1000, TIMESTAMP '2026-01-01 00:00:00' - INTERVAL n MINUTE FROM seq;
ANALYZE TABLE bench_kv;
SQL
	for u in "${MYSQL_USERS[@]}"; do
		echo "CREATE USER '${u#*:}'@'127.0.0.1' IDENTIFIED BY '${u#*:}' REQUIRE SSL;"
		echo "GRANT ALL PRIVILEGES ON \`$DB\`.* TO '${u#*:}'@'127.0.0.1';"
	done
	echo "CREATE USER 'wp_native'@'localhost' IDENTIFIED BY 'wp_native'; GRANT ALL PRIVILEGES ON \`$DB\`.* TO 'wp_native'@'localhost';"
} | "$MYSQL" --no-defaults --socket="$MARIADB_SOCKET" --user=root --batch "$DB" >/dev/null
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

# ---------------------------------------------------------------------------------------------------------------
# The pages: bench/apps's www tree, with bench/web's pages beside the apps' in htdocs; one config.php for both

WWW=$TH/www
HTDOCS=$WWW/htdocs
cp -r bench/apps/www "$WWW"
cp bench/web/pages/*.php "$HTDOCS/"
mkdir -p "$WWW/clients/php" "$WWW/wp/content-native" "$WWW/wp/content-tether"
cp -r clients/php/autoload.php clients/php/src "$WWW/clients/php/"
cp -r clients/php-laravel "$WWW/clients/php-laravel"
cp -r clients/php-wordpress "$WWW/clients/php-wordpress"
rm -rf "$WWW/clients/php-laravel/tests" "$WWW/clients/php-wordpress/tests"
for site in native tether; do
	for d in themes plugins languages; do ln -s "/usr/share/wordpress/wp-content/$d" "$WWW/wp/content-$site/$d"; done
	ln -s "$WWW/wp/mu-plugins" "$WWW/wp/content-$site/mu-plugins"
done
ln -s "$WWW/clients/php-wordpress/db.php" "$WWW/wp/content-tether/db.php"
printf '<?php\n// bench/web/twohost.sh: the pages of bench/web read the same config as the apps'"'"'.\nreturn require __DIR__ . "/../config.php";\n' >"$HTDOCS/config.php"
TETHER_SOCKET=$TH/run/tether.sock
check_socket_path "$TETHER_SOCKET"

# write_config [RELAY_MY_PORT RELAY_PG_PORT PGBOUNCER_PORT]: config.php for the pages and the driver; without
# arguments the set-up form (MariaDB over its Unix socket, for the WordPress install).
write_config() {
	local u tcp=''
	if (($#)); then
		tcp="    'mysql_host' => '127.0.0.1',
    'mysql_port' => $1,
    'mysql_tls_ca' => '$MARIADB_TLS_CA',
    'pg_host' => '127.0.0.1',
    'pg_port' => $2,
    'pg_tls_ca' => '$PG_TLS_CA',
    'pgbouncer_socket_dir' => '$TH/pgbouncer',
    'pgbouncer_port' => $3,"
	fi
	{
		cat <<EOF
<?php
// Written by bench/web/twohost.sh: where the pages (bench/web's and bench/apps's) and twohost.php find everything.
return [
    'db_name' => '$DB',
    'mysql_socket' => '$MARIADB_SOCKET',
    'pg_socket_dir' => '$PG_SOCKET_DIR',
$tcp
    'tether_socket' => '$TETHER_SOCKET',
    'tether_autoload' => '$WWW/clients/php/autoload.php',
    'tether_backend' => 'maria',
    'tether_pool' => $POOL,
    'www' => '$WWW',
    'users' => [
EOF
		for u in "${MYSQL_USERS[@]}" "${PG_USERS[@]}"; do printf "        '%s' => '%s',\n" "${u%%:*}" "${u#*:}"; done
		echo "        'tetherd' => '$TETHER_DB_USER',"
		echo "    ],"
		echo "];"
	} >"$WWW/config.php.tmp"
	mv "$WWW/config.php.tmp" "$WWW/config.php"
	chmod -R a+rX "$WWW"
}
write_config
runuser -u www-data -- test -r "$HTDOCS/lib.php" || die "www-data cannot read $HTDOCS"
log "two-host bench: installing WordPress and loading the Laravel tables (over the Unix socket: set-up, not measured)"
php bench/apps/setup-wordpress.php "$WWW/config.php" || die "WordPress setup failed"
php bench/apps/setup-laravel.php "$WWW/config.php" || die "Laravel setup failed"
"$MYSQL" --no-defaults --socket="$MARIADB_SOCKET" --user=root --batch -e "DROP USER 'wp_native'@'localhost'" ||
	die "dropping wp_native@localhost failed"

# ---------------------------------------------------------------------------------------------------------------
# One phase per delay: relays (database host), pgbouncer, tetherd, php-fpm and nginx (web host), the driver

# start_relay NAME TARGET_PORT DELAY FIRST_PORT: a relay on CPU $RELAY_CPU; sets RELAY_PORT and RELAY_PID.
start_relay() {
	local name=$1 target=$2 delay=$3 logf=$TH/relay/$1-$3.log
	RELAY_PORT=$(free_port "$4")
	log "relay ($name): 127.0.0.1:$RELAY_PORT -> 127.0.0.1:$target, $delay each way, on CPU $RELAY_CPU"
	taskset -c "$RELAY_CPU" bin/relay -listen "127.0.0.1:$RELAY_PORT" -target "127.0.0.1:$target" -delay "$delay" -measure \
		</dev/null >"$logf" 2>&1 &
	RELAY_PID=$!
	echo "$RELAY_PID" >"$TH/relay/$name.pid"
	await "relay ($name)" "$RELAY_PID" "$logf" 60 grep -qx ready "$logf"
}

export CLK_TCK=${CLK_TCK:-$(getconf CLK_TCK)}
phase_files=()
for delay in ${DELAYS//,/ }; do
	start_relay mariadb "$MARIADB_PORT" "$delay" "${BENCH_TWOHOST_RELAY_PORT:-23506}"
	RELAY_MY_PID=$RELAY_PID RELAY_MY_PORT=$RELAY_PORT
	start_relay pg "$PG_PORT" "$delay" "$((RELAY_MY_PORT + 1))"
	RELAY_PG_PID=$RELAY_PID RELAY_PG_PORT=$RELAY_PORT

	PGBOUNCER_PORT=$(free_port "${BENCH_TWOHOST_PGBOUNCER_PORT:-23532}")
	chown postgres: "$TH/pgbouncer"
	render bench/web/conf/pgbouncer.ini "$TH/pgbouncer/pgbouncer.ini" DIR="$TH/pgbouncer" PORT="$PGBOUNCER_PORT" \
		DB="$DB" PG_SOCKET_DIR=127.0.0.1 PG_PORT="$RELAY_PG_PORT" POOL="$POOL"
	# To PostgreSQL through the relay, TLS required and the certificate checked (host name included).
	printf 'server_tls_sslmode = verify-full\nserver_tls_ca_file = %s\n' "$PG_TLS_CA" >>"$TH/pgbouncer/pgbouncer.ini"
	for u in "${PG_USERS[@]}"; do
		if [[ "$u" == pgbouncer_* ]]; then printf '"%s" "%s"\n' "${u#*:}" "${u#*:}"; fi
	done >"$TH/pgbouncer/userlist.txt"
	chown postgres: "$TH/pgbouncer"/*
	chmod 600 "$TH/pgbouncer/userlist.txt"
	log "pgbouncer: on CPU $WEB_CPU, $TH/pgbouncer:$PGBOUNCER_PORT -> relay $RELAY_PG_PORT (TLS verify-full, pool $POOL)"
	taskset -c "$WEB_CPU" setpriv --reuid=postgres --regid=postgres --init-groups pgbouncer "$TH/pgbouncer/pgbouncer.ini" \
		</dev/null >"$TH/pgbouncer/stdout.log" 2>&1 &
	PGBOUNCER_PID=$!
	await pgbouncer "$PGBOUNCER_PID" "$TH/pgbouncer/pgbouncer.log" 15 test -S "$TH/pgbouncer/.s.PGSQL.$PGBOUNCER_PORT"

	# tetherd's backends: over TCP through the relays, with TLS (the DSN syntax of issue 20's TLS work).
	my_dsn="$TETHER_DB_USER:$TETHER_DB_PASSWORD@tcp(127.0.0.1:$RELAY_MY_PORT)/$DB?tls=true&tls-ca=$MARIADB_TLS_CA"
	pg_dsn="host=127.0.0.1 port=$RELAY_PG_PORT user=$TETHER_DB_USER password=$TETHER_DB_PASSWORD dbname=$DB sslmode=verify-full sslrootcert=$PG_TLS_CA"
	if [[ "$TETHER_TLS" != 1 ]]; then
		my_dsn="$TETHER_DB_USER:$TETHER_DB_PASSWORD@tcp(127.0.0.1:$RELAY_MY_PORT)/$DB"
		pg_dsn="host=127.0.0.1 port=$RELAY_PG_PORT user=$TETHER_DB_USER password=$TETHER_DB_PASSWORD dbname=$DB sslmode=disable"
	fi
	pool_lines=''
	[[ -n "${BENCH_TWOHOST_POOL:-}" ]] && pool_lines="max_conns = $POOL"
	cat >"$TH/tetherd/tetherd.toml" <<EOF
# Written by bench/web/twohost.sh for one phase ($delay each way).
[server]
socket = "$TETHER_SOCKET"
socket_mode = "0660"
socket_group = "www-data"
default_backend = "maria"

[log]
level = "warn"

# Table versions for the rows with the PHP client's local cache (tether-localcache-n20, wp-tether-local).
[cache]
local = true

[backends.maria]
type = "mysql"
dsn = "$my_dsn"
$pool_lines

[backends.pg]
type = "postgres"
dsn = "$pg_dsn"
$pool_lines
EOF
	log "tetherd: on CPU $WEB_CPU, backends through the relays, TLS $([[ $TETHER_TLS == 1 ]] && echo on || echo "OFF (BENCH_TWOHOST_TETHER_TLS=0)")"
	taskset -c "$WEB_CPU" bin/tetherd -config "$TH/tetherd/tetherd.toml" </dev/null >"$TH/tetherd/tetherd-$delay.log" 2>&1 &
	TETHERD_PID=$!
	echo "$TETHERD_PID" >"$TH/tetherd/tetherd.pid"
	if ! (await tetherd "$TETHERD_PID" "$TH/tetherd/tetherd-$delay.log" 30 test -S "$TETHER_SOCKET"); then
		if [[ "$TETHER_TLS" == 1 ]] && grep -qi 'tls\|ssl' "$TH/tetherd/tetherd-$delay.log"; then
			die "tetherd refused its TLS DSNs (above): this tetherd cannot reach a database over TLS yet; BENCH_TWOHOST_TETHER_TLS=0 runs the harness with tetherd's backends without TLS (labelled so)"
		fi
		die "tetherd did not start (above)"
	fi

	write_config "$RELAY_MY_PORT" "$RELAY_PG_PORT" "$PGBOUNCER_PORT"

	NGINX_PORT=$(free_port "${BENCH_TWOHOST_NGINX_PORT:-18280}")
	fpm_sock=$TH/run/php-fpm.sock fresh_sock=$TH/run/php-fpm-fresh.sock
	cp bench/web/conf/content-length.php "$WWW/content-length.php"
	chmod a+r "$WWW/content-length.php"
	render bench/web/conf/php-fpm.conf "$TH/fpm/php-fpm.conf" DIR="$TH/fpm" FPM_SOCKET="$fpm_sock" CHILDREN="$FPM_CHILDREN" \
		PREPEND="$WWW/content-length.php" FPM_FRESH_SOCKET="$fresh_sock" FRESH_CHILDREN=1
	log "php-fpm: on CPU $WEB_CPU, pm = static, $FPM_CHILDREN workers"
	taskset -c "$WEB_CPU" php-fpm8.2 --nodaemonize --fpm-config "$TH/fpm/php-fpm.conf" </dev/null >"$TH/fpm/stdout.log" 2>&1 &
	FPM_PID=$!
	await php-fpm "$FPM_PID" "$TH/fpm/error.log" 30 test -S "$fpm_sock"
	await "php-fpm workers" "$FPM_PID" "$TH/fpm/error.log" 30 has_children "$FPM_PID" "$((FPM_CHILDREN + 1))"
	render bench/apps/conf/nginx.conf "$TH/nginx/nginx.conf" DIR="$TH/nginx" PORT="$NGINX_PORT" HTDOCS="$HTDOCS" \
		FPM_SOCKET="$fpm_sock"
	log "nginx: on CPU $WEB_CPU, 127.0.0.1:$NGINX_PORT"
	taskset -c "$WEB_CPU" nginx -p "$TH/nginx" -c "$TH/nginx/nginx.conf" -e "$TH/nginx/error.log" </dev/null >"$TH/nginx/stdout.log" 2>&1 &
	NGINX_PID=$!
	await nginx "$NGINX_PID" "$TH/nginx/error.log" 30 curl -fsS -o /dev/null "http://127.0.0.1:$NGINX_PORT/empty.php"

	log "two-host bench: $delay each way: running bench/web/twohost.php$([[ "$QUICK" == 1 ]] && echo " (quick)")"
	rc=0
	# The driver, ab and vegeta run on the database host's CPU: the web host's CPU is then the web host's alone, and the
	# per-process CPU figures leave ab out either way.
	TWOHOST_CONFIG=$WWW/config.php TETHERD_PID=$TETHERD_PID PGBOUNCER_PID=$PGBOUNCER_PID MARIADB_PID=$MARIADB_PID \
		PG_PID=$PG_PID RELAY_PIDS="$RELAY_MY_PID $RELAY_PG_PID" WEB_PIDS="$NGINX_PID $FPM_PID" WEB_CPU=$WEB_CPU \
		TETHER_TLS=$TETHER_TLS WORKERS=$FPM_CHILDREN \
		bench_run_bg taskset -c "$DB_CPU" php -d memory_limit=1G bench/web/twohost.php phase --delay "$delay" \
		--url "http://127.0.0.1:$NGINX_PORT" --out "$TH/results/$delay.json" "${QUICK_ARGS[@]}" "${BENCH_ARGS[@]}" || rc=$?
	if ((rc != 0)); then
		tail_file "$TH/fpm/error.log" 20
		tail_file "$TH/tetherd/tetherd-$delay.log" 20
		die "bench/web/twohost.php failed at $delay (exit $rc); logs in $TH"
	fi
	for p in "$TETHERD_PID:tetherd:$TH/tetherd/tetherd-$delay.log" "$PGBOUNCER_PID:pgbouncer:$TH/pgbouncer/pgbouncer.log" \
		"$RELAY_MY_PID:relay:$TH/relay/mariadb-$delay.log" "$RELAY_PG_PID:relay:$TH/relay/pg-$delay.log"; do
		IFS=: read -r pid name logf <<<"$p"
		pid_alive "$pid" || { tail_file "$logf"; die "$name died during the $delay phase"; }
	done
	stop_web_host
	warn_logged "$TH/tetherd/tetherd-$delay.log"
	# The relays' own reports (-measure before serving, what they forwarded and its CPU at exit) go with the results.
	for name in mariadb pg; do
		grep '^relay: \|relay: forwarded' "$TH/relay/$name-$delay.log" | sed "s/^/$name /" >"$TH/results/relay-$name-$delay.txt" || true
	done
	phase_files+=("$TH/results/$delay.json")
done

# ---------------------------------------------------------------------------------------------------------------
# Report

export BENCH_TWOHOST_CMD BENCH_TWOHOST_DATE=$BENCH_DATE BENCH_TWOHOST_LOAD_BEFORE=$LOAD_BEFORE
BENCH_TWOHOST_CMD=$(bench_cmd bench/web/twohost.sh)
BENCH_TWOHOST_LOAD_AFTER=$(cut -d' ' -f1 /proc/loadavg)
BENCH_TWOHOST_MARIADB_VERSION=$(mariadb_version)
BENCH_TWOHOST_PG_VERSION=$(postgres_version)
export BENCH_TWOHOST_LOAD_AFTER BENCH_TWOHOST_MARIADB_VERSION BENCH_TWOHOST_PG_VERSION
export BENCH_TWOHOST_SETUP="database host: CPU $DB_CPU (mariadbd, postgres, and ab and vegeta with the driver); relays: CPU $RELAY_CPU; web host: CPU $WEB_CPU (nginx, php-fpm pm = static $FPM_CHILDREN workers, tetherd, pgbouncer); pinned with taskset"
export BENCH_TWOHOST_POOL=$POOL BENCH_TWOHOST_TETHER_TLS=$TETHER_TLS BENCH_TWOHOST_RESULTS=$TH/results
stop_all
php bench/web/twohost.php report "${phase_files[@]}" >"$TH/results/section.md"
cat "$TH/results/section.md"
if [[ "$WRITE" == 1 ]]; then
	replace_doc_section "$DOC" twohost-bench "$TH/results/section.md"
	log "two-host bench: wrote the results into docs/benchmarks.md"
fi
log "two-host bench: done in $(since "$T0")s"
