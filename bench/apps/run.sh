#!/usr/bin/env bash
# bench/apps/run.sh: the application page benchmark (issue 11). Real framework pages, natively and through Tether,
# under nginx + php-fpm and apache2 prefork + mod_php in one run, loaded with ab at -c 10, -c 10 -k and -c 100:
#   - a WordPress 6.1 front page (Debian's /usr/share/wordpress, its default theme, the sample content plus 40
#     generated posts with categories, tags and comments), through WordPress's own mysqli and through Tether's
#     db.php drop-in (clients/php-wordpress), both sites on the same tables;
#   - a Laravel page (Illuminate\Database 8.83 from Debian, through Capsule\Manager) listing 20 Eloquent posts with
#     their eager-loaded author, through PDO (mysql driver; Laravel's default, not persistent, and
#     PDO::ATTR_PERSISTENT) and through the tether driver (clients/php-laravel).
# It reports req/s, the statements each page sends to MariaDB and the peak of the backend connections the page's
# database user holds.
#
#   bash bench/apps/run.sh [--quick] [--write] [--servers apache,nginx] [-- bench.php options]
#
# It installs the Debian 12 packages it needs when any is missing, builds bin/tetherd, starts throwaway instances
# under var/bench/apps (git-ignored) on loopback: MariaDB (scripts/lib/databases.sh, with userstat on for per-user
# statement counts) with one database user per way in, WordPress installed into it (bench/apps/setup-wordpress.php)
# and the Laravel tables (bench/apps/setup-laravel.php), tetherd (socket group www-data), then each web server in
# turn (PHP as www-data); bench/apps/bench.php checks every page's body (twice), then loads every row with ab in
# interleaved rounds. It prints markdown on stdout (progress on stderr) and stops everything it started (by PID) on
# exit, whatever happens.
#
#   --quick / BENCH_QUICK=1   200 requests per row and setting, one round, no warm-up: proves that the pages,
#                             servers and the command work (make test). Fails if any page answers wrong or any
#                             request fails.
#   --write / BENCH_WRITE=1   also rewrite the section between <!-- app-bench:start --> and <!-- app-bench:end -->
#                             in docs/benchmarks.md (refused with --quick)
#   --servers LIST            apache, nginx or both (default apache,nginx)
#   --serve                   start everything (both web servers at once), print where, and wait for Ctrl-C: for
#                             trying the pages by hand and profiling; measures nothing
#   after --, options for bench.php: --rounds N (3), --seconds S (4: each measured run is sized from a calibration
#                             run to last about S seconds), --only KEY,KEY (rows), --settings c10,c10k,c100
#
# Environment (all optional): BENCH_APPS_NGINX_PORT (18180), BENCH_APPS_APACHE_PORT (18181), BENCH_APPS_MARIADB_PORT
# (22306): first port tried, the next free one is taken if busy; BENCH_APPS_POOL (4): tetherd's pool;
# BENCH_APPS_FPM_CHILDREN (4 x nproc); BENCH_APPS_APACHE_WORKERS (150, Debian's MaxRequestWorkers).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib/databases.sh source-path=SCRIPTDIR/../..
source "$ROOT/scripts/lib/databases.sh"

# shellcheck source=bench/lib/bench.sh
source "$ROOT/bench/lib/bench.sh"

bench_parse_args "$ROOT/bench/apps/run.sh" --web -- "$@"
bench_rerun_as_root bench/apps/run.sh "app bench"

APPS=$ROOT/var/bench/apps
DOC=$ROOT/docs/benchmarks.md
T0=$(now)
BENCH_DATE=$(date -u)
LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)

# ---------------------------------------------------------------------------------------------------------------
# Packages

PACKAGES=(php8.2-cli php8.2-fpm php8.2-mysql php8.2-msgpack php8.2-curl nginx apache2 libapache2-mod-php8.2
	apache2-utils mariadb-server wordpress php-laravel-framework curl)
apt_install_missing "app bench" "${PACKAGES[@]}"
command -v go >/dev/null || die "go is not installed"

# ---------------------------------------------------------------------------------------------------------------
# Cleanup: whatever this script started, by PID

TETHERD_PID='' APACHE_PID='' FPM_PID='' NGINX_PID='' BENCH_PHP_PID='' SLEEP_PID=''

# stop_web stops the web server of the current phase, if any; safe to call twice.
stop_web() {
	[[ -n "$APACHE_PID" ]] && { log "apache2: stopping pid $APACHE_PID"; stop_pid "$APACHE_PID" apache2 20; }
	[[ -n "$NGINX_PID" ]] && { log "nginx: stopping pid $NGINX_PID"; stop_pid "$NGINX_PID" nginx 20; }
	[[ -n "$FPM_PID" ]] && { log "php-fpm: stopping pid $FPM_PID"; stop_pid "$FPM_PID" php-fpm 20; }
	APACHE_PID='' NGINX_PID='' FPM_PID=''
}

# stop_all stops everything this script started, the web servers first (they hold connections); safe to call twice.
stop_all() {
	[[ -n "$SLEEP_PID" ]] && { kill "$SLEEP_PID" 2>/dev/null || true; SLEEP_PID=; }
	[[ -n "$BENCH_PHP_PID" ]] && { stop_pid "$BENCH_PHP_PID" bench.php 5; BENCH_PHP_PID=; }
	stop_web
	[[ -n "$TETHERD_PID" ]] && { log "tetherd: stopping pid $TETHERD_PID"; stop_pid "$TETHERD_PID" tetherd 15; }
	TETHERD_PID=''
	stop_mariadb
}
bench_trap stop_all

if [[ -e "$APPS" || -L "$APPS" ]]; then
	stop_leftover "$APPS" apache/apache2.pid apache2
	stop_leftover "$APPS" nginx/nginx.pid nginx
	stop_leftover "$APPS" fpm/php-fpm.pid php-fpm8.2
	stop_leftover "$APPS" tetherd/tetherd.pid tetherd
	clean_db_dir "$APPS/mariadb"
	remove_workdir "$APPS" tether-apps
fi

# PHP runs as www-data: it must reach the sockets and files under APPS. When it cannot (a checkout under /root, say),
# APPS lives in /tmp, with var/bench/apps a symlink to it.
make_workdir "$APPS" tether-apps "app bench" www-data
mkdir -p "$APPS"/{run,tetherd,nginx/tmp,fpm,apache,results,mariadb-tmp}

# ---------------------------------------------------------------------------------------------------------------
# The Tether integrations of the two frameworks (written alongside this benchmark): where they are

WP_DROPIN=$ROOT/clients/php-wordpress/db.php
LARAVEL_DIR=$ROOT/clients/php-laravel
[[ -f "$WP_DROPIN" ]] || die "the WordPress drop-in $WP_DROPIN does not exist"
[[ -d "$LARAVEL_DIR/src" ]] || die "the Laravel driver $LARAVEL_DIR/src does not exist"

# ---------------------------------------------------------------------------------------------------------------
# MariaDB, its users, WordPress and the Laravel tables

NPROC=$(nproc)
POOL=${BENCH_APPS_POOL:-4}
FPM_CHILDREN=${BENCH_APPS_FPM_CHILDREN:-$((4 * NPROC))}
APACHE_WORKERS=${BENCH_APPS_APACHE_WORKERS:-150}
DB=$TETHER_DB_NAME

log "app bench: building bin/tetherd"
# Others may be editing tetherd's Go code in this tree meanwhile: a build that fails is tried again, for up to a
# minute, before the run fails.
for try in 1 2 3 4; do
	go build -o bin/tetherd ./cmd/tetherd && break
	((try < 4)) || die "go build ./cmd/tetherd failed"
	warn "go build ./cmd/tetherd failed (try $try); trying again in 20 s"
	sleep 20
done

# userstat: information_schema.USER_STATISTICS counts statements and connections per database user, so that each
# row's own statements per page can be read apart from the driver's and the other rows'. Every PHP worker may hold
# a persistent PDO link (apache2's 150), and -c 100 native rows add up to 100 more.
TETHER_MARIADB_PORT=${BENCH_APPS_MARIADB_PORT:-22306} \
	TETHER_MARIADB_OPTS="--max-connections=1000 --userstat=1 --tmpdir=$APPS/mariadb-tmp ${TETHER_MARIADB_OPTS:-}" \
	start_mariadb "$APPS/mariadb"
MYSQL=$(_db_bin mariadb mysql)

# One database user per way in (password = name): WordPress's mysqli, Laravel's PDO, Laravel's persistent PDO,
# and tetherd (both frameworks' Tether rows go through it).
APP_USERS=(wp_native lv_native lv_persistent tetherd)
for u in "${APP_USERS[@]}"; do
	echo "CREATE USER '$u'@'localhost' IDENTIFIED BY '$u'; GRANT ALL PRIVILEGES ON \`$DB\`.* TO '$u'@'localhost';"
done | "$MYSQL" --no-defaults --socket="$MARIADB_SOCKET" --user=root --batch || die "mariadb: creating the app users failed"

TETHER_SOCKET=$APPS/run/tether.sock
check_socket_path "$TETHER_SOCKET"

# The document root and the code the pages run, as www-data reads them: bench/apps/www, and under www/clients the
# Tether client and the two framework integrations, laid out as in the repository (their relative requires hold).
WWW=$APPS/www
cp -r bench/apps/www "$WWW"
mkdir -p "$WWW/clients/php" "$WWW/wp/content-native" "$WWW/wp/content-tether"
cp -r clients/php/autoload.php clients/php/src "$WWW/clients/php/"
cp -r "$LARAVEL_DIR" "$WWW/clients/php-laravel"
cp -r "$ROOT/clients/php-wordpress" "$WWW/clients/php-wordpress"
rm -rf "$WWW/clients/php-laravel/tests" "$WWW/clients/php-wordpress/tests"
# The two WordPress sites share Debian's themes and plugins, and the must-use plugin that counts queries on request;
# only the tether one has the drop-in.
for site in native tether; do
	for d in themes plugins languages; do
		ln -s "/usr/share/wordpress/wp-content/$d" "$WWW/wp/content-$site/$d"
	done
	ln -s "$WWW/wp/mu-plugins" "$WWW/wp/content-$site/mu-plugins"
done
ln -s "$WWW/clients/php-wordpress/db.php" "$WWW/wp/content-tether/db.php"
cat >"$WWW/config.php" <<EOF
<?php
// Written by bench/apps/run.sh for one run: where the pages find everything (read by the pages, the setup scripts
// and bench.php).
return [
    'db_name' => '$DB',
    'mysql_socket' => '$MARIADB_SOCKET',
    'tether_socket' => '$TETHER_SOCKET',
    'tether_backend' => 'maria',
    'tether_pool' => $POOL,
    'www' => '$WWW',
    // Database users by role (password = name).
    'users' => ['wp_native' => 'wp_native', 'lv_native' => 'lv_native', 'lv_persistent' => 'lv_persistent', 'tetherd' => 'tetherd'],
];
EOF
chmod -R a+rX "$WWW"
runuser -u www-data -- test -r "$WWW/config.php" || die "www-data cannot read $WWW"

log "app bench: installing WordPress and loading the Laravel tables"
php bench/apps/setup-wordpress.php "$WWW/config.php" || die "WordPress setup failed"
php bench/apps/setup-laravel.php "$WWW/config.php" || die "Laravel setup failed"

# ---------------------------------------------------------------------------------------------------------------
# tetherd

cat >"$APPS/tetherd/tetherd.toml" <<EOF
# Written by bench/apps/run.sh for one benchmark run.
[server]
socket = "$TETHER_SOCKET"
socket_mode = "0660"
socket_group = "www-data"
default_backend = "maria"

[log]
level = "warn"

# Table versions for wp-tether-local (the PHP client's local cache).
[cache]
local = true

[backends.maria]
type = "mysql"
dsn = "tetherd:tetherd@unix($MARIADB_SOCKET)/$DB"
max_conns = $POOL
min_conns = $POOL
EOF
log "tetherd: starting (pool $POOL)"
bin/tetherd -config "$APPS/tetherd/tetherd.toml" </dev/null >"$APPS/tetherd/tetherd.log" 2>&1 &
TETHERD_PID=$!
echo "$TETHERD_PID" >"$APPS/tetherd/tetherd.pid"
await tetherd "$TETHERD_PID" "$APPS/tetherd/tetherd.log" 15 test -S "$TETHER_SOCKET"

# ---------------------------------------------------------------------------------------------------------------
# One phase per web server: start it, run bench.php against it, stop it (its workers' persistent connections close
# with it, so each phase counts only its own).

start_apache() {
	APACHE_PORT=$(free_port "${BENCH_APPS_APACHE_PORT:-18181}")
	render bench/apps/conf/apache2.conf "$APPS/apache/apache2.conf" DIR="$APPS/apache" PORT="$APACHE_PORT" \
		HTDOCS="$WWW/htdocs" WORKERS="$APACHE_WORKERS"
	log "apache2: starting prefork + mod_php on 127.0.0.1:$APACHE_PORT ($APACHE_WORKERS workers)"
	# Its own session: on stop, apache2 signals its whole process group, which would otherwise include this script.
	setsid apache2 -f "$APPS/apache/apache2.conf" -DFOREGROUND </dev/null >"$APPS/apache/stdout.log" 2>&1 &
	APACHE_PID=$!
	await apache2 "$APACHE_PID" "$APPS/apache/error.log" 30 curl -fsS -o /dev/null "http://127.0.0.1:$APACHE_PORT/empty.php"
	await "apache2 workers" "$APACHE_PID" "$APPS/apache/error.log" 30 has_children "$APACHE_PID" "$APACHE_WORKERS"
	URL=http://127.0.0.1:$APACHE_PORT WEB_PIDS=$APACHE_PID WORKERS=$APACHE_WORKERS WEB_LOG=$APPS/apache/error.log
}

start_nginx() {
	NGINX_PORT=$(free_port "${BENCH_APPS_NGINX_PORT:-18180}")
	local fpm_sock=$APPS/run/php-fpm.sock
	check_socket_path "$fpm_sock"
	# ab speaks HTTP/1.0: nginx keeps such a connection alive only after a Content-Length (bench/web's reason).
	cp bench/web/conf/content-length.php "$WWW/content-length.php"
	chmod a+r "$WWW/content-length.php"
	render bench/apps/conf/php-fpm.conf "$APPS/fpm/php-fpm.conf" DIR="$APPS/fpm" FPM_SOCKET="$fpm_sock" \
		CHILDREN="$FPM_CHILDREN" PREPEND="$WWW/content-length.php"
	log "php-fpm: starting pm = static with $FPM_CHILDREN workers"
	php-fpm8.2 --nodaemonize --fpm-config "$APPS/fpm/php-fpm.conf" </dev/null >"$APPS/fpm/stdout.log" 2>&1 &
	FPM_PID=$!
	await php-fpm "$FPM_PID" "$APPS/fpm/error.log" 30 test -S "$fpm_sock"
	await "php-fpm workers" "$FPM_PID" "$APPS/fpm/error.log" 30 has_children "$FPM_PID" "$FPM_CHILDREN"
	render bench/apps/conf/nginx.conf "$APPS/nginx/nginx.conf" DIR="$APPS/nginx" PORT="$NGINX_PORT" \
		HTDOCS="$WWW/htdocs" FPM_SOCKET="$fpm_sock"
	log "nginx: starting on 127.0.0.1:$NGINX_PORT"
	nginx -p "$APPS/nginx" -c "$APPS/nginx/nginx.conf" -e "$APPS/nginx/error.log" </dev/null >"$APPS/nginx/stdout.log" 2>&1 &
	NGINX_PID=$!
	await nginx "$NGINX_PID" "$APPS/nginx/error.log" 30 curl -fsS -o /dev/null "http://127.0.0.1:$NGINX_PORT/empty.php"
	URL=http://127.0.0.1:$NGINX_PORT WEB_PIDS="$NGINX_PID $FPM_PID" WORKERS=$FPM_CHILDREN WEB_LOG=$APPS/fpm/error.log
}

if [[ "$SERVE" == 1 ]]; then
	urls=()
	for server in ${SERVERS//,/ }; do
		"start_$server"
		urls+=("$server $URL/{wp-native/,wp-tether/,wp-tether-persistent/,wp-tether-cached/,wp-tether-local/,laravel-native.php,laravel-persistent.php,laravel-tether.php}")
	done
	{
		echo "==> app bench: serving (Ctrl-C stops everything)"
		printf '    %s\n' "${urls[@]}"
		echo "    tetherd     pid $TETHERD_PID, socket $TETHER_SOCKET, log $APPS/tetherd/tetherd.log"
		echo "    MariaDB     pid $MARIADB_PID, socket $MARIADB_SOCKET (root, no password), database $DB"
	} >&2
	sleep infinity &
	SLEEP_PID=$!
	wait "$SLEEP_PID" || true
	exit 0
fi

export BENCH_APPS_CONFIG=$WWW/config.php TETHERD_PID MARIADB_PID
export CLK_TCK=${CLK_TCK:-$(getconf CLK_TCK)}
phase_files=()
for server in ${SERVERS//,/ }; do
	"start_$server"
	log "app bench: $server: running bench/apps/bench.php$([[ "$QUICK" == 1 ]] && echo " (quick)")"
	rc=0
	bench_run_bg php -d memory_limit=1G bench/apps/bench.php phase --server "$server" --url "$URL" --web-pids "$WEB_PIDS" \
		--workers "$WORKERS" --out "$APPS/results/$server.json" "${QUICK_ARGS[@]}" "${BENCH_ARGS[@]}" || rc=$?
	if ((rc != 0)); then
		tail_file "$WEB_LOG" 20
		die "bench/apps/bench.php failed against $server (exit $rc); logs in $APPS"
	fi
	pid_alive "$TETHERD_PID" || { tail_file "$APPS/tetherd/tetherd.log"; die "tetherd died during the $server phase"; }
	stop_web
	phase_files+=("$APPS/results/$server.json")
done
warn_logged "$APPS/tetherd/tetherd.log"

# ---------------------------------------------------------------------------------------------------------------
# Report

BENCH_APPS_CMD=$(bench_cmd bench/apps/run.sh)
export BENCH_APPS_CMD BENCH_APPS_DATE=$BENCH_DATE BENCH_APPS_LOAD_BEFORE=$LOAD_BEFORE
BENCH_APPS_LOAD_AFTER=$(cut -d' ' -f1 /proc/loadavg)
export BENCH_APPS_WORKERS="apache2 prefork: $APACHE_WORKERS workers; php-fpm: pm = static, $FPM_CHILDREN workers"
export BENCH_APPS_POOL=$POOL
BENCH_APPS_MARIADB_VERSION=$(mariadb_version)
export BENCH_APPS_LOAD_AFTER BENCH_APPS_MARIADB_VERSION
stop_all
php bench/apps/bench.php report --json "$APPS/results/results.json" "${phase_files[@]}" >"$APPS/results/section.md"
cat "$APPS/results/section.md"

if [[ "$WRITE" == 1 ]]; then
	replace_doc_section "$DOC" app-bench "$APPS/results/section.md"
	log "app bench: wrote the results into docs/benchmarks.md"
fi
log "app bench: done in $(since "$T0")s"
