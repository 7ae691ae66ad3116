<?php

declare(strict_types=1);

/*
 * bench/lib/proc.php: what the PHP benchmark drivers (bench/cli, bench/fanout) share: progress lines on stderr and
 * CPU readings from /proc and getrusage.
 */

/** progress prints one progress line on stderr (stdout carries the results). */
function progress(string $msg): void
{
    fwrite(STDERR, "  .. $msg\n");
}

/** cpu_ticks returns utime+stime of a process (all its threads, living and exited), in clock ticks. */
function cpu_ticks(int $pid): int
{
    $stat = @file_get_contents("/proc/$pid/stat");
    if ($stat === false) {
        throw new RuntimeException("cannot read /proc/$pid/stat: process gone?");
    }
    // Fields after "comm)" start at field 3 (state); utime is field 14, stime field 15.
    $f = explode(' ', substr($stat, strrpos($stat, ')') + 2));
    return (int) $f[11] + (int) $f[12];
}

/**
 * tree_cpu_ticks returns the CPU time of a process and all its descendants, in clock ticks: utime+stime of each
 * living one plus cutime+cstime (the children it has reaped). So a server that forks a process per connection
 * (PostgreSQL's postmaster) is counted whole, and a backend that exits between two readings moves from one sum to
 * the other. Only a child exiting while the tree is read can be missed, once: connects and disconnects, not queries.
 */
function tree_cpu_ticks(int $pid): int
{
    $stat = @file_get_contents("/proc/$pid/stat");
    if ($stat === false) {
        throw new RuntimeException("cannot read /proc/$pid/stat: process gone?");
    }
    $f = explode(' ', substr($stat, strrpos($stat, ')') + 2));
    $ticks = (int) $f[11] + (int) $f[12] + (int) $f[13] + (int) $f[14]; // utime stime cutime cstime
    foreach (glob("/proc/$pid/task/*/children") ?: [] as $file) {
        foreach (preg_split('/\s+/', trim((string) @file_get_contents($file)), -1, PREG_SPLIT_NO_EMPTY) as $child) {
            try {
                $ticks += tree_cpu_ticks((int) $child);
            } catch (RuntimeException) {
                // exited meanwhile: its time is in our cutime+cstime from now on
            }
        }
    }
    return $ticks;
}

/** machine_busy_ticks returns the CPU time of the whole machine (all CPUs, not idle or iowait) in clock ticks. */
function machine_busy_ticks(): int
{
    $f = preg_split('/\s+/', trim(strtok(file_get_contents('/proc/stat'), "\n")));
    // cpu user nice system idle iowait irq softirq steal guest guest_nice; guest time is inside user already.
    return (int) $f[1] + (int) $f[2] + (int) $f[3] + (int) $f[6] + (int) $f[7] + (int) $f[8];
}

/** rusage_us returns this process's user+system CPU time in microseconds. */
function rusage_us(): float
{
    $r = getrusage();
    return $r['ru_utime.tv_sec'] * 1e6 + $r['ru_utime.tv_usec'] + $r['ru_stime.tv_sec'] * 1e6 + $r['ru_stime.tv_usec'];
}
