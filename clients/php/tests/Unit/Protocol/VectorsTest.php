<?php

declare(strict_types=1);

namespace Tether\Tests\Unit\Protocol;

use PHPUnit\Framework\TestCase;
use Tether\Batch\Operation;
use Tether\Bigtable\Mutation;
use Tether\Protocol\Reply;
use Tether\Protocol\Request;
use Tether\Server\ServerException;

/**
 * VectorsTest checks the client against the golden vectors shared with tetherd (testdata/vectors, see
 * docs/protocol.md): every vector decodes to its manifest value; every request vector encodes to its exact bytes,
 * both as msgpack_pack() of the manifest value and as built by the client's own request builders from the
 * arguments a PHP caller would pass (which omit an empty params list: a vector's `"params": []` is compared
 * without it); and every reply vector has a shape the client understands. A request vector whose op has no
 * builder fails: a new op needs one.
 *
 * JSON cannot hold bytes that are not UTF-8: the manifest writes such a str (a cursor sent back as a PHP string)
 * with U+FFFD for each invalid byte, as Go's encoding/json does. Where a manifest string is that lossy form of the
 * decoded one, the decoded bytes stand in for it, so such vectors are still checked byte for byte.
 *
 * The directory is the repository's testdata/vectors, or env TETHER_VECTORS. A missing or empty manifest fails.
 */
final class VectorsTest extends TestCase
{
    public function testEveryVector(): void
    {
        $dir = getenv('TETHER_VECTORS') ?: __DIR__ . '/../../../../../testdata/vectors';
        $manifestFile = $dir . '/manifest.json';
        self::assertFileExists($manifestFile, 'the golden vectors are missing (written by the Go side: testdata/vectors)');
        $manifest = json_decode((string) file_get_contents($manifestFile), true, 512, JSON_THROW_ON_ERROR);
        $vectors = $manifest['vectors'] ?? null;
        self::assertIsArray($vectors, 'manifest.json has no "vectors" list');
        self::assertNotEmpty($vectors, 'manifest.json lists no vectors');

        $failures = [];
        $directions = [];
        foreach ($vectors as $i => $vector) {
            $name = (string) ($vector['name'] ?? "#$i");
            foreach (self::check($dir, $vector) as $failure) {
                $failures[] = "$name: $failure";
            }
            $directions[$vector['direction'] ?? '?'] = true;
        }

        self::assertSame([], $failures, implode("\n", $failures));
        self::assertArrayHasKey('request', $directions, 'no request vectors');
        self::assertArrayHasKey('reply', $directions, 'no reply vectors');
    }

    /**
     * check returns what is wrong with one vector.
     *
     * @param array<string, mixed> $vector
     * @return list<string>
     */
    private static function check(string $dir, array $vector): array
    {
        $file = $dir . '/' . ($vector['file'] ?? '');
        if (!isset($vector['file']) || !is_file($file)) {
            return ["file {$file} missing"];
        }
        if (!array_key_exists('value', $vector) || !in_array($vector['direction'] ?? null, ['request', 'reply'], true)) {
            return ['manifest entry needs "value" and a "direction" of request or reply'];
        }
        $bytes = (string) file_get_contents($file);
        $value = self::fromJson($vector['value']);
        $failures = [];

        $decoded = @msgpack_unpack($bytes);
        if (!self::same($value, $decoded)) {
            $failures[] = 'decodes to ' . var_export($decoded, true) . ', manifest says ' . var_export($value, true);
        }
        $value = self::restore($value, $decoded);

        if ($vector['direction'] === 'request') {
            $packed = msgpack_pack($value);
            if ($packed !== $bytes) {
                $failures[] = self::diff('msgpack_pack(manifest value)', $packed, $bytes) . self::binHint($vector['value']);
            }
            // The client omits an empty params list ("absent means none"); a vector may spell it out as [].
            $canonical = self::withoutEmptyParams($value);
            $want = $canonical === $value ? $bytes : msgpack_pack($canonical);
            $built = self::build($value);
            if ($built === null) {
                $failures[] = 'the client has no builder for op ' . var_export($value['op'] ?? null, true);
            } elseif (($packed = msgpack_pack($built)) !== $want) {
                $failures[] = self::diff('the client\'s request builder', $packed, $want) . self::binHint($vector['value']);
            }
        } elseif (is_array($value)) {
            foreach (self::understood($value) as $failure) {
                $failures[] = $failure;
            }
        }

        return $failures;
    }

    /**
     * build rebuilds a request map with Tether\Protocol\Request and Tether\Batch\Operation, as the client would
     * send it, from the arguments a caller of the Client method would pass; null for an op the client never sends.
     *
     * @param array<string, mixed> $v
     * @return array<string, mixed>|null
     */
    private static function build(array $v): ?array
    {
        $request = match ($v['op'] ?? null) {
            'ping' => Request::ping($v['timeout_ms'] ?? null),
            'hello' => Request::hello((string) ($v['token'] ?? '')),
            'query' => isset($v['limit'])
                ? Request::queryPage($v['sql'] ?? '', $v['params'] ?? [], $v['limit'], $v['cursor'] ?? null, $v['backend'] ?? null, $v['timeout_ms'] ?? null)
                : Request::query($v['sql'] ?? '', $v['params'] ?? [], $v['backend'] ?? null, $v['tx'] ?? null, $v['timeout_ms'] ?? null, $v['columnar'] ?? false),
            'exec' => Request::exec($v['sql'] ?? '', $v['params'] ?? [], $v['backend'] ?? null, $v['tx'] ?? null, $v['timeout_ms'] ?? null),
            'begin' => Request::begin($v['backend'] ?? null, $v['timeout_ms'] ?? null),
            'commit' => Request::commit($v['tx'] ?? 0, $v['timeout_ms'] ?? null),
            'rollback' => Request::rollback($v['tx'] ?? 0, $v['timeout_ms'] ?? null),
            'batch' => Request::batch(array_map(static fn (array $op): array => self::operation($op)->request, $v['ops'] ?? []), $v['timeout_ms'] ?? null),
            'http' => Request::http($v['backend'] ?? '', $v['method'] ?? '', $v['path'] ?? '', $v['headers'] ?? [], $v['body'] ?? null, $v['timeout_ms'] ?? null),
            // The left side as a caller builds it: an Operation; the right side from its own fields.
            'join' => Request::join(self::operation($v['left'] ?? [])->request, $v['right']['table'] ?? '', $v['on'] ?? [], $v['right']['columns'] ?? [],
                $v['right']['backend'] ?? null, $v['kind'] ?? 'left', $v['order_by'] ?? [], $v['timeout_ms'] ?? null),
            default => self::keyOperation(Request::class, $v),
        };
        if ($request !== null && array_key_exists('id', $v)) {
            $request['id'] = $v['id'];
        }

        return $request;
    }

    /**
     * operation rebuilds a batch operation (or a join's left side) with Operation's factories.
     *
     * @param array<string, mixed> $op
     */
    private static function operation(array $op): Operation
    {
        $columnar = $op['columnar'] ?? false;

        return match ($op['op'] ?? null) {
            'query' => $columnar
                ? Operation::queryColumns($op['sql'] ?? '', $op['params'] ?? [], $op['backend'] ?? null, $op['timeout_ms'] ?? null)
                : Operation::query($op['sql'] ?? '', $op['params'] ?? [], $op['backend'] ?? null, $op['timeout_ms'] ?? null),
            'exec' => Operation::execute($op['sql'] ?? '', $op['params'] ?? [], $op['backend'] ?? null, $op['timeout_ms'] ?? null),
            'ping' => Operation::ping($op['timeout_ms'] ?? null),
            'http' => Operation::http($op['backend'] ?? '', $op['method'] ?? '', $op['path'] ?? '', $op['headers'] ?? [], $op['body'] ?? null, $op['timeout_ms'] ?? null),
            'join' => Operation::join(self::operation($op['left'] ?? []), $op['right']['table'] ?? '', $op['on'] ?? [], $op['right']['columns'] ?? [],
                $op['right']['backend'] ?? null, $op['kind'] ?? 'left', $op['order_by'] ?? [], $op['timeout_ms'] ?? null),
            default => self::keyOperation(Operation::class, $op) ?? Operation::ping(),
        };
    }

    /**
     * keyOperation calls the key-API or Bigtable builder of $class (Request or Operation) for the wire map $v,
     * with the arguments in the form a PHP caller gives them: a one-value key as a scalar, Bigtable row keys as
     * strings, mutations as Mutation objects, a row in no particular column order.
     *
     * @param class-string<Request>|class-string<Operation> $class
     * @param array<string, mixed> $v
     * @return ($class is class-string<Request> ? array<string, mixed>|null : Operation|null)
     */
    private static function keyOperation(string $class, array $v): array|Operation|null
    {
        $key = static fn (array $k): mixed => count($k) === 1 ? $k[0] : $k;
        $mutations = static fn (array $maps): array => array_map(static fn (array $m): Mutation => match ($m['op']) {
            'set' => Mutation::set($m['family'], $m['qualifier'], $m['value'], $m['ts'] ?? null),
            'delete_cells' => Mutation::deleteCells($m['family'], $m['qualifier']),
            'delete_family' => Mutation::deleteFamily($m['family']),
            'delete_row' => Mutation::deleteRow(),
        }, $maps);
        $common = ['backend' => $v['backend'] ?? null, 'timeoutMs' => $v['timeout_ms'] ?? null];
        $table = $v['table'] ?? '';
        $columnar = ($v['columnar'] ?? false) === true;
        [$method, $args] = match ($v['op'] ?? null) {
            'get' => ['get', [$table, $key($v['key']), $v['columns'] ?? []]],
            'multi_get' => ['multiGet', [$table, array_map($key, $v['keys']), $v['columns'] ?? []]],
            'scan' => [$columnar ? 'scanColumns' : 'scan', [$table, $v['prefix'] ?? [], $v['start'] ?? null, $v['end'] ?? null, $v['limit'] ?? 0, $v['cursor'] ?? null, $v['columns'] ?? []]],
            'put' => ['put', [$table, array_reverse($v['row'], true)]],
            'delete' => ['delete', [$table, $key($v['key'])]],
            'read_rows' => [$columnar ? 'readRowsColumns' : 'readRows', [$table, array_filter([
                'keys' => array_map(static fn (array $k): string => $k[0], $v['keys'] ?? []),
                'prefix' => $v['prefix'][0] ?? null,
                'start' => $v['start'][0] ?? null,
                'end' => $v['end'][0] ?? null,
                'limit' => $v['limit'] ?? 0,
                'cursor' => $v['cursor'] ?? null,
                'families' => $v['families'] ?? [],
                'columns' => $v['columns'] ?? [],
                'latest' => $v['latest'] ?? false,
            ], static fn ($o): bool => $o !== null && $o !== [] && $o !== 0 && $o !== false)]],
            'mutate_row' => ['mutateRow', [$table, $v['key'][0], $mutations($v['mutations'])]],
            'increment' => ['increment', [$table, $v['key'][0], $v['family'], $v['qualifier'], $v['delta'] ?? 0]],
            'check_and_mutate' => ['checkAndMutate', [$table, $v['key'][0], $v['family'], $v['qualifier'] ?? null, $v['value'] ?? null,
                $mutations($v['if_true'] ?? []), $mutations($v['if_false'] ?? [])]],
            default => [null, []],
        };

        if ($method === null) {
            return null;
        }
        if ($columnar && $class === Request::class) {
            // Request has no *Columns builders: the flag is their last argument
            $method = substr($method, 0, -strlen('Columns'));
            $common['columnar'] = true;
        }

        return $class::$method(...$args, ...$common);
    }

    /**
     * understood checks that the client can read a reply vector: errors map to a known code, and query, exec,
     * begin, batch, http and column-oriented replies have the shape Reply expects.
     *
     * @param array<mixed> $reply
     * @return list<string>
     */
    private static function understood(array $reply, bool $inBatch = false): array
    {
        if (!$inBatch && !is_int($reply['id'] ?? null)) {
            return ['reply has no integer id'];
        }
        if (isset($reply['error'])) {
            $e = ServerException::fromError((array) $reply['error']);
            $codes = (new \ReflectionClass(ServerException::class))->getConstants();

            return in_array($e->getErrorCode(), $codes, true) ? [] : ["unknown error code {$e->getErrorCode()}"];
        }
        if (array_key_exists('data', $reply)) {
            $result = Reply::columns($reply);
            if ($result === null) {
                return ['column-oriented reply (join, columnar query) the client cannot turn into a ColumnarResult'];
            }
            $rows = $result->rows();
            $columns = $reply['columns'];
            foreach ($columns as $i => $name) {
                if (array_column($rows, $name) !== $reply['data'][$i] && count(array_unique($columns)) === count($columns)) {
                    return ["column $name of the rows built from the column-oriented reply differs from its data"];
                }
            }
            if (count($rows) !== $reply['count']) {
                return [sprintf('%d rows built from a column-oriented reply of count %d', count($rows), $reply['count'])];
            }
        } elseif (array_key_exists('columns', $reply)) {
            $rows = $reply['rows'] ?? null;
            if (is_array($rows) && in_array(null, $rows, true)) {
                if (Reply::sparseRows($reply, count($rows)) === null) {
                    return ['multi_get reply the client cannot turn into rows and nulls'];
                }
            } elseif (Reply::page($reply) === null) {
                return ['rows reply (query, get, scan, ...) the client cannot turn into rows and a cursor'];
            }
        }
        if (array_key_exists('affected', $reply) && Reply::exec($reply) === null) {
            return ['exec reply the client cannot turn into an ExecResult'];
        }
        if (array_key_exists('status', $reply) && Reply::http($reply) === null) {
            return ['http reply the client cannot turn into an HttpResponse'];
        }
        if (array_key_exists('tx', $reply) && !is_int($reply['tx'])) {
            return ['begin reply without an integer tx'];
        }
        $failures = [];
        foreach ((array) ($reply['results'] ?? []) as $i => $result) {
            foreach (is_array($result) ? self::understood($result, true) : ['not a map'] as $failure) {
                $failures[] = "results[$i]: $failure";
            }
        }

        return $failures;
    }

    /**
     * withoutEmptyParams drops `params: []` from a request map and from its batch ops.
     *
     * @param array<string, mixed> $request
     * @return array<string, mixed>
     */
    private static function withoutEmptyParams(array $request): array
    {
        if (($request['params'] ?? null) === []) {
            unset($request['params']);
        }
        if (isset($request['ops']) && is_array($request['ops'])) {
            $request['ops'] = array_map(static fn ($op) => is_array($op) ? self::withoutEmptyParams($op) : $op, $request['ops']);
        }

        return $request;
    }

    /** fromJson turns manifest JSON into the PHP value the bytes decode to: {"$bin": base64} becomes a string. */
    private static function fromJson(mixed $value): mixed
    {
        if (!is_array($value)) {
            return $value;
        }
        if (count($value) === 1 && array_key_exists('$bin', $value)) {
            return base64_decode((string) $value['$bin'], true);
        }

        return array_map([self::class, 'fromJson'], $value);
    }

    /**
     * same compares a manifest value with a decoded one: maps by key in any order (decoders must accept any
     * order), lists in order, scalars strictly, except that a JSON integer matches an equal float (JSON cannot
     * tell 2 from 2.0).
     */
    private static function same(mixed $expected, mixed $actual): bool
    {
        if (is_string($expected) && is_string($actual) && $expected !== $actual && self::lossy($expected, $actual)) {
            return true;
        }
        if (is_array($expected) && is_array($actual)) {
            if (count($expected) !== count($actual) || array_is_list($expected) !== array_is_list($actual)) {
                return false;
            }
            foreach ($expected as $key => $item) {
                if (!array_key_exists($key, $actual) || !self::same($item, $actual[$key])) {
                    return false;
                }
            }

            return true;
        }
        if (is_int($expected) && is_float($actual)) {
            return (float) $expected === $actual;
        }

        return $expected === $actual;
    }

    /**
     * restore replaces, in a manifest value, each string that is the lossy JSON form of a non-UTF-8 string of the
     * decoded value with the decoded bytes; everything else stays the manifest's.
     */
    private static function restore(mixed $manifest, mixed $decoded): mixed
    {
        if (is_string($manifest) && is_string($decoded)) {
            return $manifest !== $decoded && self::lossy($manifest, $decoded) ? $decoded : $manifest;
        }
        if (is_array($manifest) && is_array($decoded)) {
            foreach ($manifest as $key => $item) {
                if (array_key_exists($key, $decoded)) {
                    $manifest[$key] = self::restore($item, $decoded[$key]);
                }
            }
        }

        return $manifest;
    }

    /**
     * lossy tells whether $json is $bytes, a string that is not valid UTF-8, as Go's encoding/json writes it: each
     * byte that is not part of a valid UTF-8 sequence replaced with U+FFFD.
     */
    private static function lossy(string $json, string $bytes): bool
    {
        if (preg_match('//u', $bytes) === 1) {
            return false; // valid UTF-8: no excuse for a difference
        }
        $scrubbed = preg_replace_callback(
            '/[\x00-\x7F]|[\xC2-\xDF][\x80-\xBF]|\xE0[\xA0-\xBF][\x80-\xBF]|[\xE1-\xEC\xEE\xEF][\x80-\xBF]{2}'
            . '|\xED[\x80-\x9F][\x80-\xBF]|\xF0[\x90-\xBF][\x80-\xBF]{2}|[\xF1-\xF3][\x80-\xBF]{3}|\xF4[\x80-\x8F][\x80-\xBF]{2}|(.)/s',
            static fn (array $m): string => isset($m[1]) ? "\u{FFFD}" : $m[0],
            $bytes,
        );

        return $scrubbed === $json;
    }

    private static function diff(string $what, string $got, string $want): string
    {
        return sprintf('%s encodes to %s, the file holds %s', $what, bin2hex($got), bin2hex($want));
    }

    private static function binHint(mixed $json): string
    {
        return str_contains(json_encode($json) ?: '', '"$bin"')
            ? ' (ext-msgpack packs every PHP string as str, never bin: request vectors should carry binary as str)'
            : '';
    }
}
