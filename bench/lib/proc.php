<?php

declare(strict_types=1);

/*
 * bench/lib/proc.php: what the PHP benchmark drivers (bench/cli, bench/fanout) share: progress lines on stderr,
 * CPU readings from /proc and getrusage, and pinning processes to one CPU (taskset) and back.
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

// ---------------------------------------------------------------------------------------------------------------
// CPU affinity (taskset)

/** cpus_allowed returns the CPU affinity of a process or thread as a list ("0-1"), or null when it is gone. */
function cpus_allowed(int $pid, ?int $tid = null): ?string
{
    $st = @file_get_contents($tid === null ? "/proc/$pid/status" : "/proc/$pid/task/$tid/status");
    if ($st === false || !preg_match('/^Cpus_allowed_list:\s*(\S+)/m', $st, $m)) {
        return null;
    }
    return $m[1];
}

/** thread_ids returns the ids of a process's threads (the process's own pid among them). @return list<int> */
function thread_ids(int $pid): array
{
    return array_map(static fn ($d) => (int) basename($d), glob("/proc/$pid/task/*", GLOB_ONLYDIR) ?: []);
}

/** child_pids returns the pids of a process's children. @return list<int> */
function child_pids(int $pid): array
{
    $out = [];
    foreach (glob("/proc/$pid/task/*/children") ?: [] as $file) {
        foreach (preg_split('/\s+/', trim((string) @file_get_contents($file)), -1, PREG_SPLIT_NO_EMPTY) as $child) {
            $out[] = (int) $child;
        }
    }
    return $out;
}

/**
 * taskset runs taskset(1) with $args (no shell) and returns null, or its error output when it failed. A process
 * that is gone counts as done.
 */
function taskset(string ...$args): ?string
{
    $p = proc_open(['taskset', ...$args], [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['pipe', 'w']], $pipes);
    if ($p === false) {
        return 'cannot run taskset';
    }
    $err = trim((string) stream_get_contents($pipes[2]));
    fclose($pipes[2]);
    $rc = proc_close($p);
    if ($rc === 0 || str_contains($err, 'No such process')) {
        return null;
    }
    return "taskset " . implode(' ', $args) . " exited with $rc" . ($err === '' ? '' : ": $err");
}

/**
 * CpuPin pins server processes to one CPU and puts back the affinity each had before: $threaded processes with all
 * their threads (taskset -a: tetherd, mariadbd), $forking ones with all their children too (the postmaster and its
 * backends). A forking process is pinned before its children are listed and restored before they are, so that a
 * child forked meanwhile inherits the right affinity either way. Threads and children born while pinned inherit the
 * one CPU; restore() gives them the affinity their process (or parent) had before. Both go over every thread again
 * until a pass finds nothing to change, so that a thread born during a pass is not missed.
 */
final class CpuPin
{
    /** @var array<int, array{process: string, threads: array<int, string>}> affinity before pinning, by pid */
    private array $before = [];
    private bool $pinned = false;

    /** @param list<int> $threaded @param list<int> $forking */
    public function __construct(public readonly int $cpu, private array $threaded, private array $forking)
    {
    }

    /** pin pins every process (all threads) to the CPU and returns how many processes it pinned. */
    public function pin(): int
    {
        $this->pinned = true;
        foreach ([...$this->threaded, ...$this->forking] as $pid) {
            if (cpus_allowed($pid) === null) {
                throw new RuntimeException("cannot pin pid $pid to CPU {$this->cpu}: no such process");
            }
        }
        $cpu = (string) $this->cpu;
        $problems = $this->passes(static fn (int $pid, int $tid): string => $cpu, true);
        if ($problems) {
            throw new RuntimeException("cannot pin to CPU $cpu: " . implode('; ', $problems));
        }
        return count($this->before);
    }

    /**
     * restore gives every process and thread back its earlier affinity and returns the problems (empty: all
     * restored). Safe to call twice, or after a pin() that failed half-way.
     *
     * @return list<string>
     */
    public function restore(): array
    {
        if (!$this->pinned) {
            return [];
        }
        $problems = $this->passes(function (int $pid, int $tid, ?int $parent): ?string {
            $b = $this->before[$pid] ?? null;
            if ($b !== null) {
                return $b['threads'][$tid] ?? $b['process'];
            }
            return $parent === null ? null : ($this->before[$parent]['process'] ?? null);
        }, false);
        $this->pinned = (bool) $problems;
        return $problems;
    }

    /** @return array<int, string> pid => affinity (of its main thread) before pinning */
    public function affinityBefore(): array
    {
        return array_map(static fn ($b) => $b['process'], $this->before);
    }

    /**
     * passes sets each thread of every process, and of every child of the forking ones, to $want(pid, tid, parent
     * pid or null) (null: leave it), process by process, parents before their children, over and over until a pass
     * changes nothing (at most 5). $record: first note each process's affinity before it is changed.
     *
     * @return list<string> problems
     */
    private function passes(callable $want, bool $record): array
    {
        for ($pass = 0; $pass < 5; $pass++) {
            $problems = [];
            $changed = 0;
            foreach ($this->threaded as $pid) {
                $changed += $this->apply($pid, null, $want, $record, $problems);
            }
            foreach ($this->forking as $pid) {
                $changed += $this->apply($pid, null, $want, $record, $problems);
                foreach (child_pids($pid) as $child) {
                    $changed += $this->apply($child, $pid, $want, $record, $problems);
                }
            }
            if ($changed === 0) {
                return $problems;
            }
        }
        $problems[] = 'threads were still changing after 5 passes';
        return $problems;
    }

    private function apply(int $pid, ?int $parent, callable $want, bool $record, array &$problems): int
    {
        $now = [];
        foreach (thread_ids($pid) as $tid) {
            if (($a = cpus_allowed($pid, $tid)) !== null) {
                $now[$tid] = $a;
            }
        }
        if ($record && !isset($this->before[$pid]) && $now) {
            $this->before[$pid] = ['process' => cpus_allowed($pid) ?? reset($now), 'threads' => $now];
        }
        $changed = 0;
        foreach ($now as $tid => $a) {
            $w = $want($pid, $tid, $parent);
            if ($w === null || $a === $w) {
                continue;
            }
            $changed++;
            if (($err = taskset('-p', '-c', $w, (string) $tid)) !== null) {
                $problems[] = "pid $pid thread $tid: $err";
            }
        }
        return $changed;
    }
}
