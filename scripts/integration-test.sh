#!/usr/bin/env bash
# scripts/integration-test.sh NAME [PHPUNIT ARGS...]: install clients/php-NAME (a PHP framework integration) with
# Composer from path repositories into a throwaway application, as a user would, then run its PHPUnit suites against
# a tetherd of its own on real MariaDB and PostgreSQL (scripts/lib/integration.sh).
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

# The package must install with Composer from path repositories (no registry is needed), as a user's application
# takes it: its framework dependencies are Debian's packages here, declared as provided by the application, with
# the versions Debian installed; then its classes must load through Composer's autoloader.
composer_check() {
	local app=$ROOT/var/it-$name/composer-app
	rm -rf "$app"
	mkdir -p "$app"
	local dbal illuminate
	dbal=$(dpkg-query -W -f='${Version}' php-doctrine-dbal 2>/dev/null | sed 's/[+~-].*//')
	illuminate=$(dpkg-query -W -f='${Version}' php-laravel-framework 2>/dev/null | sed 's/[+~-].*//')
	php -r '
		[, $app, $pkg, $root, $dbal, $illuminate] = $argv;
		$own = json_decode(file_get_contents("$pkg/composer.json"), true, 512, JSON_THROW_ON_ERROR);
		$provide = [];
		foreach (array_keys($own["require"]) as $dep) {
			if (str_starts_with($dep, "doctrine/")) { $provide[$dep] = $dbal; }
			if (str_starts_with($dep, "illuminate/")) { $provide[$dep] = $illuminate; }
		}
		$app_json = [
			"name" => "example/app",
			"repositories" => [["packagist.org" => false], ["type" => "path", "url" => $pkg], ["type" => "path", "url" => "$root/clients/php"]],
			"minimum-stability" => "dev",
			"prefer-stable" => true,
			"require" => [$own["name"] => "*"],
			"provide" => (object) $provide,
		];
		file_put_contents("$app/composer.json", json_encode($app_json, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES));
	' "$app" "$pkg" "$ROOT" "$dbal" "$illuminate"
	(cd "$app" && COMPOSER_ALLOW_SUPERUSER=1 COMPOSER_HOME="$app/.composer" composer install --no-interaction --no-progress \
		>"$app/install.log" 2>&1) || { tail_file "$app/install.log"; die "php-$name: composer could not install it from path repositories"; }
	# A class of the package's own that needs tether-php and (for DBAL and Laravel) the framework to load.
	local class
	case $name in
	dbal) class='Tether\DBAL\Driver' ;;
	laravel) class='Tether\Laravel\TetherConnector' ;;
	wordpress) class='Tether\WordPress\Session' ;;
	*) die "composer_check: no class to load for $name" ;;
	esac
	php -r '
		[, $app, $class] = $argv;
		foreach (["/usr/share/php/Doctrine/DBAL/autoload.php", "/usr/share/php/Illuminate/Database/autoload.php"] as $debian) {
			if (is_file($debian)) { require_once $debian; }
		}
		require "$app/vendor/autoload.php";
		exit(class_exists($class) ? 0 : 1);
	' "$app" "$class" || die "php-$name: $class does not load through Composer's autoloader"
	log "php-$name: installed by composer from path repositories; $class loads through its autoloader"
}
composer_check

trap 'integration_stop || true' EXIT
integration_start "$name"
log_file=$TETHER_IT_DIR/phpunit.log
rc=0
# APCu in the CLI for the local-cache tests (the Client option local_cache), as scripts/test.sh runs clients/php's.
# The tests of the frameworks' read/write switches (PHPUnit group replicas) need the replicated pairs: only with
# TETHER_IT_REPLICAS=1 (scripts/test.sh runs `--group replicas` so while the pairs are up), else left out.
group_args=()
[[ "${TETHER_IT_REPLICAS:-}" == 1 ]] || group_args=(--exclude-group replicas)
php -d apc.enable_cli=1 "$(command -v phpunit)" -c "$pkg/phpunit.xml.dist" --do-not-cache-result --fail-on-skipped --fail-on-incomplete --fail-on-risky "${group_args[@]}" "$@" \
	2>&1 | tee "$log_file" || rc=$?
if grep -qE 'OK, but incomplete, skipped, or risky tests!|No tests executed!|(Skipped|Incomplete|Risky): [1-9]' "$log_file"; then
	die "php-$name: phpunit reported skipped, incomplete or risky tests, or none at all"
fi
((rc == 0)) || die "php-$name: phpunit failed (exit $rc); tetherd log: $TETHER_IT_DIR/tetherd.log"
trap - EXIT
integration_stop || die "php-$name: tetherd did not exit 0 on SIGTERM (log: $TETHER_IT_DIR/tetherd.log)"
log "php-$name: passed"
