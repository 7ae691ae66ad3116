<?php

declare(strict_types=1);

namespace Tether\WordPress\Tests\Support;

/**
 * WordPressSite is one WordPress 6.1 site of the tests: a site root under var/it-wordpress/sites/NAME with
 * symlinks to /usr/share/wordpress's files, its own wp-config.php (table prefix, and for the Tether site the
 * TETHER_* constants) and wp-content/ (Debian's themes and plugins, plus db.php for the Tether site), served by
 * `php -S` on a free port through tests/fixtures/router.php. Nothing under /etc or /usr/share is changed.
 */
final class WordPressSite
{
    /** @var resource|null */
    private $process = null;
    private int $port = 0;

    private function __construct(
        public readonly string $name,
        public readonly string $root,
        public readonly string $prefix,
        public readonly bool $tether,
    ) {
    }

    /**
     * create writes the site root afresh (the database tables are the installer's business). $tetherSocket
     * overrides the TETHER_SOCKET the Tether site gets (default: the test tetherd's); $cacheTtlMs > 0 sets its
     * TETHER_CACHE_TTL; $backend and $dbName another TETHER_BACKEND and DB_NAME (the replicated backend's); $constants
     * more wp-config.php lines.
     */
    public static function create(string $name, string $prefix, bool $tether, ?string $tetherSocket = null, int $cacheTtlMs = 0, ?string $backend = null, ?string $dbName = null, string $constants = ''): self
    {
        $package = \dirname(__DIR__, 2);
        $base = \getenv('TETHER_IT_DIR') ?: \dirname($package, 2) . '/var/it-wordpress';
        $root = $base . '/sites/' . $name;
        if (\is_dir($root)) {
            self::removeTree($root);
        }
        \mkdir($root . '/wp-content/uploads', 0777, true);
        foreach (\scandir('/usr/share/wordpress') as $entry) {
            if (\in_array($entry, ['.', '..', 'wp-config.php', 'wp-content', '.htaccess'], true)) {
                continue;
            }
            \symlink('/usr/share/wordpress/' . $entry, $root . '/' . $entry);
        }
        foreach (['themes', 'plugins', 'languages'] as $dir) {
            \symlink('/usr/share/wordpress/wp-content/' . $dir, $root . '/wp-content/' . $dir);
        }
        if ($tether) {
            \symlink($package . '/db.php', $root . '/wp-content/db.php');
        }
        \symlink($package . '/tests/fixtures/probe.php', $root . '/tether-probe.php');
        $tetherConstants = $tether ? \sprintf(
            "define('TETHER_SOCKET', %s);\ndefine('TETHER_BACKEND', %s);",
            \var_export($tetherSocket ?? Env::get('TETHER_SOCKET'), true),
            \var_export($backend ?? Env::get('TETHER_IT_MYSQL_BACKEND'), true),
        ) : '';
        $tetherConstants .= $constants;
        if ($tether && $cacheTtlMs > 0) {
            $tetherConstants .= \sprintf("\ndefine('TETHER_CACHE_TTL', %d);", $cacheTtlMs);
        }
        $config = \strtr((string) \file_get_contents($package . '/tests/fixtures/wp-config.php.tpl'), [
            '{{DB_NAME}}' => $dbName ?? Env::get('TETHER_IT_DB'),
            '{{DB_USER}}' => Env::get('TETHER_IT_USER'),
            '{{DB_PASSWORD}}' => Env::get('TETHER_IT_PASSWORD'),
            '{{MYSQL_SOCKET}}' => Env::get('TETHER_IT_MYSQL_SOCKET'),
            '{{TETHER}}' => $tetherConstants,
            '{{PREFIX}}' => $prefix,
        ]);
        \file_put_contents($root . '/wp-config.php', $config);

        return new self($name, $root, $prefix, $tether);
    }

    /** start serves the site with `php -S` on a free loopback port, with $workers worker processes. */
    public function start(int $workers): void
    {
        $probe = \stream_socket_server('tcp://127.0.0.1:0', $errno, $errstr);
        if ($probe === false) {
            throw new \RuntimeException("find a free port: $errstr");
        }
        $this->port = (int) \substr(\strrchr(\stream_socket_get_name($probe, false), ':'), 1);
        \fclose($probe);
        $env = \getenv();
        $env['PHP_CLI_SERVER_WORKERS'] = (string) $workers;
        $log = $this->root . '/server.log';
        $this->process = \proc_open(
            [\PHP_BINARY, '-d', 'display_errors=stderr', '-d', 'log_errors=0', '-S', '127.0.0.1:' . $this->port, '-t', $this->root, \dirname(__DIR__) . '/fixtures/router.php'],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'a'], 2 => ['file', $log, 'a']],
            $pipes,
            $this->root,
            $env,
        );
        $deadline = \microtime(true) + 10;
        while (\microtime(true) < $deadline) {
            $socket = @\fsockopen('127.0.0.1', $this->port, $errno, $errstr, 0.2);
            if ($socket !== false) {
                \fclose($socket);

                return;
            }
            \usleep(20000);
        }
        throw new \RuntimeException("php -S for site {$this->name} did not listen on port {$this->port}; log: $log");
    }

    /**
     * stop ends the server this site started and its worker processes: SIGTERM to each (SIGKILL after 5 s). php -S
     * does not end its PHP_CLI_SERVER_WORKERS children when it is terminated, so they are found (by parent pid, read
     * before the parent goes) and ended too, or every run would leave them behind.
     */
    public function stop(): void
    {
        if ($this->process === null) {
            return;
        }
        $workers = self::childrenOf(\proc_get_status($this->process)['pid']);
        \proc_terminate($this->process, 15);
        foreach ($workers as $pid) {
            \posix_kill($pid, 15);
        }
        $deadline = \microtime(true) + 5;
        while (\proc_get_status($this->process)['running'] && \microtime(true) < $deadline) {
            \usleep(20000);
        }
        if (\proc_get_status($this->process)['running']) {
            \proc_terminate($this->process, 9);
        }
        \proc_close($this->process);
        $this->process = null;
        foreach ($workers as $pid) {
            while (\file_exists("/proc/$pid") && \microtime(true) < $deadline) {
                \usleep(20000);
            }
            if (\file_exists("/proc/$pid")) {
                \posix_kill($pid, 9);
            }
        }
    }

    /** @return list<int> the pids of the processes whose parent is $parent (from /proc) */
    private static function childrenOf(int $parent): array
    {
        $children = [];
        foreach (\glob('/proc/[0-9]*/stat') ?: [] as $statFile) {
            $stat = @\file_get_contents($statFile);
            // pid (comm) state ppid ...: comm may hold spaces, so read after its closing parenthesis.
            if ($stat === false || ($close = \strrpos($stat, ')')) === false) {
                continue;
            }
            $fields = \explode(' ', \substr($stat, $close + 2));
            if ((int) ($fields[1] ?? 0) === $parent) {
                $children[] = (int) \substr($statFile, 6, -5);
            }
        }

        return $children;
    }

    public function port(): int
    {
        return $this->port;
    }

    public function url(string $path = '/'): string
    {
        return 'http://127.0.0.1:' . $this->port . $path;
    }

    public function serverLog(): string
    {
        return (string) @\file_get_contents($this->root . '/server.log');
    }

    /** install runs WordPress's installer over HTTP (wp-admin/install.php, step 2), as a person would. */
    public function install(Browser $browser): void
    {
        $response = $browser->post($this->url('/wp-admin/install.php?step=2'), [
            'weblog_title' => 'Tether Test Site',
            'user_name' => 'admin',
            'admin_password' => 'tether-admin-pw',
            'admin_password2' => 'tether-admin-pw',
            'pw_weak' => '1',
            'admin_email' => 'admin@example.com',
            'blog_public' => '0',
            'language' => '',
        ]);
        if ($response->status !== 200 || !\str_contains($response->body, 'WordPress has been installed')) {
            throw new \RuntimeException("install of site {$this->name} failed: HTTP {$response->status}\n" . \substr($response->body, 0, 3000) . "\n" . $this->serverLog());
        }
    }

    private static function removeTree(string $dir): void
    {
        foreach (\scandir($dir) as $entry) {
            if ($entry === '.' || $entry === '..') {
                continue;
            }
            $path = $dir . '/' . $entry;
            \is_dir($path) && !\is_link($path) ? self::removeTree($path) : \unlink($path);
        }
        \rmdir($dir);
    }
}
