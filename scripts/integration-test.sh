#!/usr/bin/env bash
# scripts/integration-test.sh NAME [PHPUNIT ARGS...]: run the PHPUnit suites of clients/php-NAME (a PHP framework
# integration) against a tetherd of its own on real MariaDB and PostgreSQL (scripts/lib/integration.sh).
#
# It expects the databases to be running and described by MARIADB_SOCKET, PG_SOCKET_DIR and PG_PORT (make test
# starts them; for development, scripts/lib/databases.sh's start_mariadb and start_postgres), and bin/tetherd to be
# built. Any skipped, incomplete or risky test fails the run, as in make test.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib/databases.sh
source "$ROOT/scripts/lib/databases.sh"
# shellcheck source=scripts/lib/integration.sh
source "$ROOT/scripts/lib/integration.sh"

name=${1:?usage: scripts/integration-test.sh NAME [PHPUNIT ARGS...]}
shift
pkg=$ROOT/clients/php-$name
[[ -r "$pkg/phpunit.xml.dist" ]] || die "no $pkg/phpunit.xml.dist"

trap 'integration_stop || true' EXIT
integration_start "$name"
log_file=$TETHER_IT_DIR/phpunit.log
rc=0
phpunit -c "$pkg/phpunit.xml.dist" --do-not-cache-result --fail-on-skipped --fail-on-incomplete --fail-on-risky "$@" \
	2>&1 | tee "$log_file" || rc=$?
if grep -qE 'OK, but incomplete, skipped, or risky tests!|No tests executed!|(Skipped|Incomplete|Risky): [1-9]' "$log_file"; then
	die "php-$name: phpunit reported skipped, incomplete or risky tests, or none at all"
fi
((rc == 0)) || die "php-$name: phpunit failed (exit $rc); tetherd log: $TETHER_IT_DIR/tetherd.log"
trap - EXIT
integration_stop || die "php-$name: tetherd did not exit 0 on SIGTERM (log: $TETHER_IT_DIR/tetherd.log)"
log "php-$name: passed"
