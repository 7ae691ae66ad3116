<?php

declare(strict_types=1);

namespace Tether\WordPress\Tests\Integration;

use PHPUnit\Framework\TestCase;
use Tether\Client;
use Tether\Sql\SqlText;
use Tether\Tests\Support\PrivateTetherd;
use Tether\WordPress\Tests\Support\Browser;
use Tether\WordPress\Tests\Support\Env;
use Tether\WordPress\Tests\Support\Sites;
use Tether\WordPress\Tests\Support\WordPressSite;

require_once \dirname(__DIR__, 3) . '/php/tests/Support/PrivateTetherd.php';

/**
 * WpdbTest drives $wpdb directly, inside real WordPress requests of the Tether site (tests/fixtures/probe.php),
 * and compares with what mysqli gives on the same database where mysqli is the reference.
 */
final class WpdbTest extends TestCase
{
    public function testTheSiteRunsOnTheDropIn(): void
    {
        $sites = Sites::get();
        self::assertSame('Tether\\WordPress\\Wpdb', self::probeOn($sites->tether, 'savequeries', 'savequeries=1')['class']);
        self::assertSame('wpdb', self::probeOn($sites->native, 'savequeries', 'savequeries=1')['class']);
    }

    public function testInsertIdRowsAffectedNumRowsAndValuesAsMysqliGivesThem(): void
    {
        $o = self::probe('basics');
        self::assertTrue($o['create']);
        self::assertSame([1, 1, 2, 2, 2], [$o['insert1'], $o['insert_id1'], $o['insert2'], $o['insert_id2'], $o['rows_affected_insert2']], 'insert(): rows and insert_id (a multi-row INSERT gives the first id, as mysqli_insert_id)');
        self::assertSame(1, $o['update']);
        self::assertSame(0, $o['update_same'], 'UPDATE changing nothing affects 0 rows (mysqli counts changed rows)');
        self::assertSame(2, $o['replace'], 'REPLACE of an existing row: delete + insert = 2');
        self::assertSame([3, 3], [$o['select'], $o['num_rows']]);
        self::assertSame(['id' => '1', 'v' => 'r', 'd' => '2024-02-29 23:59:59', 'n' => '7', 'z' => null, 'f' => '1.5', 'dec_' => '2.50'], $o['row'], 'values are strings or null, DATETIME with a space, as mysqli gives them');
        self::assertSame([[], ['id', 'value', 'd'], 'value'], [$o['empty'], $o['empty_col_names'], $o['empty_col_name_1']], 'get_col_info() names the columns of a result with no rows');
        self::assertSame([1, 1], [$o['delete'], $o['rows_affected_delete']]);
        self::assertSame(['wpt_tether_probe'], $o['show']);
        self::assertSame(['id', 'v', 'd', 'n'], $o['describe']);
        self::assertTrue($o['truncate']);
        self::assertSame(1, $o['insert_id_before_failed_insert']);
        self::assertSame(0, $o['insert_id_after_failed_insert'], 'a failed INSERT clears insert_id, as with mysqli');
        self::assertFalse($o['bad']);
        self::assertSame('SELEC 1', $o['bad_last_query']);
        self::assertFalse($o['missing_table']);
        self::assertFalse($o['dup']);

        // last_error is MySQL's own message, the one mysqli_error() gives for the same statement.
        $mysqli = Env::mysqli();
        \mysqli_report(MYSQLI_REPORT_OFF);
        foreach (['bad_error' => 'SELEC 1', 'missing_table_error' => 'SELECT * FROM tether_no_such_table'] as $key => $sql) {
            $mysqli->query($sql);
            self::assertSame($mysqli->error, $o[$key], "last_error for $sql");
        }
        $mysqli->query('CREATE TEMPORARY TABLE t_dup (id INT PRIMARY KEY)');
        $mysqli->query('INSERT INTO t_dup VALUES (1)');
        $mysqli->query('INSERT INTO t_dup VALUES (1)');
        self::assertSame($mysqli->error, $o['dup_error']);
    }

    /**
     * The same $wpdb calls, on the native site (wpdb over mysqli) and on the Tether site, answer the same: charset and
     * capabilities, column charsets and lengths, invalid-text stripping and the refused insert, results in every
     * output shape, empty queries, WP_Query's found_posts, close() and reconnect.
     */
    public function testSameAnswersAsWpdbOverMysqli(): void
    {
        $sites = Sites::get();
        $native = self::probeOn($sites->native, 'compat')['result'];
        $tether = self::probeOn($sites->tether, 'compat')['result'];
        self::assertSame('utf8mb4', $native['charset'][0]);
        self::assertFalse($native['insert_invalid'], 'native: invalid UTF-8 refused by wpdb');
        self::assertSame('1', $native['query_after_reconnect']);
        self::assertSame($native, $tether);
    }

    /**
     * Columns of the same name (literals, two calls of one function, a join selecting both ids) are each kept where
     * mysqli_fetch_row() keeps them: ARRAY_N rows, get_var()/get_col() by position, col_info; by name (OBJECT,
     * ARRAY_A) the last one wins, as on the native site. (wpdb over mysqli loses the earlier columns in ARRAY_N,
     * which it builds from the objects; the drop-in does not.)
     */
    public function testRepeatedColumnNamesKeepEveryColumn(): void
    {
        $sites = Sites::get();
        $tether = self::probeOn($sites->tether, 'repeated_columns')['result'];
        $native = self::probeOn($sites->native, 'repeated_columns')['result'];
        self::assertSame([['1', '2', '3']], $tether['literals']['mysqli_rows']);
        self::assertSame([['5', '6']], $tether['one_function_twice']['mysqli_rows']);
        self::assertSame([['1', '10', 'ten'], ['2', '20', 'twenty']], $tether['join']['mysqli_rows']);
        self::assertCount(6, $tether);
        foreach ($tether as $what => $o) {
            $rows = $o['mysqli_rows'];
            self::assertSame('', $o['errors'], $what);
            self::assertSame($rows, $o['array_n'], "$what: get_results ARRAY_N");
            self::assertSame($o['mysqli_names'], $o['col_info'], "$what: get_col_info");
            self::assertSame([$rows[0], $rows[1] ?? null], $o['row_n'], "$what: get_row ARRAY_N");
            self::assertSame(\array_column($rows, 1), $o['col_1'], "$what: get_col 1");
            self::assertSame($rows[0][1], $o['var_1'], "$what: get_var 1");
            self::assertSame($native[$what]['array_a'], $o['array_a'], "$what: ARRAY_A as wpdb over mysqli");
            self::assertSame($native[$what]['object'], $o['object'], "$what: OBJECT as wpdb over mysqli");
        }
        self::assertSame([['x' => '2', 'y' => '3']], $tether['literals']['array_a'], 'by name the last column wins');
    }

    public function testSavequeriesLogsEachQuery(): void
    {
        $o = self::probe('savequeries', 'savequeries=1');
        self::assertTrue($o['savequeries']);
        self::assertSame(1, $o['added']);
        self::assertSame('SELECT 40 + 2', $o['sql']);
        self::assertTrue($o['time_is_float']);
        self::assertTrue($o['start_is_float']);
        self::assertStringContainsString('Tether\\WordPress\\Wpdb->query', $o['caller']);
    }

    /**
     * The escaping is mysqli_real_escape_string on a utf8mb4 connection, byte for byte, on random bytes: in the
     * default sql_mode, and with NO_BACKSLASH_ESCAPES (where mysqli only doubles quotes).
     */
    public function testEscapeIsMysqliRealEscapeString(): void
    {
        $mysqli = Env::mysqli();
        $nbe = Env::mysqli();
        $nbe->query("SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_BACKSLASH_ESCAPES')");
        $alphabet = ["\0", "\n", "\r", '\\', "'", '"', "\x1a", '%', '_', 'a', ' ', "\x80", "\xbf", "\xc2", "\xc3", "\xe0", "\xed", "\xf0", "\xf4", "\xf8", "\xff", 'é', '😀', '€', '漢'];
        \mt_srand(42);
        for ($n = 0; $n < 5000; $n++) {
            $s = '';
            for ($k = \mt_rand(0, 10); $k > 0; $k--) {
                $s .= $alphabet[\mt_rand(0, \count($alphabet) - 1)];
            }
            self::assertSame(\bin2hex($mysqli->real_escape_string($s)), \bin2hex(SqlText::escapeMySql($s, false)), 'input ' . \bin2hex($s));
            self::assertSame(\bin2hex($nbe->real_escape_string($s)), \bin2hex(SqlText::escapeMySql($s, true)), 'NO_BACKSLASH_ESCAPES, input ' . \bin2hex($s));
        }
    }

    /** prepare() + the drop-in's escaping store and find quotes, backslashes, NUL, Ctrl-Z, % and multibyte text. */
    public function testPrepareAndEscapeRoundTrip(): void
    {
        $values = ["it's", 'say "hi"', 'back\\slash', "nul\0byte", "ctrl\x1aZ", "new\nline\r\n", '100% _wild_', 'ünïcödé 漢字 😀', "\\'; DROP TABLE x; --", "trailing\\"];
        $sites = Sites::get();
        $browser = new Browser();
        $response = $browser->post($sites->tether->url('/tether-probe.php?case=escape'), ['values' => \base64_encode((string) \json_encode($values))]);
        $out = $response->json()['result'];
        $mysqli = Env::mysqli();
        foreach ($values as $i => $value) {
            self::assertSame(\base64_encode($value), $out[$i]['back'], 'read back ' . \json_encode($value));
            self::assertSame(\base64_encode($mysqli->real_escape_string($value)), $out[$i]['escaped'], '_real_escape ' . \json_encode($value));
            self::assertSame('1', $out[$i]['like'], 'esc_like ' . \json_encode($value));
        }
    }

    /**
     * NO_BACKSLASH_ESCAPES set mid-request by SET SESSION sql_mode: prepare() (through _real_escape()) escapes as
     * mysqli does in that mode, every value is stored and read back exactly, and `x\' OR 1=1 -- ` matches one row.
     */
    /**
     * Connecting costs three round trips (VERSION()/sql_mode/DATABASE(), SET NAMES, SET SESSION sql_mode), not five:
     * escaping a value that holds nothing either mode escapes does not read the mode, and wpdb's own SET SESSION
     * sql_mode records it, so a value that needs escaping afterwards costs none either.
     */
    public function testConnectTakesThreeRoundTripsAndEscapingNoMore(): void
    {
        $o = self::probe('connect_requests');
        self::assertSame(3, $o['connect'], 'requests sent by db_connect()');
        self::assertSame("it\\'s", $o['escaped']);
        self::assertSame(3, $o['after_escape'], 'requests sent after escaping a quote');
    }

    public function testEscapingFollowsSqlModeSetBySetSession(): void
    {
        $o = self::escapeModeProbe('how=session');
        self::assertSame("it\\'s \\\\", $o['default_escape'], 'default mode first');
        self::assertSame("it\\'s \\\\", $o['escape_after_restore'], 'default mode again after SET sql_mode without it');
    }

    /** NO_BACKSLASH_ESCAPES in the server's global sql_mode, which a new session starts in: the same. */
    public function testEscapingFollowsTheServersGlobalSqlMode(): void
    {
        Sites::get();
        PrivateTetherd::withGlobalSqlMode('NO_BACKSLASH_ESCAPES', function (PrivateTetherd $tetherd): void {
            $o = self::escapeModeProbe('how=global&socket=' . \rawurlencode($tetherd->socket));
            self::assertSame("it''s \\", $o['default_escape'], 'escaped for the mode the session started in');
        });
    }

    /**
     * close() in a transaction that holds a row lock releases it at once, and the write is rolled back: with the
     * socket of the request (the default) and with TETHER_PERSISTENT's.
     */
    public function testCloseRollsBackAndFreesTheLocksAtOnce(): void
    {
        foreach (['', 'persistent=1'] as $query) {
            $o = self::probe('close_lock', $query);
            self::assertSame([true, 1, true], [$o['begin'] !== false, $o['update'], $o['close']], $query);
            self::assertSame(1, $o['direct_update'], "$query: the row lock was released by close()");
            self::assertLessThan(1.5, $o['seconds'], "$query: no lock wait");
            self::assertSame(110, $o['v'], "$query: the transaction was rolled back");
            self::assertTrue($o['reconnect']);
        }
    }

    /** close() and db_connect() over and over in one request leave no socket open. */
    public function testCloseAndReconnectCyclesLeakNoSocket(): void
    {
        $o = self::probe('close_cycles');
        self::assertSame('', $o['error']);
        self::assertSame($o['before'], $o['after'], '50 close/connect cycles leave no socket open');
    }

    /** A failed connect is written to PHP's error log (as mysqli's warning is without the drop-in), naming what to fix. */
    public function testFailedConnectIsLoggedToPhpsErrorLog(): void
    {
        $o = self::probe('connect_fail');
        self::assertFalse($o['ready']);
        self::assertStringContainsString('WordPress database error: Tether drop-in (wp-content/db.php) could not connect', $o['log']);
        self::assertStringContainsString('TETHER_SOCKET ' . $o['socket'], $o['log']);
        self::assertStringContainsString('No socket file at ' . $o['socket'], $o['log']);
        self::assertStringContainsString('journalctl -u tetherd', $o['log']);
    }

    /** @return array<string, mixed> */
    private static function escapeModeProbe(string $query): array
    {
        $values = ["it's", 'back\\slash', "x\\' OR 1=1 -- ", "\\'", "'", '\\', "a\\\\'b", "trailing\\", "nul\0 \x1a \n \" end", '100% _wild_'];
        $sites = Sites::get();
        $response = (new Browser())->post($sites->tether->url('/tether-probe.php?case=escape_mode&' . $query), ['values' => \base64_encode((string) \json_encode($values))]);
        if ($response->status !== 200) {
            self::fail("probe escape_mode: HTTP {$response->status}: " . \substr($response->body, 0, 2000) . "\n" . \substr($sites->tether->serverLog(), -3000));
        }
        $o = $response->json()['result'];
        self::assertSame('', $o['set_error'] ?? '');
        self::assertStringContainsString('NO_BACKSLASH_ESCAPES', $o['sql_mode']);
        $mysqli = Env::mysqli();
        $mysqli->query("SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_BACKSLASH_ESCAPES')");
        foreach ($values as $i => $value) {
            $r = $o['values'][$i];
            self::assertSame([1, ''], [$r['insert'], $r['insert_error']], 'insert ' . \json_encode($value));
            self::assertSame(\base64_encode($value), $r['back'], 'stored and read back: ' . \json_encode($value));
            self::assertSame('1', $r['matches'], 'matches exactly one row: ' . \json_encode($value));
            self::assertSame(\base64_encode($mysqli->real_escape_string($value)), $r['escaped'], 'as mysqli escapes it in NO_BACKSLASH_ESCAPES: ' . \json_encode($value));
        }
        self::assertSame(\count($values), $o['rows']);

        return $o;
    }

    /**
     * FOUND_ROWS(), LAST_INSERT_ID() and @variables stay this $wpdb's while another client runs statements on the
     * same pool between the statement that set them and the one that reads them.
     */
    public function testConnectionBoundStateSurvivesAnotherClientInterleaving(): void
    {
        $o = self::probe('interleaved');
        self::assertSame(['1', '2', '3'], $o['page']);
        self::assertSame('37', $o['found_rows'], 'SELECT FOUND_ROWS() after SQL_CALC_FOUND_ROWS ... LIMIT 3 over 37 rows');
        self::assertSame(['FOUND_ROWS()'], $o['found_rows_col']);
        self::assertSame(['twice' => '74', 's' => 'FOUND_ROWS() stays in a literal'], $o['found_rows_in_expr'], 'FOUND_ROWS() inside an expression');
        self::assertSame((string) $o['insert_id'], $o['last_insert_id']);
        self::assertSame((string) $o['insert_id'], $o['last_insert_id_in_expr']);
        self::assertSame('42', $o['var']);
        self::assertSame('82', $o['var_assigned']);
        self::assertSame('a@b.example', $o['email_in_string']);
    }

    /**
     * The same interleaving through a bare Tether client shows what the drop-in guards against: FOUND_ROWS() in a
     * later statement answers for whichever pooled connection runs it, which another client used meanwhile.
     */
    public function testWithoutTheDropInFoundRowsWouldBeAnotherClients(): void
    {
        $client = static fn (): Client => new Client(['socket' => Env::get('TETHER_SOCKET'), 'backend' => Env::get('TETHER_IT_MYSQL_BACKEND'), 'persistent' => false]);
        $mine = $client();
        $mine->query('SELECT SQL_CALC_FOUND_ROWS seq FROM seq_1_to_37 LIMIT 3');
        $transactions = [];
        for ($i = 0; $i < 8; $i++) {
            $tx = $client()->begin(null, 5000);
            $tx->query('SELECT SQL_CALC_FOUND_ROWS seq FROM seq_1_to_5 LIMIT 1');
            $transactions[] = $tx;
        }
        foreach ($transactions as $tx) {
            $tx->commit();
        }
        self::assertNotSame(37, (int) $mine->queryOne('SELECT FOUND_ROWS() AS n')['n']);
    }

    public function testTransactionsMapOntoATetherTransaction(): void
    {
        $o = self::probe('transaction');
        self::assertSame(0, $o['start']);
        self::assertTrue($o['in_tx']);
        self::assertSame(1, $o['inside_sees'], 'the transaction sees its own insert');
        self::assertSame(0, $o['other_sees_uncommitted'], 'another client does not see it before COMMIT');
        self::assertSame(0, $o['after_rollback'], 'ROLLBACK undid it');
        self::assertTrue($o['lock_in_tx'], 'SELECT ... FOR UPDATE in the transaction');
        self::assertSame('1', $o['get_lock_in_tx'], 'GET_LOCK() is allowed inside a transaction');
        self::assertFalse($o['in_tx_after']);
        self::assertSame(1, $o['after_commit']);
        self::assertSame(0, $o['autocommit_other_sees'], 'SET autocommit = 0 opened a transaction');
        self::assertSame(1, $o['autocommit_after'], 'SET autocommit = 1 committed it');
        self::assertSame([0, ''], [$o['rollback_without_tx'], $o['rollback_without_tx_error']], 'ROLLBACK without a transaction does nothing, as in MySQL');
    }

    /** What cannot be served on a pool fails with last_error naming it, and none of it runs. */
    public function testUnservableQueriesFailWithAClearError(): void
    {
        $o = self::probe('refused');
        $expected = [
            'lock' => 'LOCK TABLES is not supported',
            'multi' => 'more than one statement',
            'multi_select' => 'more than one statement',
            'temporary' => 'CREATE TEMPORARY TABLE outside a transaction',
            'get_lock' => 'GET_LOCK() outside a transaction',
            'use' => 'USE outside a transaction',
            'start_ro' => 'START TRANSACTION READ ONLY is not supported',
        ];
        foreach ($expected as $name => $message) {
            self::assertFalse($o[$name]['result'], "$name must fail");
            self::assertStringContainsString($message, $o[$name]['error'], $name);
            self::assertStringStartsWith('Tether: ', $o[$name]['error'], $name);
        }
        self::assertSame(0, $o['multi_ran'], 'no part of a multi-statement string ran');
        self::assertSame('5', $o['trailing_semicolon'], 'one statement with a trailing ; is fine, as with mysqli');
        self::assertSame('a;b', $o['semicolon_in_string']);
    }

    /**
     * A request's session settings end with it, as its own mysqli connection would: a later request of the same
     * PHP worker (a site served by one worker) starts from the server's defaults.
     */
    public function testSessionSettingsDoNotOutliveTheRequest(): void
    {
        Sites::get(); // installs the wpt_ tables this second server of the Tether site uses
        $site = WordPressSite::create('tether-one-worker', 'wpt_', true);
        $site->start(1);
        try {
            $browser = new Browser();
            $set = $browser->get($site->url('/tether-probe.php?case=time_zone&set=%2B07:00'))->json()['result'];
            $next = $browser->get($site->url('/tether-probe.php?case=time_zone'))->json()['result'];
        } finally {
            $site->stop();
        }
        self::assertSame(['time_zone' => '+07:00', 'error' => ''], $set);
        self::assertSame(['time_zone' => 'SYSTEM', 'error' => ''], $next);
    }

    /**
     * TETHER_CACHE_TTL: a repeated read is answered from tetherd's cache (a change behind its back is not seen
     * within the TTL), any write through the drop-in makes the next read fresh, and inside a transaction nothing
     * comes from the cache. The site without the TTL sees every change at once.
     */
    public function testCacheTtlServesReadsUntilAWriteThroughTether(): void
    {
        $sites = Sites::get();
        $cached = (new Browser())->get($sites->cached->url('/tether-probe.php?case=cache'))->json()['result'];
        self::assertSame(['read1' => 'first', 'read2' => 'first', 'after_direct_write' => 'first',
            'after_tether_write' => 'behind', 'in_transaction' => 'in tx'], $cached);
        $plain = (new Browser())->get($sites->tether->url('/tether-probe.php?case=cache'))->json()['result'];
        self::assertSame(['read1' => 'first', 'read2' => 'first', 'after_direct_write' => 'behind',
            'after_tether_write' => 'behind', 'in_transaction' => 'in tx'], $plain);
    }

    /** Site Health's info (wp-admin/site-health.php?tab=debug) reads $wpdb->dbh: it shows the drop-in's link. */
    public function testSiteHealthReadsTheLink(): void
    {
        $site = Sites::get()->tether;
        $admin = new Browser();
        $admin->get($site->url('/wp-login.php'));
        $admin->post($site->url('/wp-login.php'), ['log' => 'admin', 'pwd' => 'tether-admin-pw', 'wp-submit' => 'Log In', 'testcookie' => '1']);
        $page = $admin->get($site->url('/wp-admin/site-health.php?tab=debug'));
        self::assertSame(200, $page->status);
        $version = Env::mysqli()->query('SELECT VERSION()')->fetch_row()[0];
        self::assertStringContainsString('extension: Tether\\WordPress\\Link', $page->body);
        self::assertStringContainsString('server_version: ' . $version, $page->body);
        self::assertStringContainsString('client_version: tether-php', $page->body);
        self::assertStringNotContainsString('Fatal error', $page->body);
    }

    /**
     * With tetherd unreachable, WordPress shows its database error page: terse on the front end (as with mysqli),
     * naming the Tether error in wp-admin (dead_db() shows $wpdb->error there).
     */
    public function testUnreachableTetherdGivesTheDatabaseErrorPage(): void
    {
        $site = WordPressSite::create('unreachable', 'wpu_', true, Env::get('TETHER_IT_DIR') . '/no-such-tetherd.sock');
        $site->start(1);
        try {
            $front = (new Browser())->get($site->url('/'));
            $admin = (new Browser())->get($site->url('/wp-admin/'));
        } finally {
            $site->stop();
        }
        self::assertSame(500, $front->status);
        self::assertStringContainsString('Error establishing a database connection', $front->body);
        self::assertSame(500, $admin->status);
        self::assertStringContainsString('Error establishing a database connection', $admin->body);
        self::assertStringContainsString('Tether: cannot reach tetherd', $admin->body);
        self::assertStringContainsString('no-such-tetherd.sock', $admin->body);
    }

    /** @return array<string, mixed> */
    private static function probe(string $case, string $query = ''): array
    {
        return self::probeOn(Sites::get()->tether, $case, $query)['result'];
    }

    /** @return array<string, mixed> */
    private static function probeOn(WordPressSite $site, string $case, string $query = ''): array
    {
        $response = (new Browser())->get($site->url('/tether-probe.php?case=' . $case . ($query !== '' ? '&' . $query : '')));
        if ($response->status !== 200) {
            self::fail("probe $case: HTTP {$response->status}: " . \substr($response->body, 0, 2000) . "\n" . \substr($site->serverLog(), -3000));
        }

        return $response->json();
    }
}
