# shellcheck shell=bash
# scripts/lib/integration.sh: a tetherd of its own for one PHP integration's tests (clients/php-*), on databases of
# its own, so that integrations can run side by side against the same MariaDB and PostgreSQL.
#
#   source scripts/lib/databases.sh; source scripts/lib/integration.sh
#   integration_start NAME    # needs MARIADB_SOCKET and PG_SOCKET_DIR + PG_PORT (scripts/lib/databases.sh)
#   ... phpunit ...
#   integration_stop          # SIGTERM tetherd; returns 1 unless it exited 0
#
# integration_start drops and creates the database tether_NAME on both servers (owned by / granted to the user
# `tether`, password `tether`), writes $ROOT/var/it-NAME/tetherd.toml with two backends, starts bin/tetherd (built
# by the caller) and exports, for the tests:
#   TETHER_SOCKET               the tetherd socket
#   TETHER_IT_MYSQL_BACKEND     "mysql"  (MariaDB, database tether_NAME)
#   TETHER_IT_PGSQL_BACKEND     "pgsql"  (PostgreSQL, database tether_NAME)
#   TETHER_IT_MYSQL_SOCKET, TETHER_IT_PGSQL_HOST (socket dir), TETHER_IT_PGSQL_PORT, TETHER_IT_DB (tether_NAME),
#   TETHER_IT_USER, TETHER_IT_PASSWORD: for the same databases reached directly (mysqli, PDO, pg), the baseline
#   the tests compare Tether's answers with (tests never need root).
#   TETHER_IT_DIR               var/it-NAME (logs, config)
#   TETHERD_PID

integration_start() {
	local name=${1:?integration_start: NAME required}
	: "${MARIADB_SOCKET:?integration_start: MARIADB_SOCKET not set (start MariaDB with databases.sh)}"
	: "${PG_SOCKET_DIR:?integration_start: PG_SOCKET_DIR not set}" "${PG_PORT:?integration_start: PG_PORT not set}"
	local root db=tether_$name
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	local dir=$root/var/it-$name
	mkdir -p "$dir"
	[[ -x "$root/bin/tetherd" ]] || die "integration_start: $root/bin/tetherd not built (go build -o bin/tetherd ./cmd/tetherd)"

	local client psql
	client=$(_db_bin mariadb mysql)
	"$client" --no-defaults --socket="$MARIADB_SOCKET" --user=root --batch <<SQL || die "integration $name: creating MariaDB database $db failed"
DROP DATABASE IF EXISTS \`$db\`;
CREATE DATABASE \`$db\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
GRANT ALL PRIVILEGES ON \`$db\`.* TO 'tether'@'localhost';
GRANT ALL PRIVILEGES ON \`$db\`.* TO 'tether'@'%';
SQL
	psql=$(_db_bin psql)
	_pg "$psql" -X -q -v ON_ERROR_STOP=1 -h "$PG_SOCKET_DIR" -p "$PG_PORT" -U postgres -d postgres \
		-c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" \
		-c "CREATE DATABASE \"$db\" OWNER \"tether\"" >/dev/null || die "integration $name: creating PostgreSQL database $db failed"

	local sock=$dir/tether.sock
	rm -f "$sock"
	cat >"$dir/tetherd.toml" <<TOML
# Written by scripts/lib/integration.sh for the $name integration's tests; rewritten on every run.
[server]
socket = "$sock"
socket_mode = "0660"
default_timeout = "30s"
tx_idle_timeout = "60s"
shutdown_grace = "10s"
default_backend = "mysql"

[log]
level = "info"
format = "text"

[cache]
local = true                # table versions for the PHP client's local_cache (the integrations' local-cache tests)

[backends.mysql]
type = "mysql"
dsn = "tether:tether@unix($MARIADB_SOCKET)/$db"
max_conns = 8

[backends.pgsql]
type = "postgres"
dsn = "host=$PG_SOCKET_DIR port=$PG_PORT user=tether password=tether dbname=$db sslmode=disable"
max_conns = 8
TOML
	# With TETHER_IT_REPLICAS=1: two backends with replicas on the replicated pairs (scripts/lib/replicas.sh's DSNs,
	# their tether_test database), for the tests of the frameworks' read/write switches (PHPUnit group replicas).
	if [[ "${TETHER_IT_REPLICAS:-}" == 1 ]]; then
		local v
		for v in TETHER_TEST_MYSQL_PRIMARY_DSN TETHER_TEST_MYSQL_REPLICA_DSN TETHER_TEST_POSTGRES_PRIMARY_DSN TETHER_TEST_POSTGRES_REPLICA_DSN; do
			[[ -n "${!v:-}" ]] || die "integration $name: TETHER_IT_REPLICAS=1 needs $v (start the pairs: scripts/lib/replicas.sh)"
		done
		cat >>"$dir/tetherd.toml" <<TOML

[backends.rmysql]
type = "mysql"
dsn = "$TETHER_TEST_MYSQL_PRIMARY_DSN"
replicas = ["$TETHER_TEST_MYSQL_REPLICA_DSN"]
max_conns = 8
max_replica_lag = "10s"
monitor_interval = "200ms"

[backends.rpgsql]
type = "postgres"
dsn = "$TETHER_TEST_POSTGRES_PRIMARY_DSN"
replicas = ["$TETHER_TEST_POSTGRES_REPLICA_DSN"]
max_conns = 8
max_replica_lag = "10s"
monitor_interval = "200ms"
TOML
		export TETHER_IT_RMYSQL_BACKEND=rmysql TETHER_IT_RPGSQL_BACKEND=rpgsql
	fi
	"$root/bin/tetherd" -config "$dir/tetherd.toml" </dev/null >"$dir/tetherd.log" 2>&1 &
	TETHERD_PID=$!
	local i
	for i in $(seq 200); do
		[[ -S "$sock" ]] && break
		pid_alive "$TETHERD_PID" || { tail_file "$dir/tetherd.log"; die "integration $name: tetherd exited at start"; }
		sleep 0.05
	done
	[[ -S "$sock" ]] || { tail_file "$dir/tetherd.log"; die "integration $name: tetherd socket did not appear"; }
	export TETHERD_PID TETHER_SOCKET=$sock TETHER_IT_DIR=$dir TETHER_IT_DB=$db \
		TETHER_IT_MYSQL_BACKEND=mysql TETHER_IT_PGSQL_BACKEND=pgsql \
		TETHER_IT_MYSQL_SOCKET=$MARIADB_SOCKET TETHER_IT_PGSQL_HOST=$PG_SOCKET_DIR TETHER_IT_PGSQL_PORT=$PG_PORT \
		TETHER_IT_USER=tether TETHER_IT_PASSWORD=tether
	log "integration $name: tetherd pid $TETHERD_PID on $sock (databases $db)"
}

integration_stop() {
	[[ -n "${TETHERD_PID:-}" ]] || return 0
	local pid=$TETHERD_PID rc=0
	TETHERD_PID=
	kill -TERM "$pid" 2>/dev/null || return 0
	wait_pid_exit "$pid" 20 || { kill -KILL "$pid" 2>/dev/null; return 1; }
	wait "$pid" 2>/dev/null || rc=$?
	return "$rc"
}
