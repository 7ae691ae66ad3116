# shellcheck shell=bash
# scripts/lib/replicas.sh: throwaway replicated MariaDB and PostgreSQL pairs (a primary and one replica each) for
# the tests of replica monitoring, routing and failover (issue 21).
#
# Source it from bash (it sources databases.sh). It defines functions and touches nothing until one is called. Like
# databases.sh it never uses the system instances: each server has its own data directory, Unix socket and loopback
# port, and is stopped by the PID this shell started.
#
#   start_mariadb_pair DIR   a MariaDB primary (binary log in row format, GTID strict mode, semi-synchronous
#                            replication on as master, waiting for the replica's ack AFTER_SYNC: a commit is answered
#                            only once the replica has it, and a primary killed before the ack drops it from its binary
#                            log when it restarts as a semi-sync slave) in DIR/primary and a replica in DIR/replica replicating from it
#                            with GTID (CHANGE MASTER TO ... MASTER_USE_GTID=slave_pos), read_only=1, semi-sync on as
#                            slave. Returns once the replica runs both threads and the primary counts it as a semi-sync
#                            client. Sets MARIADB_PRIMARY_{PID,SOCKET,PORT}, MARIADB_REPLICA_{PID,SOCKET,PORT} and the
#                            exported variables below.
#   stop_mariadb_pair        stop both by PID (replica first), and a server a test started again in the same data
#                            directory (a killed primary restarted as a replica) by its pid file; safe to call twice or
#                            when nothing was started.
#   mariadb_pair_wait [SECS] wait (10 s) until the replica has applied the primary's @@gtid_binlog_pos
#                            (MASTER_GTID_WAIT); fails on timeout.
#   mariadb_pair_promote     make the replica a primary: STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only=0.
#   start_postgres_pair DIR  a PostgreSQL primary in DIR/primary (started by start_postgres, replication allowed on its
#                            socket) and a streaming replica in DIR/replica made with `pg_basebackup -R` on its own
#                            port (hot standby). Returns once the primary's pg_stat_replication shows it streaming.
#                            Sets PG_PRIMARY_{PID,DIR,DATADIR,SOCKET_DIR,PORT}, PG_REPLICA_{...} and the exports below.
#   stop_postgres_pair       pg_ctl stop -m fast on each (replica first), SIGINT then SIGKILL by PID if that fails.
#   postgres_pair_wait [SECS] wait (10 s) until the replica's pg_last_wal_replay_lsn() reaches the primary's
#                            pg_current_wal_insert_lsn() (every commit answered so far, also with synchronous_commit off); fails on timeout.
#   postgres_pair_promote    SELECT pg_promote() on the replica (waits until it is out of recovery).
#
# Exported (go-sql-driver/mysql and pgx keyword DSNs, all over the Unix sockets unless named ADDR):
#   TETHER_TEST_MYSQL_PRIMARY_DSN / TETHER_TEST_MYSQL_REPLICA_DSN        as $TETHER_DB_USER: its database, plus
#                            SLAVE MONITOR and BINLOG MONITOR (what a topology prober needs) and no READ_ONLY ADMIN, so
#                            the replica's read_only refuses its writes as it would an application's
#   TETHER_TEST_MYSQL_PRIMARY_ADMIN_DSN / TETHER_TEST_MYSQL_REPLICA_ADMIN_DSN   as root: for the tests' own STOP
#                            SLAVE, SET GLOBAL, promotes
#   TETHER_TEST_MYSQL_PRIMARY_ADDR   127.0.0.1:port of the primary (a test re-pointing the replica needs it)
#   TETHER_TEST_MYSQL_PRIMARY_PID / TETHER_TEST_MYSQL_REPLICA_PID   their mariadbd's PIDs at start (a failover test
#                            that kills one finds its current PID in @@pid_file and its command line in /proc)
#   TETHER_TEST_MYSQL_REPL_USER / TETHER_TEST_MYSQL_REPL_PASSWORD   the replication account on the primary
#   TETHER_TEST_POSTGRES_PRIMARY_DSN / TETHER_TEST_POSTGRES_REPLICA_DSN  as $TETHER_DB_USER, database $TETHER_DB_NAME
#   TETHER_TEST_POSTGRES_PRIMARY_ADMIN_DSN / TETHER_TEST_POSTGRES_REPLICA_ADMIN_DSN  as postgres (superuser): for
#                            pg_wal_replay_pause(), pg_promote()
#
# By hand, from the repo root, in an interactive bash (4 s for the MariaDB pair, 2-3 s for the PostgreSQL one):
#   source scripts/lib/replicas.sh; clean_db_dir var/rep
#   start_mariadb_pair var/rep/mariadb; start_postgres_pair var/rep/pg    # exports the DSNs below
#   go test -count=1 -run Prober ./backend/mysql ./backend/postgres
#   stop_mariadb_pair; stop_postgres_pair                                 # the same shell: it keeps the PIDs
#
# Environment, all optional (besides databases.sh's TETHER_DB_*, TETHER_PG_BINDIR, TETHER_DB_START_TIMEOUT):
#   TETHER_REPLICA_MARIADB_PORT  first port to try for the MariaDB primary (13340); the replica takes the next free one
#   TETHER_REPLICA_PG_PORT       the same for PostgreSQL (15460)
#   TETHER_REPLICA_SEMI_SYNC_TIMEOUT_MS  rpl_semi_sync_master_timeout (2000): how long a commit on the primary waits
#                            for the replica's ack before falling back to asynchronous (a loss test may raise it)
#
# TLS: the PostgreSQL pair serves it on TCP (start_postgres's certificates, copied to the replica by pg_basebackup;
# PG_PRIMARY_DIR/tls/ca.pem verifies both); the MariaDB pair does not yet. Tuned for tests, not durability, as
# databases.sh's servers (fsync off, synchronous_commit off, InnoDB flushing once a second).

[[ -n "${_TETHER_REPLICAS_SH:-}" ]] && return 0
_TETHER_REPLICAS_SH=1
# shellcheck source=scripts/lib/databases.sh
source "$(dirname "${BASH_SOURCE[0]}")/databases.sh"

: "${TETHER_REPLICA_SEMI_SYNC_TIMEOUT_MS:=2000}"

# ---------------------------------------------------------------------------------------------------------------
# MariaDB

# _rep_mariadb_sql SOCKET: run stdin as root on the server at SOCKET, in batch mode (tab-separated, no headers).
_rep_mariadb_sql() {
	"$(_db_bin mariadb mysql)" --no-defaults --socket="$1" --user=root --batch --skip-column-names
}

# _rep_mariadbd DIR PORT SERVER_ID PID_VAR EXTRA_OPTS...: initialise a fresh MariaDB in DIR/data and start it with
# GTID and the binary log on; stores the PID in PID_VAR and waits until it answers.
_rep_mariadbd() {
	local dir=$1 port=$2 id=$3 pidvar=$4
	shift 4
	local mariadbd install_db admin as_user=()
	mariadbd=$(_db_bin mariadbd mysqld)
	install_db=$(_db_bin mariadb-install-db mysql_install_db)
	admin=$(_db_bin mariadb-admin mysqladmin)
	is_root && as_user=(--user=root)
	[[ ! -e "$dir/data" ]] || die "mariadb pair: $dir/data exists; run clean_db_dir first"
	mkdir -p "$dir"
	check_socket_path "$dir/mysqld.sock"
	if ! "$install_db" --no-defaults --datadir="$dir/data" "${as_user[@]}" \
		--auth-root-authentication-method=normal --skip-test-db --skip-name-resolve >"$dir/install.log" 2>&1; then
		tail_file "$dir/install.log"
		die "mariadb pair: mariadb-install-db in $dir failed"
	fi
	# Both log their binary log (log_slave_updates on the replica), so that a promoted replica serves its own
	# GTIDs to whatever replicates from it next.
	"$mariadbd" --no-defaults "${as_user[@]}" \
		--datadir="$dir/data" --socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" --log-error="$dir/mysqld.log" \
		--bind-address=127.0.0.1 --port="$port" --skip-name-resolve \
		--server-id="$id" --log-bin="$dir/data/binlog" --binlog-format=ROW --log-slave-updates=ON \
		--gtid-strict-mode=ON --log-bin-trust-function-creators=1 \
		--character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci \
		--max-connections=200 --innodb-buffer-pool-size=64M --innodb-flush-log-at-trx-commit=2 \
		"$@" </dev/null >>"$dir/mysqld.log" 2>&1 &
	printf -v "$pidvar" '%s' "$!"
	local pid=$! deadline=$((SECONDS + TETHER_DB_START_TIMEOUT))
	until "$admin" --no-defaults --socket="$dir/mysqld.sock" --user=root --connect-timeout=2 ping >/dev/null 2>&1; do
		if ! pid_alive "$pid"; then
			tail_file "$dir/mysqld.log"
			printf -v "$pidvar" '%s' ''
			die "mariadb pair: mariadbd in $dir exited during startup"
		fi
		((SECONDS < deadline)) || { tail_file "$dir/mysqld.log"; die "mariadb pair: $dir not up after ${TETHER_DB_START_TIMEOUT}s"; }
		sleep 0.1
	done
}

# _rep_mariadb_users SOCKET: the same accounts on both servers, kept out of the binary log (sql_log_bin=0), so
# both start at an empty GTID position and the replica replicates the primary from its first transaction.
_rep_mariadb_users() {
	local u=$TETHER_DB_USER p=$TETHER_DB_PASSWORD db=$TETHER_DB_NAME
	_rep_mariadb_sql "$1" <<SQL || die "mariadb pair: creating $db and the users on $1 failed"
SET SESSION sql_log_bin = 0;
DELETE FROM mysql.global_priv WHERE User = '';
FLUSH PRIVILEGES;
CREATE DATABASE \`$db\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE USER '$u'@'localhost' IDENTIFIED BY '$p';
CREATE USER '$u'@'%' IDENTIFIED BY '$p';
GRANT ALL PRIVILEGES ON \`$db\`.* TO '$u'@'localhost';
GRANT ALL PRIVILEGES ON \`$db\`.* TO '$u'@'%';
GRANT SLAVE MONITOR, BINLOG MONITOR ON *.* TO '$u'@'localhost';
GRANT SLAVE MONITOR, BINLOG MONITOR ON *.* TO '$u'@'%';
CREATE USER '${u}_repl'@'127.0.0.1' IDENTIFIED BY '$p';
GRANT REPLICATION SLAVE ON *.* TO '${u}_repl'@'127.0.0.1';
SQL
}

start_mariadb_pair() {
	local dir=${1:?start_mariadb_pair: DIR required} t0
	[[ -z "${MARIADB_PRIMARY_PID:-}${MARIADB_REPLICA_PID:-}" ]] || die "start_mariadb_pair: already running"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	t0=$(now)
	MARIADB_PRIMARY_PORT=$(free_port "${TETHER_REPLICA_MARIADB_PORT:-13340}")
	MARIADB_PRIMARY_SOCKET=$dir/primary/mysqld.sock
	log "mariadb pair: primary on $MARIADB_PRIMARY_SOCKET and 127.0.0.1:$MARIADB_PRIMARY_PORT"
	_rep_mariadbd "$dir/primary" "$MARIADB_PRIMARY_PORT" 1 MARIADB_PRIMARY_PID \
		--rpl-semi-sync-master-enabled=ON --rpl-semi-sync-master-timeout="$TETHER_REPLICA_SEMI_SYNC_TIMEOUT_MS" \
		--rpl-semi-sync-master-wait-point=AFTER_SYNC
	MARIADB_REPLICA_PORT=$(free_port $((MARIADB_PRIMARY_PORT + 1)))
	MARIADB_REPLICA_SOCKET=$dir/replica/mysqld.sock
	log "mariadb pair: replica on $MARIADB_REPLICA_SOCKET and 127.0.0.1:$MARIADB_REPLICA_PORT"
	# read_only on the command line too: the replica never accepts a write, not even before CHANGE MASTER.
	_rep_mariadbd "$dir/replica" "$MARIADB_REPLICA_PORT" 2 MARIADB_REPLICA_PID \
		--read-only=ON --rpl-semi-sync-slave-enabled=ON --rpl-semi-sync-master-timeout="$TETHER_REPLICA_SEMI_SYNC_TIMEOUT_MS" \
		--rpl-semi-sync-master-wait-point=AFTER_SYNC
	_rep_mariadb_users "$MARIADB_PRIMARY_SOCKET"
	_rep_mariadb_users "$MARIADB_REPLICA_SOCKET"
	local u=$TETHER_DB_USER p=$TETHER_DB_PASSWORD db=$TETHER_DB_NAME
	_rep_mariadb_sql "$MARIADB_REPLICA_SOCKET" <<SQL || die "mariadb pair: starting replication failed"
SET GLOBAL gtid_slave_pos = '';
CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = $MARIADB_PRIMARY_PORT, MASTER_USER = '${u}_repl',
  MASTER_PASSWORD = '$p', MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1;
START SLAVE;
SQL
	# Ready means replicating semi-synchronously: the primary counts the replica as a semi-sync client.
	local deadline=$((SECONDS + 30)) clients=0
	while :; do
		clients=$(_rep_mariadb_sql "$MARIADB_PRIMARY_SOCKET" <<<"SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_clients'" | cut -f2)
		[[ "$clients" == 1 ]] && break
		if ((SECONDS >= deadline)); then
			_rep_mariadb_sql "$MARIADB_REPLICA_SOCKET" <<<"SHOW SLAVE STATUS\G" >&2 || true
			tail_file "$dir/replica/mysqld.log"
			die "mariadb pair: the replica did not connect as a semi-sync client within 30s"
		fi
		sleep 0.1
	done
	export TETHER_TEST_MYSQL_PRIMARY_DSN="$u:$p@unix($MARIADB_PRIMARY_SOCKET)/$db"
	export TETHER_TEST_MYSQL_REPLICA_DSN="$u:$p@unix($MARIADB_REPLICA_SOCKET)/$db"
	export TETHER_TEST_MYSQL_PRIMARY_ADMIN_DSN="root@unix($MARIADB_PRIMARY_SOCKET)/$db"
	export TETHER_TEST_MYSQL_REPLICA_ADMIN_DSN="root@unix($MARIADB_REPLICA_SOCKET)/$db"
	export TETHER_TEST_MYSQL_PRIMARY_ADDR=127.0.0.1:$MARIADB_PRIMARY_PORT
	export TETHER_TEST_MYSQL_REPL_USER=${u}_repl TETHER_TEST_MYSQL_REPL_PASSWORD=$p
	export TETHER_TEST_MYSQL_PRIMARY_PID=$MARIADB_PRIMARY_PID TETHER_TEST_MYSQL_REPLICA_PID=$MARIADB_REPLICA_PID
	export MARIADB_PRIMARY_PID MARIADB_PRIMARY_SOCKET MARIADB_PRIMARY_PORT
	export MARIADB_REPLICA_PID MARIADB_REPLICA_SOCKET MARIADB_REPLICA_PORT
	log "mariadb pair: ready in $(since "$t0")s (primary pid $MARIADB_PRIMARY_PID, replica pid $MARIADB_REPLICA_PID, semi-sync)"
}

stop_mariadb_pair() {
	local pid sock dir
	for pid in "${MARIADB_REPLICA_PID:-}" "${MARIADB_PRIMARY_PID:-}"; do
		[[ -n "$pid" ]] || continue
		log "mariadb pair: stopping pid $pid"
		stop_pid "$pid" mariadbd 30
	done
	# A failover test may have killed one and started it again in the same directory: its pid file names it (and
	# its working directory, the data directory, proves the pid was not reused by another process).
	for sock in "${MARIADB_REPLICA_SOCKET:-}" "${MARIADB_PRIMARY_SOCKET:-}"; do
		[[ -n "$sock" ]] || continue
		dir=$(dirname "$sock")
		[[ -r "$dir/mysqld.pid" ]] || continue
		pid=$(<"$dir/mysqld.pid")
		if [[ -n "$pid" ]] && pid_alive "$pid" && pid_cwd_is "$pid" "$dir/data"; then
			log "mariadb pair: stopping pid $pid (restarted in $dir)"
			stop_pid "$pid" mariadbd 30
		fi
	done
	MARIADB_REPLICA_PID='' MARIADB_PRIMARY_PID=''
}

mariadb_pair_wait() {
	local secs=${1:-10} pos got
	pos=$(_rep_mariadb_sql "$MARIADB_PRIMARY_SOCKET" <<<"SELECT @@gtid_binlog_pos") || die "mariadb pair: reading the primary's position failed"
	got=$(_rep_mariadb_sql "$MARIADB_REPLICA_SOCKET" <<<"SELECT MASTER_GTID_WAIT('$pos', $secs)") ||
		die "mariadb pair: MASTER_GTID_WAIT on the replica failed"
	[[ "$got" == 0 ]] || die "mariadb pair: the replica did not reach $pos within ${secs}s"
}

mariadb_pair_promote() {
	log "mariadb pair: promoting the replica (pid $MARIADB_REPLICA_PID)"
	_rep_mariadb_sql "$MARIADB_REPLICA_SOCKET" <<<"STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = 0;" ||
		die "mariadb pair: promoting the replica failed"
}

# ---------------------------------------------------------------------------------------------------------------
# PostgreSQL

# _rep_psql SOCKDIR PORT DB: psql as postgres on the server at SOCKDIR:PORT, unaligned and tuples only.
_rep_psql() {
	"$(_db_bin psql)" -X -q -A -t -v ON_ERROR_STOP=1 -h "$1" -p "$2" -U postgres -d "$3" "${@:4}"
}

start_postgres_pair() {
	local dir=${1:?start_postgres_pair: DIR required} t0 bin=$TETHER_PG_BINDIR
	[[ -z "${PG_PRIMARY_PID:-}${PG_REPLICA_PID:-}" ]] || die "start_postgres_pair: already running"
	[[ -x "$bin/pg_basebackup" ]] || die "postgres pair: no pg_basebackup in $bin (set TETHER_PG_BINDIR)"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	t0=$(now)
	# The primary is start_postgres's instance; its variables are kept apart from the test's own (PG_PID ...) by
	# making them local here. wal_level replica (the default) and wal senders; fast checkpoints for pg_basebackup.
	# shellcheck disable=SC2030,SC2031 # the subshell's PG_* are meant to stay in it
	(
		local PG_PID='' PG_DIR PG_DATADIR PG_SOCKET_DIR PG_PORT PG_DSN PG_POOL_DSN PG_TLS_CA
		TETHER_PG_LOGICAL=0 TETHER_PG_PORT=${TETHER_REPLICA_PG_PORT:-15460} \
			TETHER_PG_CONF=$'wal_level = replica\nmax_wal_senders = 4\nhot_standby = on\n'"${TETHER_PG_CONF:-}" \
			start_postgres "$dir/primary"
		# Replication connections of the superuser over the socket (pg_basebackup and the replica's walreceiver).
		echo "local      replication postgres                        trust" | _pg tee -a "$PG_DATADIR/pg_hba.conf" >/dev/null
		_pg "$TETHER_PG_BINDIR/pg_ctl" -D "$PG_DATADIR" -s reload || die "postgres pair: reloading pg_hba.conf failed"
		declare -p PG_PID PG_DIR PG_DATADIR PG_SOCKET_DIR PG_PORT >"$dir/primary.vars"
	) || die "postgres pair: starting the primary failed"
	# The subshell above ran start_postgres; its postmaster is a daemon of pg_ctl, not our child, and is found by PID.
	local PG_PID PG_DIR PG_DATADIR PG_SOCKET_DIR PG_PORT
	# shellcheck disable=SC1091
	source "$dir/primary.vars"
	# shellcheck disable=SC2031
	PG_PRIMARY_PID=$PG_PID PG_PRIMARY_DIR=$PG_DIR PG_PRIMARY_DATADIR=$PG_DATADIR
	PG_PRIMARY_SOCKET_DIR=$PG_SOCKET_DIR PG_PRIMARY_PORT=$PG_PORT

	# The replica's directory: owned by the postgres user when we are root; under /tmp (symlinked from DIR) when that
	# user cannot reach DIR, as start_postgres does.
	local rdir=$dir/replica
	mkdir -p "$rdir"
	if is_root; then
		chown postgres: "$rdir"
		if ! _pg test -w "$rdir" -a -x "$rdir"; then
			local tmp
			tmp=$(mktemp -d /tmp/tether-pg.XXXXXX)
			chown postgres: "$tmp"
			rmdir "$rdir"
			ln -s "$tmp" "$rdir"
			rdir=$tmp
		fi
	fi
	local port sockdir=$rdir/run datadir=$rdir/data
	port=$(free_port $((PG_PRIMARY_PORT + 1)))
	check_socket_path "$sockdir/.s.PGSQL.$port"
	_pg mkdir -m 0755 "$sockdir"
	log "postgres pair: replica by pg_basebackup -R on $sockdir and 127.0.0.1:$port"
	if ! _pg "$bin/pg_basebackup" -h "$PG_PRIMARY_SOCKET_DIR" -p "$PG_PRIMARY_PORT" -U postgres -D "$datadir" \
		-R -X stream -c fast --no-sync >"$rdir/basebackup.log" 2>&1; then
		tail_file "$rdir/basebackup.log"
		die "postgres pair: pg_basebackup failed"
	fi
	# The copy has the primary's postgresql.conf: its own port and socket, and the TLS files of its own copy.
	_pg tee -a "$datadir/postgresql.conf" >/dev/null <<EOF2

# --- tether replica (scripts/lib/replicas.sh) ---
port = $port
unix_socket_directories = '$sockdir'
ssl_cert_file = 'tls/server.pem'
ssl_key_file = 'tls/server-key.pem'
ssl_ca_file = 'tls/ca.pem'
hot_standby_feedback = on
EOF2
	if ! _pg "$bin/pg_ctl" -D "$datadir" -l "$rdir/postgres.log" -W -s start; then
		tail_file "$rdir/postgres.log"
		die "postgres pair: starting the replica failed"
	fi
	PG_REPLICA_DIR=$rdir PG_REPLICA_DATADIR=$datadir PG_REPLICA_SOCKET_DIR=$sockdir PG_REPLICA_PORT=$port PG_REPLICA_PID=
	local deadline=$((SECONDS + TETHER_DB_START_TIMEOUT)) streaming=0
	until [[ "$streaming" == 1 ]]; do
		[[ -z "$PG_REPLICA_PID" && -r "$datadir/postmaster.pid" ]] && PG_REPLICA_PID=$(head -n 1 "$datadir/postmaster.pid")
		if [[ -n "$PG_REPLICA_PID" ]] && ! pid_alive "$PG_REPLICA_PID"; then
			tail_file "$rdir/postgres.log"
			PG_REPLICA_PID=
			die "postgres pair: the replica exited during startup"
		fi
		((SECONDS < deadline)) || { tail_file "$rdir/postgres.log"; die "postgres pair: the replica is not streaming after ${TETHER_DB_START_TIMEOUT}s"; }
		sleep 0.1
		streaming=$(_rep_psql "$PG_PRIMARY_SOCKET_DIR" "$PG_PRIMARY_PORT" postgres \
			-c "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'" 2>/dev/null) || streaming=0
	done
	[[ -n "$PG_REPLICA_PID" ]] || PG_REPLICA_PID=$(head -n 1 "$datadir/postmaster.pid")

	local u=$TETHER_DB_USER p=$TETHER_DB_PASSWORD db=$TETHER_DB_NAME
	export TETHER_TEST_POSTGRES_PRIMARY_DSN="host=$PG_PRIMARY_SOCKET_DIR port=$PG_PRIMARY_PORT user=$u password=$p dbname=$db sslmode=disable"
	export TETHER_TEST_POSTGRES_REPLICA_DSN="host=$sockdir port=$port user=$u password=$p dbname=$db sslmode=disable"
	export TETHER_TEST_POSTGRES_PRIMARY_ADMIN_DSN="host=$PG_PRIMARY_SOCKET_DIR port=$PG_PRIMARY_PORT user=postgres dbname=$db sslmode=disable"
	export TETHER_TEST_POSTGRES_REPLICA_ADMIN_DSN="host=$sockdir port=$port user=postgres dbname=$db sslmode=disable"
	export PG_PRIMARY_PID PG_PRIMARY_DIR PG_PRIMARY_DATADIR PG_PRIMARY_SOCKET_DIR PG_PRIMARY_PORT
	export PG_REPLICA_PID PG_REPLICA_DIR PG_REPLICA_DATADIR PG_REPLICA_SOCKET_DIR PG_REPLICA_PORT
	log "postgres pair: ready in $(since "$t0")s (primary pid $PG_PRIMARY_PID, replica pid $PG_REPLICA_PID, streaming)"
}

# _rep_pg_stop DATADIR PID: pg_ctl stop -m fast, else SIGINT then SIGKILL by PID.
_rep_pg_stop() {
	local datadir=$1 pid=$2
	[[ -n "$pid" ]] || return 0
	log "postgres pair: stopping pid $pid"
	if ! _pg "$TETHER_PG_BINDIR/pg_ctl" -D "$datadir" -m fast -w -t 30 -s stop; then
		warn "pg_ctl stop failed; stopping pid $pid directly"
		stop_pid "$pid" postgres 10 INT
	fi
}

stop_postgres_pair() {
	_rep_pg_stop "${PG_REPLICA_DATADIR:-}" "${PG_REPLICA_PID:-}"
	_rep_pg_stop "${PG_PRIMARY_DATADIR:-}" "${PG_PRIMARY_PID:-}"
	PG_REPLICA_PID='' PG_PRIMARY_PID=''
}

postgres_pair_wait() {
	local secs=${1:-10} lsn deadline
	lsn=$(_rep_psql "$PG_PRIMARY_SOCKET_DIR" "$PG_PRIMARY_PORT" postgres -c "SELECT pg_current_wal_insert_lsn()") ||
		die "postgres pair: reading the primary's position failed"
	deadline=$(awk -v a="$(now)" -v s="$secs" 'BEGIN { printf "%d", a + s }')
	until [[ "$(_rep_psql "$PG_REPLICA_SOCKET_DIR" "$PG_REPLICA_PORT" postgres \
		-c "SELECT pg_last_wal_replay_lsn() >= '$lsn'::pg_lsn")" == t ]]; do
		(($(printf '%.0f' "$(now)") < deadline)) || die "postgres pair: the replica did not replay $lsn within ${secs}s"
		sleep 0.05
	done
}

postgres_pair_promote() {
	log "postgres pair: promoting the replica (pid $PG_REPLICA_PID)"
	[[ "$(_rep_psql "$PG_REPLICA_SOCKET_DIR" "$PG_REPLICA_PORT" postgres -c "SELECT pg_promote(true, 30)")" == t ]] ||
		die "postgres pair: pg_promote() failed"
}
