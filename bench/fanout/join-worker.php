<?php

declare(strict_types=1);

/*
 * bench/fanout/join-worker.php: one of the concurrent clients of benchmark E4. bench.php starts several at once.
 *
 *   php join-worker.php VARIANT SIZE ITERATIONS SEED
 *
 * It connects (VARIANT is a key of join_variants() in lib.php), runs WARMUP joins, prints "ready", waits for a line
 * on stdin, then runs ITERATIONS joins of SIZE users each from a random first id (mt_rand seeded with SEED), checks
 * that each returned SIZE rows, and prints one JSON line: start and end (hrtime ns, one clock for every process),
 * its own CPU time in us, and the rows it received. Any failure is an exception: a non-zero exit.
 */

require __DIR__ . '/lib.php';

const WARMUP = 20;

function worker_main(array $argv): int
{
    if (count($argv) !== 5) {
        fwrite(STDERR, "usage: php join-worker.php VARIANT SIZE ITERATIONS SEED\n");
        return 2;
    }
    [, $variant, $size, $iterations, $seed] = $argv;
    $size = (int) $size;
    $iterations = (int) $iterations;
    Cfg::load();
    $v = join_variants()[$variant] ?? throw new RuntimeException("unknown variant $variant");
    $join = ($v['make'])();
    mt_srand((int) $seed);
    for ($i = 0; $i < WARMUP; $i++) {
        $first = join_first($size);
        $join($first, $first + $size - 1);
    }
    echo "ready\n";
    fgets(STDIN);

    $rows = 0;
    $cpu0 = rusage_us();
    $start = hrtime(true);
    for ($i = 0; $i < $iterations; $i++) {
        $first = join_first($size);
        $n = count($join($first, $first + $size - 1));
        if ($n !== $size) {
            throw new RuntimeException("$variant: users $first..+$size: got $n rows, want $size");
        }
        $rows += $n;
    }
    $end = hrtime(true);
    echo json_encode(['start' => $start, 'end' => $end, 'cpu_us' => rusage_us() - $cpu0, 'rows' => $rows]), "\n";
    return 0;
}

exit(worker_main($argv));
