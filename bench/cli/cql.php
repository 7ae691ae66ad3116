<?php

declare(strict_types=1);

/*
 * bench/cli/cql.php: a minimal Cassandra client in pure PHP, speaking the CQL native protocol v4 over one TCP
 * socket. BENCH-ONLY: it is not part of Tether, and not a driver to use.
 *
 * Why it is hand-written: there is no maintained PHP extension for Cassandra (DataStax's C/C++-based php-driver is
 * archived and does not build for PHP 8), and the pure-PHP clients of the seed's time (phpcassa) spoke Thrift, which
 * Cassandra 4.0 removed. What a PHP page without a persistent native driver pays per request is a new connection:
 * TCP connect, STARTUP, the SASL exchange when the cluster requires a password, then the query, then close. This
 * class does exactly that and nothing more, so that seed E1's "connect per request" row can be measured against
 * Tether (bench/cli/cassandra.php), and so that the benchmarks can create their schema and data without cqlsh
 * (bench/cli/load-cassandra.php). It also counts connections per user in system_views.clients for bench/web.
 *
 * Each step is its own method, so a caller can time them apart:
 *
 *   $c = new CqlConnection('127.0.0.1', 9042);   // TCP connect
 *   if ($c->startup()) {                         // STARTUP; true when the server answers AUTHENTICATE
 *       $c->authenticate('user', 'secret');      // AUTH_RESPONSE with SASL PLAIN, until AUTH_SUCCESS
 *   }
 *   $rows = $c->query('SELECT column1, value FROM test.c1 WHERE key = ?', ['a']);  // list of assoc rows
 *   $c->close();
 *
 * Scope: one request at a time (stream 0), no compression, no paging (one page of up to PAGE_SIZE rows), text
 * parameters only (bound as [bytes]: right for text, varchar, ascii and blob columns), results decoded for the types
 * the benchmarks read (text, ascii, blob as strings; int, bigint, smallint, tinyint, boolean; others as raw bytes).
 * Errors from the server throw CqlException with the protocol's error code.
 */

final class CqlException extends RuntimeException
{
}

final class CqlConnection
{
    public const VERSION = 0x04;
    public const CONSISTENCY_ONE = 0x0001;
    public const CONSISTENCY_QUORUM = 0x0004;
    public const PAGE_SIZE = 5000;

    private const OP_ERROR = 0x00;
    private const OP_STARTUP = 0x01;
    private const OP_READY = 0x02;
    private const OP_AUTHENTICATE = 0x03;
    private const OP_QUERY = 0x07;
    private const OP_RESULT = 0x08;
    private const OP_AUTH_CHALLENGE = 0x0E;
    private const OP_AUTH_RESPONSE = 0x0F;
    private const OP_AUTH_SUCCESS = 0x10;

    /** @var resource|null */
    private $s;

    /** __construct opens the TCP connection (with TCP_NODELAY, as drivers set it); nothing is sent yet. */
    public function __construct(string $host, int $port, float $timeout = 10.0)
    {
        $ctx = stream_context_create(['socket' => ['tcp_nodelay' => true]]);
        $s = @stream_socket_client("tcp://$host:$port", $errno, $errstr, $timeout, STREAM_CLIENT_CONNECT, $ctx);
        if ($s === false) {
            throw new CqlException("cql: connect $host:$port: $errstr ($errno)");
        }
        stream_set_timeout($s, (int) ceil($timeout));
        $this->s = $s;
    }

    /** startup sends STARTUP (CQL 3.0.0) and returns true when the server wants authentication, false when READY. */
    public function startup(): bool
    {
        [$op, $body] = $this->request(self::OP_STARTUP, self::stringMap(['CQL_VERSION' => '3.0.0']));
        return match ($op) {
            self::OP_READY => false,
            self::OP_AUTHENTICATE => true,
            default => throw new CqlException(sprintf('cql: STARTUP answered opcode 0x%02x', $op)),
        };
    }

    /** authenticate answers AUTHENTICATE with SASL PLAIN credentials (PasswordAuthenticator) until AUTH_SUCCESS. */
    public function authenticate(string $user, string $password): void
    {
        [$op] = $this->request(self::OP_AUTH_RESPONSE, self::bytes("\0$user\0$password"));
        if ($op === self::OP_AUTH_CHALLENGE) {
            throw new CqlException('cql: unexpected AUTH_CHALLENGE (only PasswordAuthenticator is supported)');
        }
        if ($op !== self::OP_AUTH_SUCCESS) {
            throw new CqlException(sprintf('cql: AUTH_RESPONSE answered opcode 0x%02x', $op));
        }
    }

    /**
     * query runs one CQL statement with positional text parameters at the given consistency and returns its rows
     * (column name => value), or [] for a statement that returns none (DDL, INSERT).
     *
     * @param list<string|null> $params
     * @return list<array<string, mixed>>
     */
    public function query(string $cql, array $params = [], int $consistency = self::CONSISTENCY_ONE): array
    {
        $flags = 0x04; // page size
        $values = '';
        if ($params) {
            $flags |= 0x01;
            $values = pack('n', count($params));
            foreach ($params as $p) {
                $values .= $p === null ? pack('N', 0xFFFFFFFF) : self::bytes((string) $p);
            }
        }
        $body = pack('N', strlen($cql)) . $cql . pack('nC', $consistency, $flags) . $values . pack('N', self::PAGE_SIZE);
        [$op, $res] = $this->request(self::OP_QUERY, $body);
        if ($op !== self::OP_RESULT) {
            throw new CqlException(sprintf('cql: QUERY answered opcode 0x%02x', $op));
        }
        return (new CqlReader($res))->result();
    }

    /** close closes the socket; safe to call twice. */
    public function close(): void
    {
        if ($this->s !== null) {
            fclose($this->s);
            $this->s = null;
        }
    }

    public function __destruct()
    {
        $this->close();
    }

    /**
     * request sends one frame and returns the reply's opcode and body (with any warnings, tracing id or custom
     * payload removed). An ERROR reply throws.
     *
     * @return array{0: int, 1: string}
     */
    private function request(int $opcode, string $body): array
    {
        $frame = pack('CCnCN', self::VERSION, 0, 0, $opcode, strlen($body)) . $body;
        if ($this->s === null || fwrite($this->s, $frame) !== strlen($frame)) {
            throw new CqlException('cql: write failed');
        }
        $h = unpack('Cversion/Cflags/nstream/Copcode/Nlength', $this->read(9));
        if ($h['version'] !== (0x80 | self::VERSION)) {
            throw new CqlException(sprintf('cql: reply of protocol version 0x%02x', $h['version']));
        }
        $r = new CqlReader($h['length'] > 0 ? $this->read($h['length']) : '');
        if ($h['flags'] & 0x02) {
            $r->raw(16); // tracing id
        }
        if ($h['flags'] & 0x08) {
            $r->stringList(); // warnings
        }
        if ($h['flags'] & 0x04) {
            $r->bytesMap(); // custom payload
        }
        if ($h['opcode'] === self::OP_ERROR) {
            $code = $r->int();
            throw new CqlException(sprintf('cql: server error 0x%04x: %s', $code, $r->string()), $code);
        }
        return [$h['opcode'], $r->rest()];
    }

    private function read(int $n): string
    {
        $buf = '';
        while (strlen($buf) < $n) {
            $chunk = fread($this->s, $n - strlen($buf));
            if ($chunk === false || $chunk === '') {
                $why = stream_get_meta_data($this->s)['timed_out'] ? 'timed out' : 'connection closed';
                throw new CqlException("cql: read: $why");
            }
            $buf .= $chunk;
        }
        return $buf;
    }

    private static function stringMap(array $m): string
    {
        $out = pack('n', count($m));
        foreach ($m as $k => $v) {
            $out .= pack('n', strlen((string) $k)) . $k . pack('n', strlen($v)) . $v;
        }
        return $out;
    }

    private static function bytes(string $b): string
    {
        return pack('N', strlen($b)) . $b;
    }
}

/** CqlReader decodes the protocol's notation ([int], [string], [bytes], ...) from one frame body. */
final class CqlReader
{
    private int $pos = 0;

    public function __construct(private string $buf)
    {
    }

    public function raw(int $n): string
    {
        if ($this->pos + $n > strlen($this->buf)) {
            throw new CqlException('cql: truncated frame');
        }
        $s = substr($this->buf, $this->pos, $n);
        $this->pos += $n;
        return $s;
    }

    public function rest(): string
    {
        return substr($this->buf, $this->pos);
    }

    public function int(): int
    {
        $v = unpack('N', $this->raw(4))[1];
        return $v >= 0x80000000 ? $v - 0x100000000 : $v;
    }

    public function short(): int
    {
        return unpack('n', $this->raw(2))[1];
    }

    public function string(): string
    {
        return $this->raw($this->short());
    }

    public function bytes(): ?string
    {
        $n = $this->int();
        return $n < 0 ? null : $this->raw($n);
    }

    public function stringList(): array
    {
        $out = [];
        for ($n = $this->short(); $n > 0; $n--) {
            $out[] = $this->string();
        }
        return $out;
    }

    public function bytesMap(): array
    {
        $out = [];
        for ($n = $this->short(); $n > 0; $n--) {
            $k = $this->string();
            $out[$k] = $this->bytes();
        }
        return $out;
    }

    /** result decodes a RESULT body: rows for kind Rows, [] for Void, Set_keyspace and Schema_change. */
    public function result(): array
    {
        $kind = $this->int();
        if ($kind !== 0x0002) {
            return [];
        }
        $flags = $this->int();
        $ncols = $this->int();
        if ($flags & 0x0002) {
            $this->bytes(); // paging state: more rows than PAGE_SIZE, which the benchmarks never read
        }
        if ($flags & 0x0004) {
            throw new CqlException('cql: rows without metadata');
        }
        if ($flags & 0x0001) {
            $this->string(); // global keyspace
            $this->string(); // global table
        }
        $cols = [];
        for ($i = 0; $i < $ncols; $i++) {
            if (!($flags & 0x0001)) {
                $this->string();
                $this->string();
            }
            $cols[] = [$this->string(), $this->type()];
        }
        $rows = [];
        for ($n = $this->int(); $n > 0; $n--) {
            $row = [];
            foreach ($cols as [$name, $type]) {
                $row[$name] = self::value($type, $this->bytes());
            }
            $rows[] = $row;
        }
        return $rows;
    }

    /** type reads an [option] and returns its type id, skipping the parameters of collections, UDTs and tuples. */
    private function type(): int
    {
        $id = $this->short();
        switch ($id) {
            case 0x0000: // custom
                $this->string();
                break;
            case 0x0020: // list
            case 0x0022: // set
                $this->type();
                break;
            case 0x0021: // map
                $this->type();
                $this->type();
                break;
            case 0x0030: // UDT
                $this->string();
                $this->string();
                for ($n = $this->short(); $n > 0; $n--) {
                    $this->string();
                    $this->type();
                }
                break;
            case 0x0031: // tuple
                for ($n = $this->short(); $n > 0; $n--) {
                    $this->type();
                }
                break;
        }
        return $id;
    }

    private static function value(int $type, ?string $b): mixed
    {
        if ($b === null) {
            return null;
        }
        return match ($type) {
            0x0002, 0x0005 => unpack('J', $b)[1], // bigint, counter
            0x0009 => ($v = unpack('N', $b)[1]) >= 0x80000000 ? $v - 0x100000000 : $v, // int
            0x0013 => ($v = unpack('n', $b)[1]) >= 0x8000 ? $v - 0x10000 : $v, // smallint
            0x0014 => ($v = ord($b)) >= 0x80 ? $v - 0x100 : $v, // tinyint
            0x0004 => $b !== "\0", // boolean
            default => $b, // ascii, blob, varchar and everything else: the raw bytes
        };
    }
}
