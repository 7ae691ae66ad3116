<?php

/**
 * columnar-rows.php measures ways of turning a column-oriented reply {columns, count, data} into a list of
 * associative rows, the job of Tether\ColumnarResult::rows(), against the row-oriented reply {columns, rows} that
 * Protocol\Reply::rows() combines. Each figure is microseconds per reply, MessagePack decode included, the best of
 * 7 runs. Not a test: run it by hand when changing rows(), e.g.
 *
 *     php -d opcache.enable_cli=1 -d memory_limit=2G clients/php/tests/Benchmark/columnar-rows.php
 *
 * Every candidate is checked against the row-oriented result before it is timed.
 */

declare(strict_types=1);

/** @var array<string, callable(list<string>, int, list<list<mixed>>): list<array<string, mixed>>> $candidates */
$candidates = [
    // rows(): array_combine of array_column per row, and one literal array per row for a single column.
    'combine(array_column)' => static function (array $columns, int $count, array $data): array {
        $rows = [];
        if (count($columns) === 1) {
            $name = $columns[0];
            foreach ($data[0] as $v) {
                $rows[] = [$name => $v];
            }

            return $rows;
        }
        for ($i = 0; $i < $count; $i++) {
            $rows[] = array_combine($columns, array_column($data, $i));
        }

        return $rows;
    },
    'nested loops, row by row' => static function (array $columns, int $count, array $data): array {
        $rows = [];
        for ($i = 0; $i < $count; $i++) {
            $row = [];
            foreach ($columns as $c => $name) {
                $row[$name] = $data[$c][$i];
            }
            $rows[] = $row;
        }

        return $rows;
    },
    'column by column writes' => static function (array $columns, int $count, array $data): array {
        $rows = [];
        foreach ($columns as $c => $name) {
            foreach ($data[$c] as $i => $v) {
                $rows[$i][$name] = $v;
            }
        }

        return $rows;
    },
    'array_map(null) transpose' => static function (array $columns, int $count, array $data): array {
        if (count($columns) === 1) {
            $rows = [];
            foreach ($data[0] as $v) {
                $rows[] = [$columns[0] => $v];
            }

            return $rows;
        }
        $rows = [];
        foreach (array_map(null, ...$data) as $values) {
            $rows[] = array_combine($columns, $values);
        }

        return $rows;
    },
    'array_map(closure)' => static function (array $columns, int $count, array $data): array {
        if (count($columns) === 1) {
            $rows = [];
            foreach ($data[0] as $v) {
                $rows[] = [$columns[0] => $v];
            }

            return $rows;
        }

        return array_map(static fn (...$v): array => array_combine($columns, $v), ...$data);
    },
    'template rows, then writes' => static function (array $columns, int $count, array $data): array {
        $rows = array_fill(0, $count, array_fill_keys($columns, null));
        foreach ($columns as $c => $name) {
            foreach ($data[$c] as $i => $v) {
                $rows[$i][$name] = $v;
            }
        }

        return $rows;
    },
    'first column, then writes' => static function (array $columns, int $count, array $data): array {
        $rows = [];
        $name = $columns[0];
        foreach ($data[0] as $v) {
            $rows[] = [$name => $v];
        }
        for ($c = 1, $n = count($columns); $c < $n; $c++) {
            $name = $columns[$c];
            foreach ($data[$c] as $i => $v) {
                $rows[$i][$name] = $v;
            }
        }

        return $rows;
    },
];

/** best returns the best time of 7 runs of $iterations calls of $fn, in microseconds per call. */
$best = static function (callable $fn, int $iterations): float {
    $best = INF;
    for ($run = 0; $run < 7; $run++) {
        $t = hrtime(true);
        for ($k = 0; $k < $iterations; $k++) {
            $fn();
        }
        $best = min($best, (hrtime(true) - $t) / 1e3 / $iterations);
    }

    return $best;
};

printf("PHP %s, opcache %s, JIT %s\n", PHP_VERSION, ini_get('opcache.enable_cli') ? 'on' : 'off', (int) ini_get('opcache.jit_buffer_size') > 0 ? 'on' : 'off');
foreach ([[1, 1000], [4, 10], [4, 1000], [12, 1000], [30, 200], [4, 100000]] as [$width, $height]) {
    $columns = [];
    for ($c = 0; $c < $width; $c++) {
        $columns[] = "column_$c";
    }
    // ints, strings and floats with some NULLs, as a SELECT returns them
    $rows = [];
    for ($i = 0; $i < $height; $i++) {
        $row = [];
        for ($c = 0; $c < $width; $c++) {
            $row[] = match ($c % 3) {
                0 => $i,
                1 => "text $i/$c",
                default => $i % 7 === 0 ? null : 1.5 * $i,
            };
        }
        $rows[] = $row;
    }
    $data = [];
    for ($c = 0; $c < $width; $c++) {
        $data[] = array_column($rows, $c);
    }
    $rowReply = msgpack_pack(['id' => 1, 'columns' => $columns, 'rows' => $rows]);
    $columnReply = msgpack_pack(['id' => 1, 'columns' => $columns, 'count' => $height, 'data' => $data]);
    $iterations = max(10, (int) (4e6 / ($width * $height)));
    $want = array_map(static fn (array $r): array => array_combine($columns, $r), $rows);

    printf("\n%d columns x %d rows\n", $width, $height);
    printf("  %-28s %10.1f\n", 'row-oriented reply', $best(static function () use ($rowReply): void {
        $m = msgpack_unpack($rowReply);
        $out = [];
        foreach ($m['rows'] as $row) {
            $out[] = array_combine($m['columns'], $row);
        }
    }, $iterations));
    printf("  %-28s %10.1f\n", 'columnar, decode only', $best(static function () use ($columnReply): void {
        msgpack_unpack($columnReply);
    }, $iterations));
    foreach ($candidates as $name => $fn) {
        $m = msgpack_unpack($columnReply);
        if ($fn($m['columns'], $m['count'], $m['data']) !== $want) {
            printf("  %-28s %10s\n", $name, 'WRONG');
            continue;
        }
        printf("  %-28s %10.1f\n", $name, $best(static function () use ($fn, $columnReply): void {
            $m = msgpack_unpack($columnReply);
            $fn($m['columns'], $m['count'], $m['data']);
        }, $iterations));
    }
}
