# shellcheck shell=bash
# scripts/lib/databases.sh: throwaway MariaDB and PostgreSQL instances for the tests and the benchmarks.
#
# Source it from bash. It defines functions and touches nothing until one is called. It never uses the system
# instances: each server gets its own data directory, its own Unix socket and its own loopback port, and is stopped
# by the PID this shell started.
#
#   start_mariadb DIR    initialise a fresh MariaDB in DIR (which must not hold one yet) and start it.
#                        Sets MARIADB_PID, MARIADB_SOCKET, MARIADB_PORT, MARIADB_DSN (go-sql-driver/mysql format).
#                        Also sets MARIADB_DIR.
#   stop_mariadb         stop what start_mariadb started: SIGTERM, then SIGKILL after 30s. Safe to call twice or
#                        when nothing was started.
#   start_postgres DIR   the same for PostgreSQL (15 by default), run as the `postgres` user when we are root.
#                        Sets PG_PID, PG_DIR, PG_DATADIR, PG_SOCKET_DIR, PG_PORT, PG_DSN (pgx keyword format).
#   stop_postgres        pg_ctl stop -m fast; if that fails, SIGINT then SIGKILL by PID. Safe to call twice.
#   clean_db_dir DIR     stop the leftovers of an earlier run in DIR (a killed test run) and remove DIR. A process is
#                        stopped only if its pid file is in DIR and its working directory is the data dir in DIR.
#
# Each start creates database $TETHER_DB_NAME owned by (PostgreSQL) or fully granted to (MariaDB) the user
# $TETHER_DB_USER with password $TETHER_DB_PASSWORD, reachable on the Unix socket and on 127.0.0.1, and a second user
# ${TETHER_DB_USER}_pool with the same password and rights (MARIADB_POOL_DSN, PG_POOL_DSN, over the Unix socket): the
# tests that count a tetherd's sessions on the server run it as that user, apart from every other test.
#
# The servers are tuned for tests, not durability (PostgreSQL fsync=off, MariaDB flushes its log once a second).
#
# Environment, all optional:
#   TETHER_DB_NAME / TETHER_DB_USER / TETHER_DB_PASSWORD   tether_test / tether / tether
#   TETHER_MARIADB_PORT   first port to try (13306); the next free one is taken if it is busy
#   TETHER_PG_PORT        first port to try (15432)
#   TETHER_PG_BINDIR      /usr/lib/postgresql/15/bin
#   TETHER_DB_START_TIMEOUT   seconds to wait for a server to accept connections (60)
#   TETHER_MARIADB_OPTS   extra mariadbd options, word-split, appended last (so they win)
#   TETHER_PG_CONF        extra postgresql.conf lines, appended last (so they win)
#   TETHER_DB_REQUIRE_TLS 1: every TCP client must use TLS (MariaDB require_secure_transport, PostgreSQL hostssl
#                         only), as a database on another host is run; the Unix sockets stay open without TLS
#
# TLS: each server gets a certificate of its own, signed by a CA made for it (DIR/tls: ca.pem, server.pem,
# server-key.pem; for 127.0.0.1 and localhost), and serves TLS on TCP. A third user ${TETHER_DB_USER}_tls, same
# password and rights, may only come in over TLS (MariaDB REQUIRE SSL, PostgreSQL hostssl), whatever
# TETHER_DB_REQUIRE_TLS says, so the tests can prove a connection used it. MARIADB_TLS_CA / PG_TLS_CA name the CA.

[[ -n "${_TETHER_DATABASES_SH:-}" ]] && return 0
_TETHER_DATABASES_SH=1
# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

: "${TETHER_DB_NAME:=tether_test}"
: "${TETHER_DB_USER:=tether}"
: "${TETHER_DB_PASSWORD:=tether}"
: "${TETHER_PG_BINDIR:=/usr/lib/postgresql/15/bin}"
: "${TETHER_DB_START_TIMEOUT:=60}"

# _db_bin NAME... prints the path of the first NAME found on PATH or in /usr/sbin and /usr/bin.
_db_bin() {
	local n d
	for n in "$@"; do
		command -v "$n" 2>/dev/null && return 0
		for d in /usr/sbin /usr/bin; do
			[[ -x "$d/$n" ]] && { printf '%s\n' "$d/$n"; return 0; }
		done
	done
	die "none of $* is installed (run scripts/install-deps.sh)"
}

# _make_certs DIR: a CA and a server certificate it signs, for 127.0.0.1 and localhost, in DIR (ca.pem, server.pem,
# server-key.pem), EC P-256 keys (fast to make and to handshake). Quiet unless openssl fails.
_make_certs() {
	local dir=$1 openssl
	openssl=$(_db_bin openssl)
	mkdir -p "$dir"
	if ! {
		"$openssl" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 -subj "/CN=tether test CA" \
			-keyout "$dir/ca-key.pem" -out "$dir/ca.pem" &&
			"$openssl" req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
				-keyout "$dir/server-key.pem" -out "$dir/server.csr" &&
			"$openssl" x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca-key.pem" -CAcreateserial \
				-days 3650 -extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n') -out "$dir/server.pem"
	} >"$dir/openssl.log" 2>&1; then
		tail_file "$dir/openssl.log"
		die "making TLS certificates in $dir failed"
	fi
	chmod 0644 "$dir/ca.pem" "$dir/server.pem"
	chmod 0600 "$dir/server-key.pem" "$dir/ca-key.pem"
}

# ---------------------------------------------------------------------------------------------------------------
# MariaDB

start_mariadb() {
	local dir=${1:?start_mariadb: DIR required}
	[[ -z "${MARIADB_PID:-}" ]] || die "start_mariadb: already running (pid $MARIADB_PID)"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	[[ ! -e "$dir/data" ]] || die "start_mariadb: $dir/data exists; run clean_db_dir first"

	local mariadbd install_db admin client port sock t0
	mariadbd=$(_db_bin mariadbd mysqld)
	install_db=$(_db_bin mariadb-install-db mysql_install_db)
	admin=$(_db_bin mariadb-admin mysqladmin)
	client=$(_db_bin mariadb mysql)
	port=$(free_port "${TETHER_MARIADB_PORT:-13306}")
	sock=$dir/mysqld.sock
	check_socket_path "$sock"
	# mariadbd refuses to run as root unless told to; as another user it runs as that user.
	local as_user=()
	is_root && as_user=(--user=root)

	t0=$(now)
	log "mariadb: initialising $dir/data"
	# --no-defaults everywhere: the system's /etc/mysql files point at the system instance.
	if ! "$install_db" --no-defaults --datadir="$dir/data" "${as_user[@]}" \
		--auth-root-authentication-method=normal --skip-test-db --skip-name-resolve >"$dir/install.log" 2>&1; then
		tail_file "$dir/install.log"
		die "mariadb: mariadb-install-db failed"
	fi

	# TETHER_MARIADB_BINLOG=1: the binary log on, in row format, for tetherd's change stream (the tests); off
	# otherwise (the benchmarks measure without its cost, as tetherd's users without replicas would run).
	local binlog=(--skip-log-bin)
	if [[ "${TETHER_MARIADB_BINLOG:-0}" == 1 ]]; then
		binlog=(--log-bin="$dir/data/binlog" --binlog-format=ROW --server-id=1 --log-bin-trust-function-creators=1)
	fi
	_make_certs "$dir/tls"
	local tls=(--ssl-ca="$dir/tls/ca.pem" --ssl-cert="$dir/tls/server.pem" --ssl-key="$dir/tls/server-key.pem")
	[[ "${TETHER_DB_REQUIRE_TLS:-0}" == 1 ]] && tls+=(--require-secure-transport=ON)
	log "mariadb: starting on $sock and 127.0.0.1:$port"
	# shellcheck disable=SC2086 # TETHER_MARIADB_OPTS is a word list on purpose
	"$mariadbd" --no-defaults "${as_user[@]}" \
		--datadir="$dir/data" --socket="$sock" --pid-file="$dir/mysqld.pid" --log-error="$dir/mysqld.log" \
		--bind-address=127.0.0.1 --port="$port" --skip-name-resolve "${binlog[@]}" "${tls[@]}" \
		--character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci \
		--max-connections=500 --innodb-buffer-pool-size=128M --innodb-flush-log-at-trx-commit=2 \
		${TETHER_MARIADB_OPTS:-} </dev/null >>"$dir/mysqld.log" 2>&1 &
	MARIADB_PID=$!
	MARIADB_DIR=$dir MARIADB_SOCKET=$sock MARIADB_PORT=$port

	local deadline=$((SECONDS + TETHER_DB_START_TIMEOUT))
	# ping succeeds as soon as the server answers, even before it would let this user in.
	until "$admin" --no-defaults --socket="$sock" --user=root --connect-timeout=2 ping >/dev/null 2>&1; do
		if ! pid_alive "$MARIADB_PID"; then
			tail_file "$dir/mysqld.log"
			MARIADB_PID=
			die "mariadb: mariadbd exited during startup"
		fi
		if ((SECONDS >= deadline)); then
			tail_file "$dir/mysqld.log"
			die "mariadb: not accepting connections after ${TETHER_DB_START_TIMEOUT}s"
		fi
		sleep 0.2
	done

	# Anonymous users would shadow 'tether'@'localhost' on the socket; drop any.
	local u=$TETHER_DB_USER p=$TETHER_DB_PASSWORD db=$TETHER_DB_NAME
	"$client" --no-defaults --socket="$sock" --user=root --batch <<SQL || die "mariadb: creating $db and $u failed"
DELETE FROM mysql.global_priv WHERE User = '';
FLUSH PRIVILEGES;
CREATE DATABASE \`$db\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE USER '$u'@'localhost' IDENTIFIED BY '$p';
CREATE USER '$u'@'%' IDENTIFIED BY '$p';
GRANT ALL PRIVILEGES ON \`$db\`.* TO '$u'@'localhost';
GRANT ALL PRIVILEGES ON \`$db\`.* TO '$u'@'%';
GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '$u'@'localhost';
CREATE USER '${u}_pool'@'localhost' IDENTIFIED BY '$p';
GRANT ALL PRIVILEGES ON \`$db\`.* TO '${u}_pool'@'localhost';
CREATE USER '${u}_tls'@'%' IDENTIFIED BY '$p' REQUIRE SSL;
GRANT ALL PRIVILEGES ON \`$db\`.* TO '${u}_tls'@'%';
SQL
	MARIADB_DSN="$u:$p@unix($sock)/$db"
	MARIADB_POOL_DSN="${u}_pool:$p@unix($sock)/$db"
	MARIADB_TLS_CA=$dir/tls/ca.pem
	export MARIADB_PID MARIADB_DIR MARIADB_SOCKET MARIADB_PORT MARIADB_DSN MARIADB_POOL_DSN MARIADB_TLS_CA
	log "mariadb: ready in $(since "$t0")s (pid $MARIADB_PID, init+start+grants)"
}

stop_mariadb() {
	[[ -n "${MARIADB_PID:-}" ]] || return 0
	log "mariadb: stopping pid $MARIADB_PID"
	# mariadbd shuts down cleanly on SIGTERM (flushes InnoDB, removes socket and pid file).
	stop_pid "$MARIADB_PID" mariadbd 30
	MARIADB_PID=
}

# ---------------------------------------------------------------------------------------------------------------
# PostgreSQL

# _pg CMD... runs CMD as the user that owns the PostgreSQL instance: `postgres` when we are root (initdb and postgres
# refuse to run as root), ourselves otherwise.
# It runs from / because the postgres user may not be allowed into our working directory, and initdb and pg_ctl
# fail when they cannot read it.
_pg() {
	if is_root; then
		(cd / && exec "$(_db_bin runuser)" -u postgres -- "$@")
	else
		"$@"
	fi
}

start_postgres() {
	local dir=${1:?start_postgres: DIR required}
	[[ -z "${PG_PID:-}" ]] || die "start_postgres: already running (pid $PG_PID)"
	local bin=$TETHER_PG_BINDIR
	[[ -x "$bin/initdb" && -x "$bin/pg_ctl" ]] || die "postgres: no initdb/pg_ctl in $bin (set TETHER_PG_BINDIR)"
	local isready psql
	isready=$(_db_bin pg_isready)
	psql=$(_db_bin psql)
	[[ ! -e "$dir" || -z "$(ls -A "$dir" 2>/dev/null)" ]] || die "start_postgres: $dir is not empty; run clean_db_dir first"

	# The instance's files must belong to the user that runs it. When that user cannot reach DIR (a checkout under
	# /root, say), put the instance in /tmp and leave DIR as a symlink to it, so clean_db_dir finds it next time.
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	if is_root; then
		getent passwd postgres >/dev/null || die "postgres: no 'postgres' user (is the postgresql package installed?)"
		chown postgres: "$dir"
		if ! _pg test -w "$dir" -a -x "$dir"; then
			local tmp
			tmp=$(mktemp -d /tmp/tether-pg.XXXXXX)
			chown postgres: "$tmp"
			rmdir "$dir"
			ln -s "$tmp" "$dir"
			log "postgres: the postgres user cannot reach $dir; using $tmp (symlinked from $dir)"
			dir=$tmp
		fi
	fi

	local port sockdir=$dir/run datadir=$dir/data t0
	port=$(free_port "${TETHER_PG_PORT:-15432}")
	check_socket_path "$sockdir/.s.PGSQL.$port"
	_pg mkdir -m 0755 "$sockdir"

	t0=$(now)
	log "postgres: initialising $datadir"
	# initdb writes its log as the instance user, into a directory only that user may write.
	if ! _pg "$bin/initdb" -D "$datadir" -U postgres -E UTF8 --no-locale --no-sync \
		--auth-local=trust --auth-host=scram-sha-256 >"$dir/initdb.log" 2>&1; then
		tail_file "$dir/initdb.log"
		die "postgres: initdb failed"
	fi
	# The superuser may come in over the socket without a password (to set up); everyone else needs theirs, so the
	# tests exercise password authentication as production would.
	# ${u}_tls may only come in over TLS; with TETHER_DB_REQUIRE_TLS=1 so must everyone on TCP.
	local tcp=host
	[[ "${TETHER_DB_REQUIRE_TLS:-0}" == 1 ]] && tcp=hostssl
	_pg tee "$datadir/pg_hba.conf" >/dev/null <<EOF2
# TYPE     DATABASE  USER              ADDRESS        METHOD
local      all       postgres                         trust
local      all       all                              scram-sha-256
hostnossl  all       ${TETHER_DB_USER}_tls 127.0.0.1/32   reject
$tcp       all       all               127.0.0.1/32   scram-sha-256
EOF2
	# The key must belong to the instance's user and be readable by it alone.
	_make_certs "$dir/tls"
	_pg mkdir -m 0700 "$datadir/tls"
	local f
	for f in ca.pem server.pem server-key.pem; do
		_pg tee "$datadir/tls/$f" <"$dir/tls/$f" >/dev/null
	done
	_pg chmod 0600 "$datadir/tls/server-key.pem"
	_pg tee -a "$datadir/postgresql.conf" >/dev/null <<EOF2

# --- tether throwaway instance (scripts/lib/databases.sh) ---
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$sockdir'
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
ssl = on
ssl_cert_file = '$datadir/tls/server.pem'
ssl_key_file = '$datadir/tls/server-key.pem'
ssl_ca_file = '$datadir/tls/ca.pem'
${TETHER_PG_CONF:-}
EOF2
	# TETHER_PG_LOGICAL=1: logical replication on, for tetherd's change stream (the tests): wal_level logical, and
	# the user may replicate.
	if [[ "${TETHER_PG_LOGICAL:-0}" == 1 ]]; then
		echo "wal_level = logical" | _pg tee -a "$datadir/postgresql.conf" >/dev/null
	fi

	log "postgres: starting on $sockdir and 127.0.0.1:$port"
	# -W: do not wait here; the loop below waits, watches the process and shows the log on failure.
	if ! _pg "$bin/pg_ctl" -D "$datadir" -l "$dir/postgres.log" -W -s start; then
		tail_file "$dir/postgres.log"
		die "postgres: pg_ctl start failed"
	fi
	PG_DIR=$dir PG_DATADIR=$datadir PG_SOCKET_DIR=$sockdir PG_PORT=$port PG_PID=

	local deadline=$((SECONDS + TETHER_DB_START_TIMEOUT))
	until "$isready" -q -h "$sockdir" -p "$port" -t 2; do
		[[ -z "$PG_PID" && -r "$datadir/postmaster.pid" ]] && PG_PID=$(head -n 1 "$datadir/postmaster.pid")
		if [[ -n "$PG_PID" ]] && ! pid_alive "$PG_PID"; then
			tail_file "$dir/postgres.log"
			PG_PID=
			die "postgres: postmaster exited during startup"
		fi
		if ((SECONDS >= deadline)); then
			tail_file "$dir/postgres.log"
			die "postgres: not accepting connections after ${TETHER_DB_START_TIMEOUT}s"
		fi
		sleep 0.2
	done
	[[ -n "$PG_PID" ]] || PG_PID=$(head -n 1 "$datadir/postmaster.pid")

	local u=$TETHER_DB_USER p=$TETHER_DB_PASSWORD db=$TETHER_DB_NAME
	"$psql" -X -q -v ON_ERROR_STOP=1 -h "$sockdir" -p "$port" -U postgres -d postgres \
		-c "CREATE ROLE \"$u\" LOGIN PASSWORD '$p'" \
		-c "CREATE DATABASE \"$db\" OWNER \"$u\"" \
		-c "CREATE ROLE \"${u}_pool\" LOGIN PASSWORD '$p' IN ROLE \"$u\"" \
		-c "CREATE ROLE \"${u}_tls\" LOGIN PASSWORD '$p' IN ROLE \"$u\"" || die "postgres: creating $db and $u failed"
	if [[ "${TETHER_PG_LOGICAL:-0}" == 1 ]]; then
		"$psql" -X -q -v ON_ERROR_STOP=1 -h "$sockdir" -p "$port" -U postgres -d "$db" \
			-c "ALTER ROLE \"$u\" REPLICATION" || die "postgres: setting up logical replication failed"
	fi
	PG_DSN="host=$sockdir port=$port user=$u password=$p dbname=$db sslmode=disable"
	PG_POOL_DSN="host=$sockdir port=$port user=${u}_pool password=$p dbname=$db sslmode=disable"
	PG_TLS_CA=$dir/tls/ca.pem
	export PG_PID PG_DIR PG_DATADIR PG_SOCKET_DIR PG_PORT PG_DSN PG_POOL_DSN PG_TLS_CA
	log "postgres: ready in $(since "$t0")s (pid $PG_PID, initdb+start+role)"
}

stop_postgres() {
	[[ -n "${PG_PID:-}" ]] || return 0
	log "postgres: stopping pid $PG_PID"
	if ! _pg "$TETHER_PG_BINDIR/pg_ctl" -D "$PG_DATADIR" -m fast -w -t 30 -s stop; then
		warn "pg_ctl stop failed; stopping pid $PG_PID directly"
		stop_pid "$PG_PID" postgres 10 INT # SIGINT: fast shutdown, as -m fast
	fi
	PG_PID=
}

# ---------------------------------------------------------------------------------------------------------------
# Cleaning up after an earlier run

# _stop_leftover PIDFILE DATADIR NAME SIGNAL stops the process PIDFILE names if its working directory is DATADIR
# (mariadbd and postgres both chdir into their data dir), so a recycled pid never hits an unrelated process.
_stop_leftover() {
	local pidfile=$1 datadir=$2 name=$3 sig=$4 pid
	[[ -r "$pidfile" ]] || return 0
	pid=$(head -n 1 "$pidfile" 2>/dev/null) || return 0
	if pid_alive "$pid" && pid_cwd_is "$pid" "$datadir"; then
		log "stopping $name left over from an earlier run (pid $pid, $datadir)"
		stop_pid "$pid" "$name" 30 "$sig"
	fi
}

clean_db_dir() {
	local dir=${1:?clean_db_dir: DIR required} f real
	[[ -e "$dir" || -L "$dir" ]] || return 0
	# Leftover servers: look for their pid files at the depths start_* puts them (through /tmp symlinks too).
	while IFS= read -r -d '' f; do
		case $f in
		*/mysqld.pid) _stop_leftover "$f" "$(dirname "$f")/data" mariadbd TERM ;;
		*/postmaster.pid) _stop_leftover "$f" "$(dirname "$f")" postgres INT ;; # fast shutdown
		esac
	done < <(find -L "$dir" -maxdepth 3 \( -name mysqld.pid -o -name postmaster.pid \) -print0 2>/dev/null)
	# A PostgreSQL instance moved to /tmp is a symlink; remove its target too, but only our own kind.
	while IFS= read -r -d '' f; do
		real=$(readlink -f "$f")
		[[ "$real" == /tmp/tether-pg.* ]] && rm -rf -- "$real"
	done < <(find "$dir" -maxdepth 2 -type l -print0 2>/dev/null)
	rm -rf -- "$dir"
}
