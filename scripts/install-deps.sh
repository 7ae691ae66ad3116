#!/usr/bin/env bash
# scripts/install-deps.sh: install the Debian 12 packages the tests need, with apt, only if any is missing.
#
# Quick no-op (one dpkg-query) when everything is installed. Otherwise: apt-get update once, then apt-get install,
# as root or through sudo. Services are not started: the packages' init scripts would start the SYSTEM MariaDB and
# PostgreSQL, which the tests never use (they start throwaway instances, see scripts/lib/databases.sh), so a
# policy-rc.d that forbids starting services is put in place for the install when there is none.
# Go and gcc are expected to be installed already (go test -race needs cgo).
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

PACKAGES=(openssl php8.2-cli php8.2-msgpack php8.2-mysql php8.2-pgsql php8.2-curl php8.2-xml php8.2-mbstring phpunit mariadb-server postgresql
	# the PHP client's local cache (Client option local_cache) keeps entries in APCu; shmop is in php8.2-common
	php8.2-apcu
	# the framework integrations (clients/php-dbal, clients/php-laravel, clients/php-wordpress) test against these, and
	# are installed with composer from path repositories
	php-doctrine-dbal php-laravel-framework wordpress composer)

apt_install_missing deps "${PACKAGES[@]}"

for tool in go gcc; do
	command -v "$tool" >/dev/null || die "$tool is not installed (the CI image provides it; go test -race needs both)"
done
