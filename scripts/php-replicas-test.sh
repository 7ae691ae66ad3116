#!/usr/bin/env bash
# scripts/php-replicas-test.sh: the PHP client's read/write-split and read-your-writes tests (issue 21) against a
# tetherd of their own whose backends have replicas: rmaria (the MariaDB GTID pair) and rpg (the PostgreSQL streaming
# pair), from the DSNs scripts/lib/replicas.sh exports:
#   TETHER_TEST_{MYSQL,POSTGRES}_{PRIMARY,REPLICA}_DSN        the backends' dsn and replicas
#   TETHER_TEST_{MYSQL,POSTGRES}_REPLICA_ADMIN_DSN            the tests delay each replica with them (MASTER_DELAY,
#                                                             recovery_min_apply_delay) and undo it
# It writes the config (in TETHER_TEST_DIR, default var/test-replicas), starts bin/tetherd (built beforehand), runs
# clients/php/phpunit-replicas.xml.dist, and stops tetherd by PID, which must exit 0. Any skipped, incomplete or risky
# test fails the run. scripts/test.sh runs it while the pairs are up, before the PostgreSQL promote; by hand:
#   go build -o bin/tetherd ./cmd/tetherd && source <env of started pairs> && bash scripts/php-replicas-test.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib/common.sh
source scripts/lib/common.sh

for v in TETHER_TEST_MYSQL_PRIMARY_DSN TETHER_TEST_MYSQL_REPLICA_DSN TETHER_TEST_MYSQL_REPLICA_ADMIN_DSN \
	TETHER_TEST_POSTGRES_PRIMARY_DSN TETHER_TEST_POSTGRES_REPLICA_DSN TETHER_TEST_POSTGRES_REPLICA_ADMIN_DSN; do
	[[ -n "${!v:-}" ]] || die "$v is not set: start the replicated pairs (scripts/lib/replicas.sh) first"
done
[[ -x bin/tetherd ]] || die "bin/tetherd not built (go build -o bin/tetherd ./cmd/tetherd)"

DIR=${TETHER_TEST_DIR:-$ROOT/var/test-replicas}
DIR=$DIR/php-replicas
mkdir -p "$DIR"
SOCK=$DIR/tether.sock
CONFIG=$DIR/tetherd.toml
rm -f "$SOCK"
cat >"$CONFIG" <<TOML
# Written by scripts/php-replicas-test.sh for clients/php/tests/Replicas; rewritten on every run.
[server]
socket = "$SOCK"
socket_mode = "0660"
default_timeout = "30s"
shutdown_grace = "10s"
default_backend = "rmaria"

[log]
level = "info"
format = "text"

[backends.rmaria]
type = "mysql"
dsn = "$TETHER_TEST_MYSQL_PRIMARY_DSN"
replicas = ["$TETHER_TEST_MYSQL_REPLICA_DSN"]
max_conns = 8
max_replica_lag = "10s"
monitor_interval = "200ms"

[backends.rpg]
type = "postgres"
dsn = "$TETHER_TEST_POSTGRES_PRIMARY_DSN"
replicas = ["$TETHER_TEST_POSTGRES_REPLICA_DSN"]
max_conns = 8
max_replica_lag = "10s"
monitor_interval = "200ms"
TOML

TETHERD_PID=
stop() {
	local pid=$TETHERD_PID rc=0
	[[ -n "$pid" ]] || return 0
	TETHERD_PID=
	kill -TERM "$pid" 2>/dev/null || return 0
	wait_pid_exit "$pid" 20 || { kill -KILL "$pid" 2>/dev/null; return 1; }
	wait "$pid" 2>/dev/null || rc=$?
	return "$rc"
}
trap 'stop || true' EXIT
bin/tetherd -config "$CONFIG" </dev/null >"$DIR/tetherd.log" 2>&1 &
TETHERD_PID=$!
wait_for_socket "$TETHERD_PID" "$SOCK" "$DIR/tetherd.log" 30
log "php replicas: tetherd pid $TETHERD_PID on $SOCK"

log_file=$DIR/phpunit.log
rc=0
TETHER_SOCKET=$SOCK TETHER_TEST_REPLICA_BACKENDS=rmaria=mysql,rpg=postgres \
	php "$(command -v phpunit)" -c clients/php/phpunit-replicas.xml.dist --do-not-cache-result \
	--fail-on-skipped --fail-on-incomplete --fail-on-risky "$@" 2>&1 | tee "$log_file" || rc=$?
if grep -qE 'OK, but incomplete, skipped, or risky tests!|No tests executed!|(Skipped|Incomplete|Risky): [1-9]' "$log_file"; then
	die "php replicas: phpunit reported skipped, incomplete or risky tests, or none at all"
fi
((rc == 0)) || die "php replicas: phpunit failed (exit $rc); tetherd log: $DIR/tetherd.log"
trap - EXIT
stop || { tail_file "$DIR/tetherd.log"; die "php replicas: tetherd did not exit 0 on SIGTERM (log: $DIR/tetherd.log)"; }
log "php replicas: passed"
