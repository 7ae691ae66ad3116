<?php

declare(strict_types=1);

/*
 * bench/fanout/caller.php: one caller of benchmark E5. It makes CALLS parallel HTTP calls to sleepd's
 * /sleep?ms=MS in one of four ways, then prints one JSON line with the wall time of the fan-out and the caller's
 * memory. bench.php starts it in a fresh PHP process for every measurement, so each one starts from the same
 * empty process, as a PHP page does.
 *
 *   php caller.php VARIANT URL MS CALLS
 *
 * VARIANT:
 *   tether-batch   one Tether batch of CALLS http operations (Client::batch), through tetherd's warm keep-alive
 *                  pool to the upstream; needs TETHER_SOCKET and TETHER_HTTP_BACKEND (the upstream's backend name)
 *   tether-async   the same batch sent without waiting (Client::sendBatch), then wait() on its pending handle
 *   curl-multi     curl_multi with CALLS easy handles
 *   fork           pcntl_fork CALLS children, each making one curl call and reporting through a socket pair;
 *                  the parent waits for all of them
 * URL: sleepd's base URL (http://127.0.0.1:PORT) for the curl variants; the Tether variants reach the same server
 * through the upstream configured in tetherd.
 *
 * The JSON line: wall_ns (from the first byte of work to every reply in hand: connecting, loading the Tether
 * classes and forking are inside), rss_start_kb (VmRSS at the first line of this script), hwm_kb (VmHWM of this
 * process at the end: its peak resident memory), children_hwm_kb and children_private_kb (fork: the sum over the
 * children of their VmHWM, and of their private pages from /proc/self/smaps_rollup, read by each child just before
 * it exits), php_peak_bytes (memory_get_peak_usage(): PHP's own heap), cpu_us (this process's user+system CPU, and its
 * children's for fork), ok (replies that were 200 with the expected body), errors (what went wrong, if anything).
 *
 * It loads nothing it does not need: the Tether client only for the Tether variants.
 */

$rssStartKb = proc_status_kb('VmRSS');

/** proc_status_kb returns a "kB" field of /proc/self/status (VmRSS, VmHWM, ...). */
function proc_status_kb(string $field): int
{
    $s = (string) file_get_contents('/proc/self/status');
    return preg_match('/^' . $field . ':\s+(\d+) kB/m', $s, $m) ? (int) $m[1] : -1;
}

/** private_kb returns this process's private resident memory (Private_Clean + Private_Dirty of smaps_rollup). */
function private_kb(): int
{
    $s = (string) @file_get_contents('/proc/self/smaps_rollup');
    preg_match_all('/^Private_(?:Clean|Dirty):\s+(\d+) kB/m', $s, $m);
    return array_sum(array_map('intval', $m[1]));
}

function cpu_us(int $who = 0): float
{
    $r = getrusage($who);
    return $r['ru_utime.tv_sec'] * 1e6 + $r['ru_utime.tv_usec'] + $r['ru_stime.tv_sec'] * 1e6 + $r['ru_stime.tv_usec'];
}

/** expected is the body sleepd answers to call $i. */
function expected(int $ms, int $i): string
{
    return "slept $ms ms i=$i\n";
}

/** curl_handle makes an easy handle for call $i. */
function curl_handle(string $url, int $ms, int $i): CurlHandle
{
    $h = curl_init("$url/sleep?ms=$ms&i=$i");
    curl_setopt_array($h, [CURLOPT_RETURNTRANSFER => true, CURLOPT_TIMEOUT_MS => $ms + 30000, CURLOPT_CONNECTTIMEOUT_MS => 5000]);
    return $h;
}

function load_tether(): void
{
    $dir = dirname(__DIR__, 2) . '/clients/php';
    require_once "$dir/autoload.php";
    // A class the class map does not list yet still loads (PSR-4 from src/).
    spl_autoload_register(static function (string $class) use ($dir): void {
        if (strncmp($class, 'Tether\\', 7) === 0 && is_file($f = "$dir/src/" . str_replace('\\', '/', substr($class, 7)) . '.php')) {
            require $f;
        }
    });
}

/**
 * tether_ops builds the batch's http operations, one per call.
 *
 * @return list<Tether\Batch\Operation>
 */
function tether_ops(string $backend, int $ms, int $calls): array
{
    $ops = [];
    for ($i = 0; $i < $calls; $i++) {
        $ops[] = Tether\Batch\Operation::http($backend, 'GET', "/sleep?ms=$ms&i=$i");
    }
    return $ops;
}

/**
 * check_tether counts the batch results that are a 200 reply with the expected body, and describes the others.
 *
 * @param array<mixed> $results
 * @param list<string> $errors
 */
function check_tether(array $results, int $ms, int $calls, array &$errors): int
{
    $ok = 0;
    if (count($results) !== $calls) {
        $errors[] = sprintf('batch returned %d results for %d operations', count($results), $calls);
    }
    foreach ($results as $i => $r) {
        if ($r instanceof Throwable) {
            $errors[] = "call $i: " . get_class($r) . ': ' . $r->getMessage();
        } elseif ($r->status !== 200 || $r->body !== expected($ms, $i)) {
            $errors[] = "call $i: status {$r->status}, body " . json_encode($r->body);
        } else {
            $ok++;
        }
    }
    return $ok;
}

function main(array $argv, int $rssStartKb): int
{
    if (count($argv) !== 5) {
        fwrite(STDERR, "usage: php caller.php tether-batch|tether-async|curl-multi|fork URL MS CALLS\n");
        return 2;
    }
    [, $variant, $url, $ms, $calls] = $argv;
    $ms = (int) $ms;
    $calls = (int) $calls;
    $errors = [];
    $ok = 0;
    $childrenHwm = 0;
    $childrenPrivate = 0;
    $extra = [];

    switch ($variant) {
        case 'tether-batch':
        case 'tether-async':
            $socket = getenv('TETHER_SOCKET') ?: throw new RuntimeException('TETHER_SOCKET is not set');
            $backend = getenv('TETHER_HTTP_BACKEND') ?: throw new RuntimeException('TETHER_HTTP_BACKEND is not set');
            $t0 = hrtime(true);
            load_tether();
            $client = new Tether\Client(['socket' => $socket, 'timeout' => $ms / 1000 + 30]);
            $ops = tether_ops($backend, $ms, $calls);
            if ($variant === 'tether-batch') {
                $results = $client->batch($ops);
            } else {
                $pending = $client->sendBatch($ops);
                $extra['send_ns'] = hrtime(true) - $t0; // when the caller is free to do other work
                $results = $pending->wait();
            }
            $wall = hrtime(true) - $t0;
            $ok = check_tether($results, $ms, $calls, $errors);
            break;

        case 'curl-multi':
            $t0 = hrtime(true);
            $mh = curl_multi_init();
            $handles = [];
            for ($i = 0; $i < $calls; $i++) {
                $handles[$i] = curl_handle($url, $ms, $i);
                curl_multi_add_handle($mh, $handles[$i]);
            }
            do {
                $status = curl_multi_exec($mh, $running);
                if ($running > 0) {
                    curl_multi_select($mh, 1.0);
                }
            } while ($running > 0 && $status === CURLM_OK);
            $bodies = [];
            foreach ($handles as $i => $h) {
                $bodies[$i] = [curl_getinfo($h, CURLINFO_RESPONSE_CODE), curl_multi_getcontent($h), curl_error($h)];
                curl_multi_remove_handle($mh, $h);
            }
            curl_multi_close($mh);
            $wall = hrtime(true) - $t0;
            foreach ($bodies as $i => [$code, $body, $err]) {
                if ($code === 200 && $body === expected($ms, $i)) {
                    $ok++;
                } else {
                    $errors[] = "call $i: status $code, body " . json_encode($body) . ($err !== '' ? ", curl: $err" : '');
                }
            }
            break;

        case 'fork':
            $t0 = hrtime(true);
            $children = [];
            for ($i = 0; $i < $calls; $i++) {
                $pair = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
                $pid = pcntl_fork();
                if ($pid < 0) {
                    throw new RuntimeException('pcntl_fork failed');
                }
                if ($pid === 0) {
                    fclose($pair[0]);
                    $h = curl_handle($url, $ms, $i);
                    $body = curl_exec($h);
                    $report = ['code' => curl_getinfo($h, CURLINFO_RESPONSE_CODE), 'body' => $body, 'err' => curl_error($h)];
                    curl_close($h);
                    $report += ['hwm_kb' => proc_status_kb('VmHWM'), 'private_kb' => private_kb()];
                    fwrite($pair[1], json_encode($report));
                    fclose($pair[1]);
                    exit(0);
                }
                fclose($pair[1]);
                $children[$i] = [$pid, $pair[0]];
            }
            $reports = [];
            foreach ($children as $i => [$pid, $sock]) {
                $reports[$i] = json_decode((string) stream_get_contents($sock), true);
                fclose($sock);
                pcntl_waitpid($pid, $st);
                if (!pcntl_wifexited($st) || pcntl_wexitstatus($st) !== 0) {
                    $errors[] = "child $i exited abnormally (status $st)";
                }
            }
            $wall = hrtime(true) - $t0;
            foreach ($reports as $i => $r) {
                if (!is_array($r)) {
                    $errors[] = "child $i sent no report";
                    continue;
                }
                $childrenHwm += $r['hwm_kb'];
                $childrenPrivate += $r['private_kb'];
                if ($r['code'] === 200 && $r['body'] === expected($ms, $i)) {
                    $ok++;
                } else {
                    $errors[] = "call $i: status {$r['code']}, body " . json_encode($r['body']) . ($r['err'] !== '' ? ", curl: {$r['err']}" : '');
                }
            }
            break;

        default:
            fwrite(STDERR, "caller.php: unknown variant $variant\n");
            return 2;
    }

    echo json_encode([
        'variant' => $variant,
        'wall_ns' => $wall,
        'rss_start_kb' => $rssStartKb,
        'hwm_kb' => proc_status_kb('VmHWM'),
        'children_hwm_kb' => $childrenHwm,
        'children_private_kb' => $childrenPrivate,
        'php_peak_bytes' => memory_get_peak_usage(),
        'cpu_us' => cpu_us(0) + cpu_us(1),
        'ok' => $ok,
        'errors' => $errors,
    ] + $extra), "\n";
    return 0;
}

exit(main($argv, $rssStartKb));
