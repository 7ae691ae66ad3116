#!/usr/bin/env bash
# bench/wpqueries/run.sh: tetherd's and PHP's CPU per query for the WordPress front page's real queries, and for a
# page of 20 prepared point reads, through Tether against natively (wpdb on mysqli, PDO persistent); optionally two
# builds side by side (--before REV: tetherd and the PHP clients of REV against the working tree's), rounds
# interleaved. Output: bench/wpqueries/driver.php's table per build (run it alone for what it measures).
#
#   [MARIADB_SOCKET=/path/mysqld.sock] bash bench/wpqueries/run.sh [--before REV] [--rounds R] [--pages N] [--per-query]
#
# It starts a throwaway MariaDB of its own under var/wpq/mariadb (scripts/lib/databases.sh), or uses the one at
# MARIADB_SOCKET, where root must log in without a password (a dev database); it creates the database wpq and the users wp_native and tetherd there (password =
# name), installs bench/apps's WordPress into it (bench/apps/setup-wordpress.php) unless there already, renders the
# front page twice natively and keeps the second page's statements (capture.php), starts tetherd (pool 4) on a
# socket under var/wpq/, and runs driver.php. Everything it writes is under var/wpq/; it stops what it started.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
BEFORE=
ROUNDS=5
PAGES=200
PER_QUERY=
while (($#)); do
	case $1 in
	--before) BEFORE=${2:?--before needs a revision}; shift ;;
	--rounds) ROUNDS=${2:?}; shift ;;
	--pages) PAGES=${2:?}; shift ;;
	--per-query) PER_QUERY=--per-query ;;
	*) echo "usage: bash bench/wpqueries/run.sh [--before REV] [--rounds R] [--pages N] [--per-query]" >&2; exit 2 ;;
	esac
	shift
done
DIR=$ROOT/var/wpq
mkdir -p "$DIR"
PIDS=()
OWN_DB=
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	if [[ -n "$OWN_DB" ]]; then stop_mariadb; fi
}
trap cleanup EXIT
log() { echo "==> $*" >&2; }
if [[ -z "${MARIADB_SOCKET:-}" ]]; then
	# No MariaDB given: a throwaway one of its own (scripts/lib/databases.sh), stopped on exit.
	# shellcheck source=scripts/lib/databases.sh
	source "$ROOT/scripts/lib/databases.sh"
	clean_db_dir "$DIR/mariadb"
	OWN_DB=1
	start_mariadb "$DIR/mariadb"
fi

mariadb --no-defaults --socket="$MARIADB_SOCKET" -uroot --batch <<SQL
CREATE DATABASE IF NOT EXISTS wpq;
CREATE USER IF NOT EXISTS 'wp_native'@'localhost' IDENTIFIED BY 'wp_native';
GRANT ALL ON wpq.* TO 'wp_native'@'localhost';
CREATE USER IF NOT EXISTS 'tetherd'@'localhost' IDENTIFIED BY 'tetherd';
GRANT ALL ON wpq.* TO 'tetherd'@'localhost';
SQL

# stack NAME CLIENTS_DIR TETHERD_BIN: a document tree var/wpq/NAME/www (bench/apps's WordPress configuration, its
# drop-in from CLIENTS_DIR) and a tetherd on var/wpq/NAME/tether.sock; sets PID_NAME.
stack() {
	local name=$1 clients=$2 bin=$3 d=$DIR/$1
	rm -rf "$d/www"
	mkdir -p "$d"
	cp -r bench/apps/www "$d/www"
	mkdir -p "$d/www/wp/content-native" "$d/www/wp/content-tether"
	for site in native tether; do
		for x in themes plugins languages; do ln -s "/usr/share/wordpress/wp-content/$x" "$d/www/wp/content-$site/$x"; done
		ln -s "$d/www/wp/mu-plugins" "$d/www/wp/content-$site/mu-plugins"
	done
	ln -s "$clients/php-wordpress/db.php" "$d/www/wp/content-tether/db.php"
	cat >"$d/www/config.php" <<PHP
<?php
return [
    'db_name' => 'wpq',
    'mysql_socket' => '$MARIADB_SOCKET',
    'tether_socket' => '$d/tether.sock',
    'tether_backend' => 'maria',
    'tether_pool' => 4,
    'www' => '$d/www',
    'users' => ['wp_native' => 'wp_native', 'lv_native' => 'lv_native', 'lv_persistent' => 'lv_persistent', 'tetherd' => 'tetherd'],
];
PHP
	cat >"$d/tetherd.toml" <<TOML
[server]
socket = "$d/tether.sock"
default_backend = "maria"
[log]
level = "warn"
[backends.maria]
type = "mysql"
dsn = "tetherd:tetherd@unix($MARIADB_SOCKET)/wpq"
max_conns = 4
min_conns = 4
TOML
	rm -f "$d/tether.sock"
	"$bin" -config "$d/tetherd.toml" </dev/null >"$d/tetherd.log" 2>&1 &
	PIDS+=($!)
	printf -v "PID_${name}" %s "$!"
	for _ in $(seq 100); do [[ -S "$d/tether.sock" ]] && return 0; sleep 0.1; done
	echo "tetherd ($name) did not start: $(cat "$d/tetherd.log")" >&2
	exit 1
}

log "building tetherd"
go build -o "$DIR/tetherd-after" ./cmd/tetherd
stack after "$ROOT/clients" "$DIR/tetherd-after"
if [[ -n "$BEFORE" ]]; then
	log "building tetherd and the PHP clients of $BEFORE"
	rm -rf "$DIR/before-src"
	mkdir -p "$DIR/before-src"
	git archive "$BEFORE" | tar -x -C "$DIR/before-src"
	(cd "$DIR/before-src" && go build -o "$DIR/tetherd-before" ./cmd/tetherd)
	stack before "$DIR/before-src/clients" "$DIR/tetherd-before"
fi

if ! mariadb --no-defaults --socket="$MARIADB_SOCKET" -uroot -N -e "SELECT 1 FROM wpq.wp_options LIMIT 1" 2>/dev/null | grep -q 1; then
	log "installing WordPress into wpq"
	php bench/apps/setup-wordpress.php "$DIR/after/www/config.php" >&2
fi
log "capturing the front page's queries"
php bench/wpqueries/capture.php "$DIR/after/www/config.php" >/dev/null 2>&1 || true # the first page writes options
php bench/wpqueries/capture.php "$DIR/after/www/config.php" >"$DIR/queries.json" 2>/dev/null
echo "front page: $(php -r 'echo count(json_decode(file_get_contents($argv[1])));' "$DIR/queries.json") queries"

PHP=(php -d opcache.enable_cli=1 -d memory_limit=1G)
if [[ -n "$PER_QUERY" ]]; then
	"${PHP[@]}" bench/wpqueries/driver.php "$DIR/after/www/config.php" "$DIR/queries.json" "$PID_after" --pages "$PAGES" --per-query
	exit 0
fi
if [[ -z "$BEFORE" ]]; then
	"${PHP[@]}" bench/wpqueries/driver.php "$DIR/after/www/config.php" "$DIR/queries.json" "$PID_after" --pages "$PAGES" --rounds "$ROUNDS"
	"${PHP[@]}" bench/wpqueries/driver.php "$DIR/after/www/config.php" "$DIR/queries.json" "$PID_after" --pages "$((PAGES / 2))" --rounds "$ROUNDS" --only page-native,page-tether
	exit 0
fi
# Before and after interleaved: one round of each in turn, each a process of its own (the two drop-ins are the same
# classes), then the median of each build's rounds.
rm -f "$DIR/before.jsonl" "$DIR/after.jsonl"
for ((r = 1; r <= ROUNDS; r++)); do
	for b in before after; do
		pid_var=PID_$b
		"${PHP[@]}" bench/wpqueries/driver.php "$DIR/$b/www/config.php" "$DIR/queries.json" "${!pid_var}" --pages "$PAGES" --rounds 1 --json >>"$DIR/$b.jsonl" 2>/dev/null
		"${PHP[@]}" bench/wpqueries/driver.php "$DIR/$b/www/config.php" "$DIR/queries.json" "${!pid_var}" --pages "$((PAGES / 2))" --rounds 1 --json --only page-native,page-tether >>"$DIR/$b.jsonl" 2>/dev/null
	done
	log "round $r/$ROUNDS done"
done
"${PHP[@]}" bench/wpqueries/driver.php --summary "$DIR/before.jsonl" "$DIR/after.jsonl"
