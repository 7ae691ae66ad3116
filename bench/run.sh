#!/usr/bin/env bash
# bench/run.sh: the benchmark suite (`make bench`). Today that is the CLI benchmark, bench/cli/run.sh; arguments are
# passed on (e.g. --quick, --write). See docs/benchmarks.md.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/cli/run.sh" "$@"
