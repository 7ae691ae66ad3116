<?php

declare(strict_types=1);

namespace Tether\Tests\Unit\Connection;

use Tether\Tests\Support\FakeServer;
use Tether\Tests\Support\FakeServerTestCase;

/**
 * EndRequestTest checks what happens to a persistent socket when a PHP request ends, in a child PHP process whose
 * own shutdown function (registered after the client's) observes the state the next request would inherit.
 */
final class EndRequestTest extends FakeServerTestCase
{
    public function testOpenTransactionIsRolledBackWhenTheRequestEnds(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['tx' => 5]], ['recv'], ['reply', []], ['await_eof', 5]]]);
        $output = $this->runChild($server, <<<'PHP'
            $client = new Tether\Client(['socket' => $socket, 'timeout' => 2.0]);
            $GLOBALS['tx'] = $client->begin();
            register_shutdown_function(static function (): void {
                // Runs after the client's hook and before any destructor.
                echo $GLOBALS['tx']->isOpen() ? 'still open' : 'rolled back';
            });
            PHP);

        self::assertSame('rolled back', $output);
        self::assertSame([['id' => 1, 'op' => 'begin'], ['id' => 2, 'op' => 'rollback', 'tx' => 5]], self::maps($server));
    }

    public function testSocketWithAReplyStillDueIsClosedWhenTheRequestDies(): void
    {
        // The reply announces 40 MiB: reading it exhausts the child's memory_limit, a fatal error mid-call.
        $server = $this->serve([[['recv'], ['raw', pack('N', 40 << 20) . 'partial'], ['await_eof', 10]]]);
        $output = $this->runChild($server, <<<'PHP'
            ini_set('memory_limit', '16M');
            $client = new Tether\Client(['socket' => $socket, 'timeout' => 5.0]);
            register_shutdown_function(static function () use ($serverLog): void {
                // The process is still alive: an EOF seen by the server now comes from the client's hook.
                $deadline = microtime(true) + 3;
                while (microtime(true) < $deadline) {
                    foreach (file($serverLog) as $line) {
                        if (unserialize(base64_decode($line))[0] === 'eof') {
                            echo 'closed';
                            return;
                        }
                    }
                    usleep(10000);
                }
                echo 'kept open';
            });
            $client->query('SELECT huge()');
            PHP);

        self::assertStringEndsWith('closed', $output);
        self::assertStringContainsString('Allowed memory size', $output, 'the child died the intended way');
    }

    public function testSocketOfABatchNeverWaitedForIsClosedWhenTheRequestEnds(): void
    {
        $server = $this->serve([[['recv'], ['await_eof', 10]]]);
        $output = $this->runChild($server, <<<'PHP'
            $client = new Tether\Client(['socket' => $socket, 'timeout' => 5.0]);
            $GLOBALS['pending'] = $client->sendBatch([Tether\Batch\Operation::ping()]);
            register_shutdown_function(static function () use ($serverLog): void {
                echo $GLOBALS['pending']->isDone() ? 'waited' : 'pending', ' ';
                $deadline = microtime(true) + 3;
                while (microtime(true) < $deadline) {
                    foreach (file($serverLog) as $line) {
                        if (unserialize(base64_decode($line))[0] === 'eof') {
                            echo 'closed';
                            return;
                        }
                    }
                    usleep(10000);
                }
                echo 'kept open';
            });
            PHP);

        self::assertSame('pending closed', $output, 'the reply still due would be the next request\'s otherwise');
    }

    public function testSocketIsKeptWhenEveryReplyWasRead(): void
    {
        $server = $this->serve([[['recv'], ['recv'], ['reply', ['results' => [['ok' => true]]], -1], ['reply', []], ['await_eof', 10]]]);
        $output = $this->runChild($server, <<<'PHP'
            $client = new Tether\Client(['socket' => $socket, 'timeout' => 5.0]);
            $pending = $client->sendBatch([Tether\Batch\Operation::ping()]);
            $client->ping();           // reads the batch's reply on the way
            echo json_encode($pending->wait()), ' ';
            register_shutdown_function(static function () use ($serverLog): void {
                $deadline = microtime(true) + 0.5;
                while (microtime(true) < $deadline) {
                    foreach (file($serverLog) as $line) {
                        if (unserialize(base64_decode($line))[0] === 'eof') {
                            echo 'closed';
                            return;
                        }
                    }
                    usleep(10000);
                }
                echo 'kept open';
            });
            PHP);

        self::assertSame('[true] kept open', $output, 'the persistent socket is left for the next request');
    }

    private function runChild(FakeServer $server, string $body): string
    {
        $script = tempnam(sys_get_temp_dir(), 'tether-child-');
        $bootstrap = var_export(realpath(__DIR__ . '/../../bootstrap.php'), true);
        $socket = var_export($server->address(), true);
        $log = var_export($server->logFile(), true);
        file_put_contents($script, "<?php\nrequire $bootstrap;\n\$socket = $socket;\n\$serverLog = $log;\n$body\n");
        try {
            $process = proc_open([PHP_BINARY, '-d', 'display_errors=stdout', '-d', 'log_errors=0', '-d', 'html_errors=0', $script], [1 => ['pipe', 'w']], $pipes);
            $output = stream_get_contents($pipes[1]);
            fclose($pipes[1]);
            proc_close($process);
        } finally {
            unlink($script);
        }

        return trim((string) $output);
    }
}
