<?php

declare(strict_types=1);

namespace Tether\WordPress;

use Tether\Client;
use Tether\Exception\InvalidArgumentException;
use Tether\Sql\SqlText;

/**
 * Wpdb is WordPress's wpdb with every path that touched mysqli (the connection in $this->dbh, mysqli_query,
 * mysqli_real_escape_string, mysqli_fetch_field, ...) going through Tether instead, so that a WordPress site uses
 * tetherd's warm pooled connections to MySQL/MariaDB. Everything else (prepare(), insert(), get_results(), the
 * charset checks, SAVEQUERIES, the hooks) is wpdb's own code, unchanged.
 *
 * Lifecycle, as wpdb's: 1. the constructor (wpdb's) calls db_connect(), which makes the Tether client, reads the
 * server's version, sql_mode and database in one round trip, then runs SET NAMES and SET SESSION sql_mode as wpdb
 * does (tetherd keeps both for this client on whichever pooled connection runs a statement); 2. query() runs each
 * statement through a Session (see there for FOUND_ROWS(), LAST_INSERT_ID(), @variables and transactions);
 * 3. close() rolls back an open transaction at once (its locks are free when close() returns) and closes the
 * socket (Client::close(); with TETHER_PERSISTENT the worker's socket, and its session settings, stay for its next
 * request); otherwise the socket closes with the PHP request (tetherd rolls back what it left open), unless
 * TETHER_PERSISTENT keeps it.
 *
 * Escaping (_real_escape(), so prepare() and esc_sql()) follows the session's sql_mode as mysqli's does: with
 * NO_BACKSLASH_ESCAPES (set by the server's global mode or SET SESSION sql_mode, even mid-request) quotes are
 * doubled and backslashes left as they are.
 *
 * The public properties mean what they mean with mysqli: insert_id, rows_affected, num_rows, last_error (MySQL's
 * message, or one naming what the drop-in refused), last_query, last_result, col_info (names only: Tether sends
 * no other column metadata), queries (with SAVEQUERIES) and num_queries.
 *
 * Columns of the same name (SELECT a.id, b.id) are each kept where mysqli_fetch_row() keeps them: in ARRAY_N rows,
 * get_var()/get_col() by position, and col_info; in last_result's objects, OBJECT_K and ARRAY_A the last column
 * of a name wins, as with mysqli_fetch_object(). (wpdb over mysqli builds ARRAY_N and get_var() from the objects,
 * so there a repeated name loses its earlier columns.)
 */
class Wpdb extends \wpdb
{
    private Config $tetherConfig;
    private ?Session $tetherSession = null;
    private bool $tetherConnected = false;
    /** tetherCausalPending: with TETHER_CAUSAL, this request wrote and the cookie is set at its end (CausalCookie) */
    private bool $tetherCausalPending = false;
    private string $tetherServerInfo = '';
    private string $tetherDatabase = '';
    private ?string $tetherSqlModeAtConnect = null;
    private string $tetherConnectError = '';
    /** @var list<string> column names of the last result */
    private array $tetherColumns = [];

    /**
     * @param string $dbuser unused: tetherd holds the credentials (kept for wpdb's signature)
     * @param string $dbpassword unused
     * @param string $dbname the database of the Tether backend; db_connect() checks that it is the one
     * @param string $dbhost unused except in messages
     */
    public function __construct($dbuser, $dbpassword, $dbname, $dbhost, ?Config $config = null)
    {
        $this->tetherConfig = $config ?? Config::fromConstants();
        parent::__construct($dbuser, $dbpassword, $dbname, $dbhost);
    }

    /** fromWordPressConfig builds the $wpdb that db.php installs, from wp-config.php's DB_* and TETHER_* constants. */
    public static function fromWordPressConfig(): self
    {
        return new self(
            \defined('DB_USER') ? DB_USER : '',
            \defined('DB_PASSWORD') ? DB_PASSWORD : '',
            \defined('DB_NAME') ? DB_NAME : '',
            \defined('DB_HOST') ? DB_HOST : '',
            Config::fromConstants(),
        );
    }

    /**
     * db_connect connects to tetherd and sets the session up as wpdb does (charset, sql_mode) in three round trips.
     * On failure it bails with WordPress's "Error establishing a database connection" page naming the Tether error
     * when $allow_bail, and returns false.
     */
    public function db_connect($allow_bail = true)
    {
        $this->is_mysql = true;
        $this->dbh = null;
        try {
            $client = $this->tetherSession?->client() ?? $this->tetherClient();
            $session = $this->tetherSession ?? new Session($client, $this->tetherConfig->busyWait, $this->tetherConfig->cacheTtlMs);
            $row = $session->run('SELECT VERSION() AS version, @@SESSION.sql_mode AS sql_mode, DATABASE() AS db', false)->rows[0] ?? null;
            if ($row === null) {
                throw new QueryError('Tether: SELECT VERSION() returned no row');
            }
            [$this->tetherServerInfo, $this->tetherSqlModeAtConnect, $database] = [(string) $row[0], (string) $row[1], (string) $row[2]];
            $this->tetherDatabase = $database;
            $this->tetherSession = $session;
            $this->dbh = new Link($client, $this->tetherServerInfo, $this->tetherConfig->socket ?? '(default socket)');
        } catch (\Throwable $e) {
            $this->tetherConnectError = $e->getMessage();
            // As wpdb over mysqli leaves a failed connect in PHP's error log (mysqli's warning), so does the drop-in.
            \error_log(\sprintf('WordPress database error: Tether drop-in (wp-content/db.php) could not connect to the database through tetherd (TETHER_SOCKET %s, TETHER_BACKEND %s): %s', $this->tetherConfig->socket ?? '(not set)', $this->tetherConfig->backend ?? '(not set: tetherd\'s default_backend)', $this->tetherConnectError));
            if (!$allow_bail) {
                return false;
            }
            wp_load_translations_early();
            if (\file_exists(WP_CONTENT_DIR . '/db-error.php')) {
                require_once WP_CONTENT_DIR . '/db-error.php';
                die();
            }
            $message = '<h1>' . __('Error establishing a database connection') . "</h1>\n"
                . '<p><code>' . \htmlspecialchars($this->tetherConnectError, ENT_QUOTES) . "</code></p>\n"
                . '<p>' . \sprintf(
                    'The Tether drop-in (wp-content/db.php) could not reach tetherd at %s, or its backend. The socket is TETHER_SOCKET in wp-config.php (with Debian\'s wordpress package: /etc/wordpress/config-<site>.php). tetherd logs why it is not up to [log] file in tetherd.toml, else to its stderr (journalctl -u tetherd under systemd); this error is in PHP\'s error log too.',
                    '<code>' . \htmlspecialchars($this->tetherConfig->socket ?? '(default socket)', ENT_QUOTES) . '</code>',
                ) . "</p>\n";
            $this->bail($message, 'db_connect_fail');

            return false;
        }
        if (!$this->tetherConnected) {
            $this->init_charset();
        }
        $this->tetherConnected = true;
        // set_sql_mode() below makes the mode read by the connect round trip (less WordPress's incompatible modes)
        // this client's own, and records it for escaping.
        $this->set_charset($this->dbh);
        $this->ready = true;
        $this->set_sql_mode();
        $this->select($this->dbname, $this->dbh);

        return true;
    }

    /**
     * tetherClient makes the drop-in's Tether client; with TETHER_CAUSAL, from the causal token of the request's
     * cookie (CausalCookie), when the client takes it.
     */
    private function tetherClient(): Client
    {
        $options = $this->tetherConfig->clientOptions();
        $token = $this->tetherConfig->causal ? CausalCookie::fromCookies($_COOKIE) : null;
        if ($token !== null) {
            try {
                return new Client(['causal_token' => $token] + $options);
            } catch (InvalidArgumentException) {
                // a cookie that is no token: read as without one
            }
        }

        return new Client($options);
    }

    /** check_connection reports whether tetherd answers, reconnecting (wpdb's retries) when it does not. */
    public function check_connection($allow_bail = true)
    {
        if ($this->tetherSession !== null) {
            try {
                $this->tetherSession->client()->ping();

                return true;
            } catch (\Throwable) {
            }
        }
        for ($tries = 1; $tries <= $this->reconnect_retries; $tries++) {
            if ($this->db_connect(false)) {
                return true;
            }
            \sleep(1);
        }
        if (did_action('template_redirect') || !$allow_bail) {
            return false;
        }
        wp_load_translations_early();
        $this->bail('<h1>' . __('Error reconnecting to the database') . "</h1>\n<p><code>" . \htmlspecialchars($this->tetherConnectError, ENT_QUOTES) . '</code></p>', 'db_connect_fail');
        dead_db();
    }

    /**
     * select checks that $db is the database of the Tether backend: the drop-in cannot switch databases (USE is
     * connection state). Otherwise it fails as wpdb does when a database cannot be selected.
     */
    public function select($db, $dbh = null)
    {
        if ($db === $this->tetherDatabase) {
            return;
        }
        $this->ready = false;
        if (!did_action('template_redirect')) {
            wp_load_translations_early();
            $message = '<h1>' . __('Cannot select database') . "</h1>\n<p>" . \sprintf(
                'The Tether backend %s works in database %s, not %s (DB_NAME in wp-config.php must name the database of the backend).',
                '<code>' . \htmlspecialchars($this->tetherConfig->backend ?? '(default)', ENT_QUOTES) . '</code>',
                '<code>' . \htmlspecialchars($this->tetherDatabase, ENT_QUOTES) . '</code>',
                '<code>' . \htmlspecialchars((string) $db, ENT_QUOTES) . '</code>',
            ) . "</p>\n";
            $this->bail($message, 'db_select_fail');
        }
    }

    /** determine_charset is wpdb's, minus its requirement that $this->dbh be a mysqli link. */
    public function determine_charset($charset, $collate)
    {
        if (empty($this->dbh)) {
            return \compact('charset', 'collate');
        }
        if ('utf8' === $charset && $this->has_cap('utf8mb4')) {
            $charset = 'utf8mb4';
        }
        if ('utf8mb4' === $charset && !$this->has_cap('utf8mb4')) {
            $charset = 'utf8';
            $collate = \str_replace('utf8mb4_', 'utf8_', (string) $collate);
        }
        if ('utf8mb4' === $charset) {
            if (!$collate || 'utf8_general_ci' === $collate) {
                $collate = 'utf8mb4_unicode_ci';
            } else {
                $collate = \str_replace('utf8_', 'utf8mb4_', $collate);
            }
        }
        if ($this->has_cap('utf8mb4_520') && 'utf8mb4_unicode_ci' === $collate) {
            $collate = 'utf8mb4_unicode_520_ci';
        }

        return \compact('charset', 'collate');
    }

    /**
     * set_charset runs `SET NAMES charset [COLLATE collation]` as wpdb does; tetherd re-applies it to every pooled
     * connection that runs this client's statements. Only character sets whose escaping Tether\Sql\SqlText
     * implements (utf8mb4, utf8, utf8mb3, latin1, ascii, binary) are accepted.
     */
    public function set_charset($dbh, $charset = null, $collate = null)
    {
        $charset ??= $this->charset;
        $collate ??= $this->collate;
        if (!$this->has_cap('collation') || empty($charset)) {
            return;
        }
        if (!\in_array(\strtolower((string) $charset), ['utf8mb4', 'utf8', 'utf8mb3', 'latin1', 'ascii', 'binary'], true)) {
            $this->last_error = \sprintf('Tether: character set %s is not supported by the drop-in (its escaping is implemented for utf8mb4, utf8 and latin1)', $charset);
            $this->print_error();

            return;
        }
        $query = $this->prepare('SET NAMES %s', $charset);
        if (!empty($collate)) {
            $query .= $this->prepare(' COLLATE %s', $collate);
        }
        $this->runInternal($query);
    }

    /**
     * set_sql_mode is wpdb's: it reads the session's sql_mode (on connect, from the connect round trip), drops the
     * modes WordPress cannot work with, and sets the rest.
     */
    public function set_sql_mode($modes = array())
    {
        if (empty($modes)) {
            $modes_str = $this->tetherSqlModeAtConnect;
            $this->tetherSqlModeAtConnect = null;
            if ($modes_str === null) {
                $row = $this->runInternal('SELECT @@SESSION.sql_mode');
                $modes_str = $row?->rows[0][0] ?? '';
            }
            if (empty($modes_str)) {
                // Set all the same, so that tetherd keeps it for this client whatever mode a pooled connection
                // opened under another global sql_mode has.
                if ($this->runInternal("SET SESSION sql_mode=''") !== null) {
                    $this->tetherSession?->sqlModeSet('');
                }

                return;
            }
            $modes = \explode(',', $modes_str);
        }
        $modes = \array_change_key_case($modes, CASE_UPPER);
        $incompatible_modes = (array) apply_filters('incompatible_sql_modes', $this->incompatible_modes);
        foreach ($modes as $i => $mode) {
            if (\in_array($mode, $incompatible_modes, true)) {
                unset($modes[$i]);
            }
        }
        $modes_str = \implode(',', $modes);
        // The mode names are the server's own, or a plugin's list: quoted without backslashes, right in either mode.
        if ($this->runInternal("SET SESSION sql_mode='" . SqlText::escapeMySql($modes_str, true) . "'") !== null) {
            $this->tetherSession?->sqlModeSet($modes_str);
        }
    }

    /**
     * _real_escape escapes as mysqli_real_escape_string() does on this session (Tether\Sql\SqlText::escapeMySql()):
     * backslash escapes, or only doubled quotes when the session's sql_mode has NO_BACKSLASH_ESCAPES (where `\'`
     * would end the literal), then adds wpdb's placeholder escape. The mode is the one the PHP client keeps for the
     * socket (Session::noBackslashEscapes()): set on connect, read again after any statement on the socket that
     * sets sql_mode, or after a reconnect.
     */
    public function _real_escape($string)
    {
        if (!\is_scalar($string)) {
            return '';
        }
        if (\is_bool($string)) {
            $string = $string ? '1' : '';
        }

        $string = (string) $string;
        // A value with none of the bytes either mode escapes is the same escaped in both: the mode is not asked
        // for (on a new socket that would be two round trips before wpdb's own SET SESSION sql_mode records it).
        $escaped = \strpbrk($string, "\0\n\r\\'\"\x1a") === false ? $string : SqlText::escapeMySql($string, $this->tetherNoBackslashEscapes());

        return $this->add_placeholder_escape($escaped);
    }

    /** tetherNoBackslashEscapes tells whether the session's sql_mode has NO_BACKSLASH_ESCAPES (the client's cache). */
    private function tetherNoBackslashEscapes(): bool
    {
        return $this->tetherSession !== null && $this->dbh ? $this->tetherSession->noBackslashEscapes() : false;
    }

    /** print_error is wpdb's; with no message it shows last_error (wpdb would ask mysqli_error()). */
    public function print_error($str = '')
    {
        if (!$str) {
            $str = $this->last_error;
        }

        return parent::print_error($str);
    }

    /** flush forgets the last result, as wpdb's does. */
    public function flush()
    {
        $this->last_result = array();
        $this->col_info = null;
        $this->last_query = null;
        $this->rows_affected = 0;
        $this->num_rows = 0;
        $this->last_error = '';
        $this->result = null;
        $this->tetherColumns = [];
    }

    /**
     * query is wpdb::query() with the statement run by Tether: the `query` filter, the invalid-text check, the
     * SAVEQUERIES log and the return values are wpdb's: true for CREATE/ALTER/TRUNCATE/DROP, the rows affected
     * for INSERT/REPLACE/UPDATE/DELETE, the rows selected otherwise, false on error (with last_error set and
     * print_error() called).
     */
    public function query($query)
    {
        if (!$this->ready) {
            $this->check_current_query = true;

            return false;
        }
        $query = apply_filters('query', $query);
        if (!$query) {
            $this->insert_id = 0;

            return false;
        }
        $this->flush();
        $this->func_call = "\$db->query(\"$query\")";
        if ($this->check_current_query && !$this->check_ascii($query)) {
            $stripped_query = $this->strip_invalid_text_from_query($query);
            $this->flush();
            if ($stripped_query !== $query) {
                $this->insert_id = 0;
                $this->last_query = $query;
                wp_load_translations_early();
                $this->last_error = __('WordPress database error: Could not perform query because it contains invalid data.');

                return false;
            }
        }
        $this->check_current_query = true;
        $this->last_query = $query;

        $isDdl = \preg_match('/^\s*(create|alter|truncate|drop)\s/i', $query) === 1;
        $isDml = !$isDdl && \preg_match('/^\s*(insert|delete|update|replace)\s/i', $query) === 1;
        $result = $this->doQuery((string) $query, $isDdl || $isDml);
        if ($result instanceof QueryError && $result->notSent() && $this->check_connection()) {
            $result = $this->doQuery((string) $query, $isDdl || $isDml);
        }
        if ($result instanceof QueryError) {
            $this->last_error = $result->getMessage();
            if ($this->insert_id && \preg_match('/^\s*(insert|replace)\s/i', $query)) {
                $this->insert_id = 0;
            }
            $this->print_error();

            return false;
        }
        $this->result = $result;
        if (($isDdl || $isDml) && $this->tetherConfig->causal && !$this->tetherCausalPending) {
            // TETHER_CAUSAL: this request wrote; its token goes into the cookie when PHP sends the headers (after
            // every write made before the page's first output, a redirect's included).
            $this->tetherCausalPending = true;
            $client = $this->tetherSession->client();
            \header_register_callback(static function () use ($client): void {
                CausalCookie::send($client);
            });
        }
        if ($isDdl) {
            return true;
        }
        if ($isDml) {
            $this->rows_affected = $result->affectedRows;
            if (\preg_match('/^\s*(insert|replace)\s/i', $query)) {
                $this->insert_id = $result->insertId;
            }

            return $this->rows_affected;
        }
        $columns = $this->tetherColumns = $result->columns;
        // One object per row as mysqli_fetch_object() makes it: by name, a repeated name's last column winning
        // (array_combine's rule too), a numeric name as a string property. One call per row, not one per column.
        $objects = [];
        foreach ($result->rows as $values) {
            $objects[] = (object) \array_combine($columns, $values);
        }
        $this->last_result = $objects;
        $this->num_rows = \count($objects);

        return $this->num_rows;
    }

    /**
     * get_var is wpdb's, with column $x counted by position in the result as mysqli returned it: wpdb reads it
     * from the row's object, where a repeated column name (SELECT a.id, b.id) left only its last column. get_col()
     * reads through it.
     */
    public function get_var($query = null, $x = 0, $y = 0)
    {
        $value = parent::get_var($query, $x, $y);
        $rows = $this->positionalRows();
        if ($rows === null) {
            return $value;
        }
        $value = $rows[$y][$x] ?? null;

        return $value !== null && $value !== '' ? $value : null;
    }

    /** get_row is wpdb's, with an ARRAY_N row holding every column in order, as mysqli_fetch_row() gives it (see get_var()). */
    public function get_row($query = null, $output = OBJECT, $y = 0)
    {
        $row = parent::get_row($query, $output, $y);
        if (ARRAY_N === $output && \is_array($row)) {
            $row = $this->positionalRows()[$y] ?? $row;
        }

        return $row;
    }

    /**
     * get_results is wpdb's, with ARRAY_N rows holding every column in order, as mysqli_fetch_row() gives them (see
     * get_var()). OBJECT, OBJECT_K and ARRAY_A are wpdb's: by name, the last column of a repeated name wins, as
     * with mysqli.
     */
    public function get_results($query = null, $output = OBJECT)
    {
        $rows = parent::get_results($query, $output);
        if (ARRAY_N === $output && \is_array($rows)) {
            $rows = $this->positionalRows() ?? $rows;
        }

        return $rows;
    }

    /**
     * positionalRows returns the last result's rows with every column by position, or null when there is none or
     * last_result no longer holds its rows (a caller replaced it).
     *
     * @return list<list<?string>>|null
     */
    private function positionalRows(): ?array
    {
        $result = $this->result;
        if (!$result instanceof Result || $result->isExec || !\is_array($this->last_result) || \count($this->last_result) !== \count($result->rows)) {
            return null;
        }

        return $result->rows;
    }

    /** load_col_info builds col_info from the last result's column names (mysqli gave a field object per column). */
    protected function load_col_info()
    {
        if ($this->col_info) {
            return;
        }
        $this->col_info = [];
        foreach ($this->tetherColumns as $i => $name) {
            $this->col_info[$i] = (object) [
                'name' => $name,
                'orgname' => $name,
                'table' => '',
                'orgtable' => '',
                'def' => '',
                'db' => $this->tetherDatabase,
                'catalog' => 'def',
                'max_length' => 0,
                'length' => null,
                'charsetnr' => null,
                'flags' => null,
                'type' => null,
                'decimals' => null,
            ];
        }
    }

    /** close rolls back an open transaction and drops the socket to tetherd; false when not connected. */
    public function close()
    {
        if (!$this->dbh || $this->tetherSession === null) {
            return false;
        }
        $this->tetherSession->close();
        $this->dbh = null;
        $this->ready = false;
        $this->tetherConnected = false;

        return true;
    }

    /**
     * has_cap answers wpdb's capability questions from the server version read on connect; utf8mb4 needs no
     * client library check (tetherd's MySQL driver speaks utf8mb4). Other capabilities are wpdb's answer.
     */
    public function has_cap($db_cap)
    {
        $db_version = $this->db_version();
        switch (\strtolower((string) $db_cap)) {
            case 'collation':
            case 'group_concat':
            case 'subqueries':
                return \version_compare($db_version, '4.1', '>=');
            case 'set_charset':
                return \version_compare($db_version, '5.0.7', '>=');
            case 'utf8mb4':
                return \version_compare($db_version, '5.5.3', '>=');
            case 'utf8mb4_520':
                return \version_compare($db_version, '5.6', '>=');
        }

        return parent::has_cap($db_cap);
    }

    /** db_server_info returns the server's VERSION() read on connect (e.g. 10.11.6-MariaDB-0+deb12u1), or false. */
    public function db_server_info()
    {
        return $this->tetherServerInfo !== '' ? $this->tetherServerInfo : false;
    }

    /** db_version returns the server's version number, as wpdb's does. */
    public function db_version()
    {
        return \preg_replace('/[^0-9.].*/', '', (string) $this->db_server_info());
    }

    /** tether_in_transaction tells whether a START TRANSACTION is open (every query then runs in one Tether transaction). */
    public function tether_in_transaction(): bool
    {
        return $this->tetherSession?->inTransaction() ?? false;
    }

    /** doQuery runs one statement, timing and logging it as wpdb's _do_query() does. */
    private function doQuery(string $query, bool $exec): Result|QueryError
    {
        if (\defined('SAVEQUERIES') && SAVEQUERIES) {
            $this->timer_start();
        }
        try {
            $result = $this->tetherSession?->run($query, $exec) ?? new QueryError('Tether: not connected to tetherd', 2006, true);
        } catch (QueryError $e) {
            $result = $e;
        }
        $this->num_queries++;
        if (\defined('SAVEQUERIES') && SAVEQUERIES) {
            $this->log_query($query, $this->timer_stop(), $this->get_caller(), $this->time_start, array());
        }

        return $result;
    }

    /** runInternal runs a statement of wpdb's own (connect-time SET NAMES, sql_mode) outside query()'s bookkeeping. */
    private function runInternal(string $sql): ?Result
    {
        try {
            return $this->tetherSession?->run($sql, false);
        } catch (QueryError $e) {
            $this->last_error = $e->getMessage();

            return null;
        }
    }
}
