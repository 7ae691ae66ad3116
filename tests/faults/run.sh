#!/usr/bin/env bash
# tests/faults/run.sh: tetherd's fault suite (tests/faults/*.go), against real servers. See docs/reliability.md.
#
#   bash tests/faults/run.sh [--quick] [--write] [-- -only name,name]
#
# It installs what is missing (mariadb-server, postgresql, nginx), starts a throwaway MariaDB and PostgreSQL
# (scripts/lib/databases.sh, in var/faults; and a MariaDB primary with its semi-sync replica, scripts/lib/replicas.sh,
# for the failover campaign; tetherd connects as their second user, tether_pool, so that its sessions
# can be counted apart from the watchers'), an nginx that routes /base/ and /admin to different answers (for the
# HTTP escapes), builds tetherd, and runs the campaigns, which start and stop tetherds of their own. The report goes
# to stdout as markdown, progress to stderr. Everything it starts is stopped by PID on exit.
#
#   --quick / FAULTS_QUICK=1   smaller campaigns (make test runs this): every invariant is still judged
#   FAULTS_WORK                its working directory (var/faults); two runs at once need two, and each takes the
#                              next free ports from 14306 (MariaDB), 14532 (PostgreSQL) and 14580 (nginx)
#   --write                    also replace the section between <!-- faults:start --> and <!-- faults:end --> in
#                              docs/reliability.md with the report, the date and the command (refused with --quick)
#
# A failed invariant makes it exit 1.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
unset MARIADB_PID MARIADB_DIR MARIADB_SOCKET MARIADB_PORT MARIADB_DSN PG_PID PG_DIR PG_DATADIR PG_SOCKET_DIR PG_PORT PG_DSN
# shellcheck source=scripts/lib/databases.sh
source "$ROOT/scripts/lib/databases.sh"
# shellcheck source=scripts/lib/replicas.sh
source "$ROOT/scripts/lib/replicas.sh"

QUICK=${FAULTS_QUICK:-0}
WRITE=0
ARGS=("$@")
GO_ARGS=()
while (($#)); do
	case $1 in
	--quick) QUICK=1 ;;
	--write) WRITE=1 ;;
	-h | --help)
		sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	--)
		shift
		GO_ARGS=("$@")
		break
		;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
	shift
done
[[ "$QUICK" == 1 && "$WRITE" == 1 ]] && die "--write with --quick would record the quick figures; drop one"

WORK=${FAULTS_WORK:-$ROOT/var/faults}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
NGINX_PID=
cleanup() {
	local rc=$?
	set +e
	[[ -n "$NGINX_PID" ]] && stop_pid "$NGINX_PID" nginx 10
	# The campaign that restarts MariaDB leaves the new server running: stop that one (PostgreSQL is stopped by
	# its data directory, whatever its pid).
	[[ -r "$WORK/run/mariadb.pid" ]] && MARIADB_PID=$(cat "$WORK/run/mariadb.pid")
	stop_mariadb
	stop_postgres
	stop_mariadb_pair
	stop_postgres_pair
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

apt_install_missing faults mariadb-server postgresql nginx
clean_db_dir "$WORK/db"
mkdir -p "$WORK/bin" "$WORK/nginx/tmp" "$WORK/run"
rm -f "$WORK/run/mariadb.pid"
TETHER_MARIADB_PORT=14306 start_mariadb "$WORK/db/mariadb"
TETHER_PG_PORT=14532 start_postgres "$WORK/db/pg"
# The failover campaign's MariaDB primary and semi-sync replica (scripts/lib/replicas.sh); it moves the primary between
# them, kills and restarts them (a restarted one is stopped by its pid file).
# Semi-sync never falls back to asynchronous within a cycle (30 s, not 2 s, for the replica's ack): a kill then finds
# every acknowledged commit on the replica, whatever the load on this machine.
TETHER_REPLICA_MARIADB_PORT=14340 TETHER_REPLICA_SEMI_SYNC_TIMEOUT_MS=30000 start_mariadb_pair "$WORK/db/rep-mariadb"
# The failover-pg campaign's PostgreSQL primary and streaming standby; it kills one and makes it a standby afresh.
TETHER_REPLICA_PG_PORT=14560 start_postgres_pair "$WORK/db/rep-pg"

log "faults: building tetherd"
go build -o "$WORK/bin/tetherd" ./cmd/tetherd
go build -o "$WORK/bin/faults" ./tests/faults

# nginx: /base/ is what tetherd's http upstream may reach; /admin is its sibling, which it must never reach.
NGINX_PORT=$(free_port 14580)
cat >"$WORK/nginx/nginx.conf" <<CONF
daemon off;
master_process on;
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    default_type text/plain;
    client_body_temp_path $WORK/nginx/tmp/body;
    proxy_temp_path $WORK/nginx/tmp/proxy;
    fastcgi_temp_path $WORK/nginx/tmp/fastcgi;
    uwsgi_temp_path $WORK/nginx/tmp/uwsgi;
    scgi_temp_path $WORK/nginx/tmp/scgi;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location /base/ { return 200 "base \$uri\n"; }
        location /admin { return 200 "ADMIN\n"; }
        location / { return 404 "none\n"; }
    }
}
CONF
nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/error.log" </dev/null >"$WORK/nginx/stdout.log" 2>&1 &
NGINX_PID=$!
for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$NGINX_PORT/base/" 2>/dev/null && break; sleep 0.05; done
curl -fsS -o /dev/null "http://127.0.0.1:$NGINX_PORT/base/" || { tail_file "$WORK/nginx/error.log"; die "nginx did not start"; }

export FAULTS_DIR=$WORK/run FAULTS_TETHERD=$WORK/bin/tetherd FAULTS_NGINX=http://127.0.0.1:$NGINX_PORT
export FAULTS_MYSQL_DSN=$MARIADB_POOL_DSN FAULTS_PG_DSN=$PG_POOL_DSN
export FAULTS_MYSQL_WATCH_DSN=$MARIADB_DSN FAULTS_PG_WATCH_DSN=$PG_DSN FAULTS_MARIADB_PID=$MARIADB_PID
# For the campaign that kills and restarts the servers: PostgreSQL is restarted with pg_ctl on its data directory,
# as the user that owns it (runuser -u postgres when root); a restarted mariadbd's pid is written to
# $FAULTS_DIR/mariadb.pid so that the cleanup stops the new one.
export FAULTS_PG_DATADIR=$PG_DATADIR FAULTS_PG_BINDIR=$TETHER_PG_BINDIR FAULTS_PG_LOG=$PG_DIR/postgres.log
export FAULTS_PG_AS=$(is_root && echo postgres || true)
export FAULTS_REP_A_DSN=$TETHER_TEST_MYSQL_PRIMARY_DSN FAULTS_REP_B_DSN=$TETHER_TEST_MYSQL_REPLICA_DSN
export FAULTS_REP_A_ADMIN_DSN=$TETHER_TEST_MYSQL_PRIMARY_ADMIN_DSN FAULTS_REP_B_ADMIN_DSN=$TETHER_TEST_MYSQL_REPLICA_ADMIN_DSN
export FAULTS_REP_USER=$TETHER_TEST_MYSQL_REPL_USER FAULTS_REP_PASSWORD=$TETHER_TEST_MYSQL_REPL_PASSWORD
export FAULTS_PGREP_A_DSN=$TETHER_TEST_POSTGRES_PRIMARY_DSN FAULTS_PGREP_B_DSN=$TETHER_TEST_POSTGRES_REPLICA_DSN
export FAULTS_PGREP_A_ADMIN_DSN=$TETHER_TEST_POSTGRES_PRIMARY_ADMIN_DSN FAULTS_PGREP_B_ADMIN_DSN=$TETHER_TEST_POSTGRES_REPLICA_ADMIN_DSN
export FAULTS_PGREP_A_DATADIR=$PG_PRIMARY_DATADIR FAULTS_PGREP_A_SOCKDIR=$PG_PRIMARY_SOCKET_DIR FAULTS_PGREP_A_PORT=$PG_PRIMARY_PORT
export FAULTS_PGREP_A_LOG=$PG_PRIMARY_DIR/postgres.log
export FAULTS_PGREP_B_DATADIR=$PG_REPLICA_DATADIR FAULTS_PGREP_B_SOCKDIR=$PG_REPLICA_SOCKET_DIR FAULTS_PGREP_B_PORT=$PG_REPLICA_PORT
export FAULTS_PGREP_B_LOG=$PG_REPLICA_DIR/postgres.log
quick=()
[[ "$QUICK" == 1 ]] && quick=(-quick)
log "faults: running the campaigns$([[ "$QUICK" == 1 ]] && echo " (quick)")"
report=$WORK/report.md
rc=0
"$WORK/bin/faults" "${quick[@]}" "${GO_ARGS[@]}" | tee "$report" || rc=$?
if ((rc == 0)) && [[ "$WRITE" == 1 ]]; then
	{
		printf '### Fault suite (tests/faults)\n\nRun on %s with `bash tests/faults/run.sh --write%s`.\n' "$(date -u)" "${ARGS[*]:+ ${ARGS[*]//--write/}}"
		printf 'Machine: %s vCPU, %s; MariaDB %s, PostgreSQL %s, nginx %s, %s.\n' "$(nproc)" \
			"$(awk '/MemTotal/ {printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo)" \
			"$(mariadbd --version 2>/dev/null | awk '{print $3}')" "$("$TETHER_PG_BINDIR/postgres" --version | awk '{print $3}')" \
			"$(nginx -v 2>&1 | sed 's|.*/||')" "$(go version | awk '{print $3}')"
		cat "$report"
	} >"$WORK/section.md"
	replace_doc_section docs/reliability.md faults "$WORK/section.md"
	log "faults: wrote the report into docs/reliability.md"
fi
exit "$rc"
