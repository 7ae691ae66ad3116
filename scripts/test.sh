#!/usr/bin/env bash
# scripts/test.sh: the whole test suite; what `make test` (and so CI, through .ci/run) runs.
#
#  1. deps         install missing Debian packages (scripts/install-deps.sh)
#  2. databases    wipe var/test, start throwaway MariaDB, PostgreSQL (scripts/lib/databases.sh) and Cassandra
#                  (scripts/lib/cassandra.sh: Maven jars cached in var/cache) there, and the replicated pairs
#                  (scripts/lib/replicas.sh: a MariaDB GTID primary + semi-sync replica, a PostgreSQL primary + a
#                  streaming replica; TETHER_TEST_{MYSQL,POSTGRES}_{PRIMARY,REPLICA}_DSN and the rest it exports)
#  3. go vet       go vet ./...
#  4. go test      go test -race -count=1 ./... against those databases (TETHER_TEST_{MYSQL,POSTGRES}_{DSN,ADDR};
#                  TETHER_REQUIRE_BACKENDS=1, so a missing one fails instead of skipping); then the PHP client's
#                  replica tests (scripts/php-replicas-test.sh: a tetherd of their own with replicated backends on the
#                  pairs, clients/php/phpunit-replicas.xml.dist) and the integrations' (scripts/integration-test.sh
#                  NAME --group replicas with TETHER_IT_REPLICAS=1); then the tests that promote the PostgreSQL
#                  pair's replica for good (TETHER_TEST_POSTGRES_PROMOTE=1: the failover under load, then on a fresh
#                  pair the prober's promote), and the pairs are stopped
#  5. build        go build -o bin/tetherd ./cmd/tetherd; etc/tetherd.toml must pass tetherd -check
#  6. tetherd      start internal/testupstream (a real HTTP server) and bin/tetherd on var/test/tetherd.toml
#                  (backends main=sqlite, maria=mysql, pg=postgres, cass=cassandra, bt=bigtable on the in-process
#                  emulator, api=http to the test upstream, downapi=http to a closed port)
#  7. phpunit      the PHP client's suites against it; any skipped, incomplete or risky test fails the run
#  8. shutdown     SIGTERM tetherd; it must exit 0 within its shutdown grace
#  9. integrations the framework integrations' PHPUnit suites (clients/php-dbal, clients/php-laravel,
#                  clients/php-wordpress) running Doctrine DBAL, Illuminate\Database and a real WordPress from
#                  Debian's packages, each through a tetherd of its own (scripts/integration-test.sh)
# 10. quickstart   clients/php/examples/quickstart.php against a tetherd on its embedded default; then the Debian
#                  package (scripts/package-deb.sh), the status page in headless Chromium
#                  (scripts/status-page-test.sh), and 100 reloads and 5 binary upgrades under PHP load without a
#                  failed request (scripts/ops-test.sh)
# 11. bench        bench/cli/run.sh --quick: the benchmark command still runs end to end (no timing asserted)
# 12. web bench    bench/web/run.sh --quick: every page under nginx + php-fpm and apache2 + mod_php answers as
#                  expected and serves ab's load without a failed request (no timing asserted)
#     replicas     bench/replicas/run.sh --quick: a page of 20 reads on one server and on primary + replica, idle
#                  and with writers on the primary, end to end on its own MariaDB pair (no timing asserted)
# 13. app bench    bench/apps/run.sh --quick: the WordPress and Laravel pages, native and through Tether, under both
#                  web servers answer as expected without a failed request (no timing asserted)
# 14. fanout bench bench/fanout/run.sh --quick: E5 (10 parallel upstream calls: Tether batch, curl_multi, fork) and
#                  E4 (joins: Tether and PDO return the same rows) run end to end (no timing asserted)
#     compare      bench/compare/run.sh --quick --before HEAD: two tetherd builds side by side print their rows (no
#                  timing asserted)
# 15. faults       tests/faults/run.sh --quick: every fault campaign (killed workers, backend restarts, overload,
#                  memory attacks, signals, HTTP escapes, fuzzing) at a small scale; each invariant is judged
#                  (docs/reliability.md; the full run is `make faults`)
#
# Everything it starts is stopped by PID on exit, pass or fail; the logs stay in var/test until the next run.
# Environment: TETHER_TEST_DIR (default <repo>/var/test), TETHER_MARIADB_PORT, TETHER_PG_PORT (see databases.sh).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib/databases.sh
source scripts/lib/databases.sh
# shellcheck source=scripts/lib/cassandra.sh
source scripts/lib/cassandra.sh
# shellcheck source=scripts/lib/replicas.sh
source scripts/lib/replicas.sh

TEST_DIR=${TETHER_TEST_DIR:-$ROOT/var/test}
TETHERD=$ROOT/bin/tetherd
TETHERD_GRACE=20 # seconds tetherd may take to exit on SIGTERM (shutdown_grace in the test config is 10s)
STEP=setup
T_START=$(now)
TETHERD_PID=
UPSTREAM_PID=

step() {
	STEP=$1
	printf '\n==> [%s] %s\n' "$(date +%H:%M:%S)" "$1" >&2
}

# start_tetherd WORKDIR SOCKET LOG [ARGS...] starts bin/tetherd in WORKDIR with ARGS, logging to LOG, sets
# TETHERD_PID and waits until SOCKET exists (tetherd creates it only after every backend has connected).
start_tetherd() {
	local wd=$1 sock=$2 logf=$3 t0
	shift 3
	check_socket_path "$sock"
	t0=$(now)
	(cd "$wd" && exec "$TETHERD" "$@") </dev/null >"$logf" 2>&1 &
	TETHERD_PID=$!
	wait_for_socket "$TETHERD_PID" "$sock" "$logf" 30
	log "tetherd: ready in $(since "$t0")s (pid $TETHERD_PID, socket $sock)"
}

# stop_tetherd sends SIGTERM to the running tetherd and returns its exit status (1 if it had to be killed).
stop_tetherd() {
	local pid=$TETHERD_PID rc=0
	[[ -n "$pid" ]] || return 0
	TETHERD_PID=
	log "tetherd: stopping pid $pid"
	kill -TERM "$pid" 2>/dev/null || true
	if ! wait_pid_exit "$pid" "$TETHERD_GRACE"; then
		warn "tetherd (pid $pid) still running ${TETHERD_GRACE}s after SIGTERM; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		return 1
	fi
	wait "$pid" 2>/dev/null || rc=$?
	return "$rc"
}

cleanup() {
	local rc=$?
	set +e
	trap - INT TERM
	stop_tetherd
	[[ -z "$UPSTREAM_PID" ]] || stop_pid "$UPSTREAM_PID" testupstream 5
	stop_mariadb
	stop_postgres
	stop_cassandra
	stop_mariadb_pair
	stop_postgres_pair
	if ((rc == 0)); then
		printf '\n==> make test: PASSED in %ss (go vet, go test -race on SQLite, MariaDB, PostgreSQL, Cassandra and the Bigtable emulator, phpunit, the DBAL, Laravel and WordPress integrations, quickstart, the five benchmarks --quick, the fault suite --quick)\n' "$(since "$T_START")"
	else
		printf '\n==> make test: FAILED at step "%s" (exit %s) after %ss; logs in %s\n' \
			"$STEP" "$rc" "$(since "$T_START")" "$TEST_DIR" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- 1 ---------------------------------------------------------------------------------------------------------
step deps
bash scripts/install-deps.sh

# --- 2 ---------------------------------------------------------------------------------------------------------
step databases
# Stop whatever a killed earlier run left in TEST_DIR (tetherd by its pid file, checked against its binary).
if [[ -r "$TEST_DIR/tetherd.pid" ]]; then
	old=$(cat "$TEST_DIR/tetherd.pid")
	if pid_alive "$old" && [[ "$(readlink -f "/proc/$old/exe" 2>/dev/null)" == "$TETHERD"* ]]; then
		log "stopping tetherd left over from an earlier run (pid $old)"
		stop_pid "$old" tetherd "$TETHERD_GRACE"
	fi
fi
# TEST_DIR is wiped: make sure it is ours (the default, or marked by an earlier run) before removing anything.
if [[ -e "$TEST_DIR" && "$TEST_DIR" != "$ROOT/var/test" && ! -e "$TEST_DIR/.tether-test-dir" ]]; then
	die "refusing to wipe $TEST_DIR: not a directory an earlier test run created (no .tether-test-dir in it)"
fi
clean_cassandra_dir "$TEST_DIR/cassandra"
# The pairs' pid files lie deeper than clean_db_dir looks from TEST_DIR.
clean_db_dir "$TEST_DIR/rep-mariadb"
clean_db_dir "$TEST_DIR/rep-pg"
clean_db_dir "$TEST_DIR"
mkdir -p "$TEST_DIR"
touch "$TEST_DIR/.tether-test-dir"
TETHER_MARIADB_BINLOG=1 start_mariadb "$TEST_DIR/mariadb"
TETHER_PG_LOGICAL=1 start_postgres "$TEST_DIR/pg"
start_cassandra "$TEST_DIR/cassandra"
# The replicated pairs (issue 21): they export TETHER_TEST_{MYSQL,POSTGRES}_{PRIMARY,REPLICA}[_ADMIN]_DSN and the
# rest scripts/lib/replicas.sh lists.
start_mariadb_pair "$TEST_DIR/rep-mariadb"
start_postgres_pair "$TEST_DIR/rep-pg"

export TETHER_TEST_MYSQL_DSN=$MARIADB_DSN
export TETHER_TEST_POSTGRES_DSN=$PG_DSN
# A user of their own for the tests that count tetherd's sessions on the server (packages run in parallel).
export TETHER_TEST_MYSQL_POOL_DSN=$MARIADB_POOL_DSN
export TETHER_TEST_POSTGRES_POOL_DSN=$PG_POOL_DSN
# The same servers over TCP, for the backend suite's fault tests (they proxy these addresses).
export TETHER_TEST_MYSQL_ADDR=127.0.0.1:$MARIADB_PORT
# MariaDB runs with its binary log in row format, PostgreSQL with logical replication (tetherd's change streams).
export TETHER_TEST_MYSQL_BINLOG=1 TETHER_TEST_POSTGRES_LOGICAL=1
export TETHER_TEST_POSTGRES_ADDR=127.0.0.1:$PG_PORT
# The same servers over TCP and TLS, verified against their own CA, as the user they let in only over TLS.
export TETHER_TEST_MYSQL_TLS_DSN="${TETHER_DB_USER}_tls:$TETHER_DB_PASSWORD@tcp(127.0.0.1:$MARIADB_PORT)/$TETHER_DB_NAME?tls=true&tls-ca=$MARIADB_TLS_CA"
export TETHER_TEST_POSTGRES_TLS_DSN="host=127.0.0.1 port=$PG_PORT user=${TETHER_DB_USER}_tls password=$TETHER_DB_PASSWORD dbname=$TETHER_DB_NAME sslmode=verify-full sslrootcert=$PG_TLS_CA"
export TETHER_TEST_CASSANDRA_HOST=$CASSANDRA_HOST
export TETHER_TEST_CASSANDRA_USER=$CASSANDRA_USER TETHER_TEST_CASSANDRA_PASSWORD=$CASSANDRA_PASSWORD
export TETHER_REQUIRE_BACKENDS=1
for v in TETHER_TEST_MYSQL_DSN TETHER_TEST_MYSQL_POOL_DSN TETHER_TEST_MYSQL_ADDR TETHER_TEST_MYSQL_TLS_DSN TETHER_TEST_POSTGRES_DSN TETHER_TEST_POSTGRES_POOL_DSN TETHER_TEST_POSTGRES_ADDR TETHER_TEST_POSTGRES_TLS_DSN TETHER_TEST_CASSANDRA_HOST \
	TETHER_TEST_MYSQL_PRIMARY_DSN TETHER_TEST_MYSQL_REPLICA_DSN TETHER_TEST_POSTGRES_PRIMARY_DSN TETHER_TEST_POSTGRES_REPLICA_DSN; do
	log "$v=${!v}"
done

# --- 3, 4 ------------------------------------------------------------------------------------------------------
export GOFLAGS=${GOFLAGS:--mod=mod}
# The go command keeps its caches under HOME, which a bare CI shell may not set.
if [[ -z "${HOME:-}" ]]; then
	HOME=$(getent passwd "$(id -u)" | cut -d: -f6)
	export HOME
fi
export CGO_ENABLED=1 # -race needs cgo
step "go vet"
go vet ./...
step "go test -race"
go test -race -count=1 ./...
# The PHP client's read/write-split and read-your-writes tests need the pairs as they are (a PostgreSQL replica that
# still replicates): after the Go tests (which use the pairs too), before the promote. Its own tetherd, with replicated
# backends on the pairs (scripts/php-replicas-test.sh); bin/tetherd is built here for it (step 5 builds it again).
step "phpunit: replicas"
go build -o bin/tetherd ./cmd/tetherd
TETHER_TEST_DIR=$TEST_DIR bash scripts/php-replicas-test.sh >"$TEST_DIR/php-replicas.log" 2>&1 ||
	{ tail_file "$TEST_DIR/php-replicas.log"; die "the PHP client's replica tests failed (log: $TEST_DIR/php-replicas.log)"; }
grep -E '^(OK|Tests:)' "$TEST_DIR/php-replicas.log" | tail -n 1 | sed 's/^/==> php replicas: /' >&2
# The integrations' read/write switches (PHPUnit group replicas): each with a tetherd of its own that has replicated
# backends on the pairs (TETHER_IT_REPLICAS=1, scripts/lib/integration.sh); step 9 runs the rest of their suites.
for it in dbal laravel wordpress; do
	TETHER_IT_REPLICAS=1 bash scripts/integration-test.sh "$it" --group replicas >"$TEST_DIR/it-$it-replicas.log" 2>&1 ||
		{ tail_file "$TEST_DIR/it-$it-replicas.log"; die "the $it integration's replica tests failed (log: $TEST_DIR/it-$it-replicas.log)"; }
	grep -E '^(OK|Tests:)' "$TEST_DIR/it-$it-replicas.log" | tail -n 1 | sed "s/^/==> php-$it replicas: /" >&2
done
# The promote of the PostgreSQL pair cannot be undone from a test: it runs alone, after every other user of the pair,
# once for the failover under load (the primary killed, the standby promoted) and once, on a fresh pair, for the
# prober's view of a promote.
step "go test: replica promote"
TETHER_TEST_POSTGRES_PROMOTE=1 go test -race -count=1 -run '^TestFailover_PrimaryKilled$' ./backend/postgres/
stop_postgres_pair
clean_db_dir "$TEST_DIR/rep-pg"
start_postgres_pair "$TEST_DIR/rep-pg"
TETHER_TEST_POSTGRES_PROMOTE=1 go test -race -count=1 -run '^TestProber_Promote$' ./backend/postgres/
stop_mariadb_pair
stop_postgres_pair

# --- 5 ---------------------------------------------------------------------------------------------------------
step build
go build -o bin/tetherd ./cmd/tetherd
go build -o bin/testupstream ./internal/testupstream
# The sample config must stay valid (every key, defaults): tetherd -check parses and validates without starting.
bin/tetherd -check -config etc/tetherd.toml >/dev/null || die "etc/tetherd.toml does not pass tetherd -check"

# --- 6 ---------------------------------------------------------------------------------------------------------
step tetherd
rm -f "$TEST_DIR/upstream.addr"
bin/testupstream -listen 127.0.0.1:0 -addr-file "$TEST_DIR/upstream.addr" </dev/null >"$TEST_DIR/upstream.log" 2>&1 &
UPSTREAM_PID=$!
for _ in $(seq 100); do [[ -s "$TEST_DIR/upstream.addr" ]] && break; sleep 0.05; done
[[ -s "$TEST_DIR/upstream.addr" ]] || { tail_file "$TEST_DIR/upstream.log"; die "testupstream did not start"; }
UPSTREAM_ADDR=$(cat "$TEST_DIR/upstream.addr")
log "testupstream: http://$UPSTREAM_ADDR (pid $UPSTREAM_PID)"
SOCK=$TEST_DIR/tether.sock
CONFIG=$TEST_DIR/tetherd.toml
# TLS on the TCP listener, with client certificates: a throwaway CA and its certificates (internal/testcert).
TLS_DIR=$TEST_DIR/tls
mkdir -p "$TLS_DIR"
go run ./internal/testcert/gencert "$TLS_DIR" 127.0.0.1 || die "could not make the test certificates"
TLS_PORT=$(free_port 19433)
TLS_TOKEN=tls-test-token
# Absolute paths, so the config means the same whatever tetherd's working directory.
cat >"$CONFIG" <<TOML
# Written by scripts/test.sh for the PHP integration tests; rewritten on every run.
[server]
socket = "$SOCK"
socket_mode = "0660"
default_timeout = "30s"
tx_idle_timeout = "60s"
shutdown_grace = "10s"
default_backend = "main"
tcp_listen = "127.0.0.1:$TLS_PORT"
tcp_token = "$TLS_TOKEN"
tls_cert = "$TLS_DIR/server.pem"
tls_key = "$TLS_DIR/server-key.pem"
tls_client_ca = "$TLS_DIR/ca.pem"

[log]
level = "debug"
format = "text"

# Table versions for the PHP client's local cache (clients/php/tests/Integration/LocalCacheTest.php).
[cache]
local = true

[backends.main]
type = "sqlite"
dsn = "$TEST_DIR/tether.db"

[backends.maria]
type = "mysql"
dsn = "$TETHER_TEST_MYSQL_DSN"

[backends.pg]
type = "postgres"
dsn = "$TETHER_TEST_POSTGRES_DSN"

[backends.cass]
type = "cassandra"
dsn = "$CASSANDRA_DSN"

# The Go client's in-process Bigtable emulator, with the table the PHP tests use.
[backends.bt]
type = "bigtable"
dsn = "bigtable://tether-test/php?emulator=inprocess&table=php_test:f,c"

# A real HTTP server (internal/testupstream), and an upstream that refuses connections.
[backends.api]
type = "http"
dsn = "http://$UPSTREAM_ADDR"
max_conns = 4

[backends.api.http]
headers = { "x-tether-test" = "php" }
max_response_bytes = 1048576

[backends.downapi]
type = "http"
dsn = "http://127.0.0.1:1"
TOML
start_tetherd "$ROOT" "$SOCK" "$TEST_DIR/tetherd.log" -config "$CONFIG"
echo "$TETHERD_PID" >"$TEST_DIR/tetherd.pid"

# --- 7 ---------------------------------------------------------------------------------------------------------
step phpunit
phpunit_log=$TEST_DIR/phpunit.log
junit=$TEST_DIR/phpunit-junit.xml
phpunit_rc=0
TETHER_SOCKET=$SOCK \
	TETHER_TEST_BACKENDS=main,maria,pg,cass,bt \
	TETHER_TEST_BACKEND_TYPES=main=sqlite,maria=mysql,pg=postgres,cass=cassandra,bt=bigtable \
	TETHER_TEST_HTTP_UPSTREAM=api TETHER_TEST_HTTP_DOWN=downapi \
	TETHER_TEST_TLS_ADDR=127.0.0.1:$TLS_PORT TETHER_TEST_TLS_TOKEN=$TLS_TOKEN TETHER_TEST_TLS_DIR=$TLS_DIR \
	php -d apc.enable_cli=1 "$(command -v phpunit)" -c clients/php/phpunit.xml.dist --do-not-cache-result --log-junit "$junit" \
	--fail-on-skipped --fail-on-incomplete --fail-on-risky 2>&1 | tee "$phpunit_log" || phpunit_rc=$?
# The flags above already make PHPUnit exit non-zero on these; the output is checked as well, so that a test that
# did not run can never pass for green, whatever phpunit.xml.dist says.
if grep -qE 'OK, but incomplete, skipped, or risky tests!|No tests executed!|(Skipped|Incomplete|Risky): [1-9]' \
	"$phpunit_log"; then
	die "phpunit reported skipped, incomplete or risky tests, or none at all; every test must run"
fi
((phpunit_rc == 0)) || die "phpunit failed (exit $phpunit_rc); tetherd log: $TEST_DIR/tetherd.log"
# Every suite phpunit.xml.dist defines (unit, integration) must have run tests: an empty or filtered-out suite would
# otherwise pass unnoticed.
python3 - clients/php/phpunit.xml.dist "$junit" <<'PY' || die "a PHPUnit suite ran no tests (see $junit)"
import sys, xml.etree.ElementTree as ET
defined = [s.get("name") for s in ET.parse(sys.argv[1]).getroot().iter("testsuite")]
ran = {}
for s in ET.parse(sys.argv[2]).getroot().iter("testsuite"):
    ran.setdefault(s.get("name"), s)
ok = bool(defined)
for name in defined:
    s = ran.get(name)
    if s is None:
        print(f"==> phpunit suite {name}: did not run", file=sys.stderr)
        ok = False
        continue
    print(f"==> phpunit suite {name}: {s.get('tests')} tests, {s.get('failures')} failures, "
          f"{s.get('errors')} errors, {s.get('skipped')} skipped", file=sys.stderr)
    ok = ok and int(s.get("tests", "0")) > 0
sys.exit(0 if ok else 1)
PY

# --- 8 ---------------------------------------------------------------------------------------------------------
step shutdown
tetherd_rc=0
stop_tetherd || tetherd_rc=$?
((tetherd_rc == 0)) || { tail_file "$TEST_DIR/tetherd.log"; die "tetherd exited $tetherd_rc on SIGTERM (want 0)"; }
rm -f "$TEST_DIR/tetherd.pid"

# --- 9 ---------------------------------------------------------------------------------------------------------
# Each integration gets databases and a tetherd of its own on the running MariaDB and PostgreSQL.
step integrations
for it in dbal laravel wordpress; do
	bash scripts/integration-test.sh "$it" >"$TEST_DIR/it-$it.log" 2>&1 ||
		{ tail_file "$TEST_DIR/it-$it.log"; die "the $it integration's tests failed (log: $TEST_DIR/it-$it.log, var/it-$it)"; }
	grep -E '^(OK|Tests:)' "$TEST_DIR/it-$it.log" | tail -n 1 | sed "s/^/==> php-$it: /" >&2
done

# --- 10 --------------------------------------------------------------------------------------------------------
step quickstart
QS_DIR=$TEST_DIR/quickstart
mkdir -p "$QS_DIR/var"
start_tetherd "$QS_DIR" "$QS_DIR/var/tether.sock" "$TEST_DIR/tetherd-quickstart.log"
echo "$TETHERD_PID" >"$TEST_DIR/tetherd.pid"
qs_rc=0
env -u TETHER_TEST_BACKENDS -u TETHER_TEST_BACKEND_TYPES TETHER_SOCKET="$QS_DIR/var/tether.sock" \
	php clients/php/examples/quickstart.php || qs_rc=$?
((qs_rc == 0)) || { tail_file "$TEST_DIR/tetherd-quickstart.log"; die "quickstart.php exited $qs_rc (want 0)"; }
tetherd_rc=0
stop_tetherd || tetherd_rc=$?
((tetherd_rc == 0)) || { tail_file "$TEST_DIR/tetherd-quickstart.log"; die "tetherd exited $tetherd_rc on SIGTERM (want 0)"; }
rm -f "$TEST_DIR/tetherd.pid"

# The Debian package builds, holds what it should, installs, and its tetherd serves PHP as the tether user.
step "package (deb)"
pkg_args=()
is_root && pkg_args=(--install)
bash scripts/package-deb.sh "${pkg_args[@]}" >"$TEST_DIR/package-deb.log" 2>&1 ||
	{ tail_file "$TEST_DIR/package-deb.log"; die "scripts/package-deb.sh failed (log: $TEST_DIR/package-deb.log)"; }
tail -n 1 "$TEST_DIR/package-deb.log" >&2

# The status page, rendered by a real headless browser.
step "status page (headless Chromium)"
bash scripts/status-page-test.sh >"$TEST_DIR/status-page.log" 2>&1 ||
	{ tail_file "$TEST_DIR/status-page.log"; die "scripts/status-page-test.sh failed (log: $TEST_DIR/status-page.log)"; }
tail -n 1 "$TEST_DIR/status-page.log" >&2

# The local development example (tetherd + PHP's built-in web server, no containers) serves its page.
step "local example"
bash examples/local/run.sh --check >"$TEST_DIR/local-example.log" 2>&1 ||
	{ tail_file "$TEST_DIR/local-example.log"; die "examples/local/run.sh --check failed (log: $TEST_DIR/local-example.log)"; }

# Reloads and binary upgrades under PHP load, on SQLite, MariaDB and PostgreSQL: not one PHP request may fail.
step "reloads and upgrades under load"
bash scripts/ops-test.sh >"$TEST_DIR/ops-test.log" 2>&1 ||
	{ tail_file "$TEST_DIR/ops-test.log"; die "scripts/ops-test.sh failed (log: $TEST_DIR/ops-test.log)"; }
tail -n 1 "$TEST_DIR/ops-test.log" >&2

# --- 11 --------------------------------------------------------------------------------------------------------
# The benchmark command must keep working; --quick asserts no timings (speed is measured by the full run, never by
# a test) but runs every row end to end against its own throwaway MariaDB and tetherd.
step "bench (quick)"
# It starts and stops its own servers: it must not inherit (and so stop) the test's.
env -u MARIADB_PID -u MARIADB_DIR -u MARIADB_SOCKET -u MARIADB_PORT -u MARIADB_DSN \
	-u PG_PID -u PG_DIR -u PG_DATADIR -u PG_SOCKET_DIR -u PG_PORT -u PG_DSN \
	-u CASSANDRA_PID -u CASSANDRA_DIR -u CASSANDRA_PORT -u CASSANDRA_HOST -u CASSANDRA_DSN \
	bash bench/cli/run.sh --quick >"$TEST_DIR/bench-quick.md" 2>"$TEST_DIR/bench-quick.log" ||
	{ tail_file "$TEST_DIR/bench-quick.log"; die "bench/cli/run.sh --quick failed"; }
grep -q '^| Tether point read, PHP client |' "$TEST_DIR/bench-quick.md" ||
	die "bench/cli/run.sh --quick printed no point-read row (see $TEST_DIR/bench-quick.md)"

# --- 12 --------------------------------------------------------------------------------------------------------
# The web benchmark: its own throwaway servers (databases, pgbouncer, tetherd, Go service, nginx, php-fpm, apache2);
# it checks each page's body and fails on any failed or non-2xx request; timings are not asserted.
step "web bench (quick)"
env -u MARIADB_PID -u MARIADB_DIR -u MARIADB_SOCKET -u MARIADB_PORT -u MARIADB_DSN \
	-u PG_PID -u PG_DIR -u PG_DATADIR -u PG_SOCKET_DIR -u PG_PORT -u PG_DSN \
	-u CASSANDRA_PID -u CASSANDRA_DIR -u CASSANDRA_PORT -u CASSANDRA_HOST -u CASSANDRA_DSN \
	bash bench/web/run.sh --quick >"$TEST_DIR/web-bench-quick.md" 2>"$TEST_DIR/web-bench-quick.log" ||
	{ tail_file "$TEST_DIR/web-bench-quick.log"; die "bench/web/run.sh --quick failed"; }
for server in 'apache2 prefork + mod_php' 'nginx + php-fpm'; do
	grep -qF "##### $server, \`ab -c 100 -k\`" "$TEST_DIR/web-bench-quick.md" ||
		die "bench/web/run.sh --quick printed no results for $server (see $TEST_DIR/web-bench-quick.md)"
done

# The two-host model (issue 20): databases on CPU 0 behind a 0.5 ms relay, TLS required, web host on CPU 1; every
# page's body checked, any failed request fails; timings are not asserted.
step "two-host bench (quick)"
env -u MARIADB_PID -u MARIADB_DIR -u MARIADB_SOCKET -u MARIADB_PORT -u MARIADB_DSN -u MARIADB_TLS_CA \
	-u PG_PID -u PG_DIR -u PG_DATADIR -u PG_SOCKET_DIR -u PG_PORT -u PG_DSN -u PG_TLS_CA \
	bash bench/web/twohost.sh --quick >"$TEST_DIR/twohost-bench-quick.md" 2>"$TEST_DIR/twohost-bench-quick.log" ||
	{ tail_file "$TEST_DIR/twohost-bench-quick.log"; die "bench/web/twohost.sh --quick failed"; }
grep -qF '| one read: Tether req/s over mysqli connect per request |' "$TEST_DIR/twohost-bench-quick.md" ||
	die "bench/web/twohost.sh --quick printed no targets (see $TEST_DIR/twohost-bench-quick.md)"

# Issue 21's benchmark rows: its own MariaDB and PostgreSQL pairs (ports from 23780 and 23785), tetherd, nginx and
# php-fpm; every page's body checked, any failed request fails; timings are not asserted.
step "replicas bench (quick)"
env -u MARIADB_PID -u MARIADB_DIR -u MARIADB_SOCKET -u MARIADB_PORT -u MARIADB_DSN \
	-u PG_PID -u PG_DIR -u PG_DATADIR -u PG_SOCKET_DIR -u PG_PORT -u PG_DSN \
	-u MARIADB_PRIMARY_PID -u MARIADB_REPLICA_PID -u PG_PRIMARY_PID -u PG_REPLICA_PID \
	bash bench/replicas/run.sh --quick >"$TEST_DIR/replicas-bench-quick.md" 2>"$TEST_DIR/replicas-bench-quick.log" ||
	{ tail_file "$TEST_DIR/replicas-bench-quick.log"; die "bench/replicas/run.sh --quick failed"; }
grep -q '^| PostgreSQL | loaded | primary + replica' "$TEST_DIR/replicas-bench-quick.md" ||
	die "bench/replicas/run.sh --quick printed no loaded PostgreSQL row (see $TEST_DIR/replicas-bench-quick.md)"

# --- 13 --------------------------------------------------------------------------------------------------------
# The application pages (WordPress, Laravel), native and through Tether: its own throwaway MariaDB, tetherd and web
# servers; each page's body is checked and any failed request fails; timings are not asserted.
step "app bench (quick)"
env -u MARIADB_PID -u MARIADB_DIR -u MARIADB_SOCKET -u MARIADB_PORT -u MARIADB_DSN \
	-u PG_PID -u PG_DIR -u PG_DATADIR -u PG_SOCKET_DIR -u PG_PORT -u PG_DSN \
	bash bench/apps/run.sh --quick >"$TEST_DIR/app-bench-quick.md" 2>"$TEST_DIR/app-bench-quick.log" ||
	{ tail_file "$TEST_DIR/app-bench-quick.log"; die "bench/apps/run.sh --quick failed"; }

# --- 14 --------------------------------------------------------------------------------------------------------
step "fanout bench (quick)"
env -u MARIADB_PID -u MARIADB_DIR -u MARIADB_SOCKET -u MARIADB_PORT -u MARIADB_DSN \
	bash bench/fanout/run.sh --quick >"$TEST_DIR/fanout-bench-quick.md" 2>"$TEST_DIR/fanout-bench-quick.log" ||
	{ tail_file "$TEST_DIR/fanout-bench-quick.log"; die "bench/fanout/run.sh --quick failed"; }

# Two builds side by side: here HEAD (built from git archive) against the working tree, as a re-lay is judged.
step "compare bench (quick)"
env -u MARIADB_PID -u MARIADB_DIR -u MARIADB_SOCKET -u MARIADB_PORT -u MARIADB_DSN \
	bash bench/compare/run.sh --quick --before HEAD >"$TEST_DIR/compare-bench-quick.md" 2>"$TEST_DIR/compare-bench-quick.log" ||
	{ tail_file "$TEST_DIR/compare-bench-quick.log"; die "bench/compare/run.sh --quick failed"; }
grep -q '^| page of 20 reads, one call each | after / before |' "$TEST_DIR/compare-bench-quick.md" ||
	die "bench/compare/run.sh --quick printed no page row (see $TEST_DIR/compare-bench-quick.md)"

# --- 15 --------------------------------------------------------------------------------------------------------
# The fault suite, small: its own throwaway MariaDB, PostgreSQL, nginx and tetherds; a failed invariant fails.
step "faults (quick)"
env -u MARIADB_PID -u MARIADB_DIR -u MARIADB_SOCKET -u MARIADB_PORT -u MARIADB_DSN \
	-u PG_PID -u PG_DIR -u PG_DATADIR -u PG_SOCKET_DIR -u PG_PORT -u PG_DSN \
	bash tests/faults/run.sh --quick >"$TEST_DIR/faults-quick.md" 2>"$TEST_DIR/faults-quick.log" ||
	{ tail_file "$TEST_DIR/faults-quick.log"; cat "$TEST_DIR/faults-quick.md" >&2; die "tests/faults/run.sh --quick failed"; }
grep -q '^All campaigns: .*, 0 failed\.$' "$TEST_DIR/faults-quick.md" ||
	die "tests/faults/run.sh --quick did not report all campaigns passed (see $TEST_DIR/faults-quick.md)"
STEP=finished
