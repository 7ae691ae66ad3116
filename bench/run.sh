#!/usr/bin/env bash
# bench/run.sh: the benchmark suite (`make bench`): the CLI benchmark (bench/cli/run.sh), the web-server
# benchmark (bench/web/run.sh), the two-host model (bench/web/twohost.sh: the databases 0.1 and 0.5 ms away over
# TLS), the replicas (bench/replicas/run.sh: a page of reads on one server and on primary + replica), the application pages (bench/apps/run.sh: WordPress and Laravel, natively and
# through Tether), then the fan-out and join benchmark (bench/fanout/run.sh). See docs/benchmarks.md.
#
#   bash bench/run.sh [--quick] [--write]
#
# --quick and --write (or BENCH_QUICK=1 / BENCH_WRITE=1) are passed to each; each prints its markdown on stdout.
# For a suite's own options, run its command directly. The full run takes about 45 minutes on a 2-vCPU VM (the web
# benchmark most of it: 20 to 30, the application pages about 12); --quick about 10 (see `make bench`).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib/bench.sh
source "$ROOT/bench/lib/bench.sh"
args=()
while (($#)); do
	case $1 in
	--quick | --write) args+=("$1") ;;
	-h | --help)
		bench_usage "$ROOT/bench/run.sh"
		exit 0
		;;
	*)
		echo "bench/run.sh: unknown argument $1 (--quick, --write; a suite's own options go to bench/cli/run.sh, bench/web/run.sh, bench/replicas/run.sh, bench/apps/run.sh or bench/fanout/run.sh)" >&2
		exit 2
		;;
	esac
	shift
done

bash "$ROOT/bench/cli/run.sh" "${args[@]}"
echo
bash "$ROOT/bench/web/run.sh" "${args[@]}"
echo
bash "$ROOT/bench/web/twohost.sh" "${args[@]}"
echo
bash "$ROOT/bench/replicas/run.sh" "${args[@]}"
echo
bash "$ROOT/bench/apps/run.sh" "${args[@]}"
echo
bash "$ROOT/bench/fanout/run.sh" "${args[@]}"
