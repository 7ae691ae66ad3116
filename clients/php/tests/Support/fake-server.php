<?php

/**
 * A scripted stand-in for tetherd, run by FakeServer as a child process.
 *
 * Usage: php fake-server.php <listen address> <script file> <log file>
 *
 * The script file holds serialize(list of connection scripts); the server accepts connections one after the other
 * and runs one script on each, then exits. Steps:
 *   ['recv']                   read one frame and log it as a request (EOF ends this connection's script)
 *   ['reply', map, idDelta=0]  send map as a frame; without an 'id' key it gets the last request's id + idDelta
 *   ['raw', bytes]             send bytes as they are
 *   ['sleep', seconds]
 *   ['close']                  close the connection
 *   ['await_eof', seconds]     wait for the client to close its end; logs 'eof' or 'no_eof'
 *   ['close_unread', seconds]  wait until the client has sent something, then close without reading it (the
 *                              client's read is reset, as when tetherd hands an idle connection over); logs 'reset'
 * The log file gets one line per event: base64(serialize([event, connection number, data])).
 */

declare(strict_types=1);

[, $address, $scriptFile, $logFile] = $argv;
$connections = unserialize(file_get_contents($scriptFile));

$log = static function (string $event, int $conn, mixed $data = null) use ($logFile): void {
    file_put_contents($logFile, base64_encode(serialize([$event, $conn, $data])) . "\n", FILE_APPEND | LOCK_EX);
};
$readExactly = static function ($c, int $n): ?string {
    $buf = '';
    while (strlen($buf) < $n) {
        $chunk = fread($c, $n - strlen($buf));
        if ($chunk === false || $chunk === '') {
            return null;
        }
        $buf .= $chunk;
    }
    return $buf;
};

$server = stream_socket_server($address, $errno, $error);
if ($server === false) {
    fwrite(STDERR, "listen $address: $error\n");
    exit(1);
}
echo 'ready ', stream_socket_get_name($server, false), "\n";

foreach ($connections as $n => $steps) {
    $n++;
    $c = @stream_socket_accept($server, 30);
    if ($c === false) {
        $log('accept_timeout', $n);
        exit(1);
    }
    $log('accept', $n);
    $lastId = 0;
    foreach ($steps as $step) {
        switch ($step[0]) {
            case 'recv':
                $head = $readExactly($c, 4);
                $payload = $head === null ? null : $readExactly($c, unpack('N', $head)[1]);
                if ($payload === null) {
                    $log('eof', $n);
                    break 2;
                }
                $request = msgpack_unpack($payload);
                $lastId = is_array($request) ? (int) ($request['id'] ?? 0) : 0;
                $log('request', $n, ['map' => $request, 'raw' => $payload]);
                break;
            case 'reply':
                $map = $step[1];
                if (!array_key_exists('id', $map)) {
                    $map = ['id' => $lastId + ($step[2] ?? 0)] + $map;
                }
                $payload = msgpack_pack($map);
                @fwrite($c, pack('N', strlen($payload)) . $payload);
                break;
            case 'raw':
                @fwrite($c, $step[1]);
                break;
            case 'sleep':
                usleep((int) ($step[1] * 1e6));
                break;
            case 'close':
                fclose($c);
                $log('closed', $n);
                continue 3;
            case 'close_unread':
                $r = [$c];
                $w = $e = null;
                stream_select($r, $w, $e, (int) $step[1], (int) (fmod($step[1], 1) * 1e6));
                fclose($c);
                $log('reset', $n);
                continue 3;
            case 'await_eof':
                stream_set_timeout($c, (int) $step[1], (int) (fmod($step[1], 1) * 1e6));
                $data = fread($c, 65536);
                $log($data === '' ? 'eof' : 'no_eof', $n, $data);
                break;
            default:
                fwrite(STDERR, "unknown step {$step[0]}\n");
                exit(1);
        }
    }
    fclose($c);
    $log('closed', $n);
}
$log('done', 0);
