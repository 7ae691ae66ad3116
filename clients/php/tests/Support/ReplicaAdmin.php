<?php

declare(strict_types=1);

namespace Tether\Tests\Support;

/**
 * ReplicaAdmin slows a test pair's replica down and restores it, through PDO as the servers' superuser, from the DSNs
 * scripts/lib/replicas.sh exports (TETHER_TEST_{MYSQL,POSTGRES}_{PRIMARY,REPLICA}_ADMIN_DSN, in go-sql-driver/mysql
 * and libpq keyword form). Shared by the PHP client's and the integrations' replica tests.
 *
 *  - MariaDB: STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = n; START SLAVE on the replica (n = 0 restores it, and then
 *    waits until the replica has applied the primary's @@gtid_binlog_pos).
 *  - PostgreSQL: ALTER SYSTEM SET recovery_min_apply_delay and pg_reload_conf() on the standby (RESET restores it,
 *    and then waits until its replay LSN reaches the primary's insert LSN).
 */
final class ReplicaAdmin
{
    /** @param 'mysql'|'postgres' $type */
    public function __construct(private readonly string $type)
    {
    }

    /** delay makes the replica apply each transaction $seconds after the primary committed it (0: at once). */
    public function delay(int $seconds): void
    {
        $replica = $this->pdo('REPLICA');
        if ($this->type === 'mysql') {
            $replica->exec('STOP SLAVE');
            $replica->exec(\sprintf('CHANGE MASTER TO MASTER_DELAY = %d', $seconds));
            $replica->exec('START SLAVE');
        } else {
            $replica->exec($seconds > 0 ? \sprintf("ALTER SYSTEM SET recovery_min_apply_delay = '%ds'", $seconds) : 'ALTER SYSTEM RESET recovery_min_apply_delay');
            $replica->query('SELECT pg_reload_conf()')->fetchAll();
        }
        if ($seconds === 0) {
            $this->waitCaughtUp();
        }
    }

    /** waitCaughtUp returns once the replica has applied everything the primary has now (at most 20 s). */
    public function waitCaughtUp(): void
    {
        $primary = $this->pdo('PRIMARY');
        $replica = $this->pdo('REPLICA');
        if ($this->type === 'mysql') {
            $pos = (string) $primary->query('SELECT @@gtid_binlog_pos')->fetchColumn();
            $st = $replica->prepare('SELECT MASTER_GTID_WAIT(?, 20)');
            $st->execute([$pos]);
            if ((int) $st->fetchColumn() !== 0) {
                throw new \RuntimeException("mysql replica did not reach $pos within 20 s");
            }

            return;
        }
        // The insert position, not pg_current_wal_lsn() (written so far): with synchronous_commit off (the test pairs)
        // a commit's record may still wait in the WAL buffers.
        $lsn = (string) $primary->query('SELECT pg_current_wal_insert_lsn()')->fetchColumn();
        $deadline = \microtime(true) + 20;
        $st = $replica->prepare('SELECT pg_last_wal_replay_lsn() >= CAST(? AS pg_lsn)');
        do {
            $st->execute([$lsn]);
            if ($st->fetchColumn() === true) {
                return;
            }
            \usleep(20_000);
        } while (\microtime(true) < $deadline);
        throw new \RuntimeException("postgres replica did not replay $lsn within 20 s");
    }

    /**
     * markHosts (MariaDB) creates $table (one column `who`) on the primary, waits until the replica has it, then
     * gives each server a row of its own that does not replicate (sql_log_bin off): 'primary' on the primary,
     * 'replica' on the replica. `SELECT who FROM $table` through tetherd then tells where a read ran, whatever the
     * replica's delay.
     */
    public function markHosts(string $table): void
    {
        if ($this->type !== 'mysql') {
            throw new \LogicException('markHosts: MariaDB only (a PostgreSQL standby takes no writes)');
        }
        $this->pdo('PRIMARY')->exec("CREATE TABLE IF NOT EXISTS $table (who VARCHAR(16) NOT NULL)");
        $this->waitCaughtUp();
        foreach (['PRIMARY' => 'primary', 'REPLICA' => 'replica'] as $role => $who) {
            $db = $this->pdo($role);
            $db->exec('SET SESSION sql_log_bin = 0');
            $db->exec("DELETE FROM $table");
            $db->exec("INSERT INTO $table VALUES ('$who')");
        }
    }

    /** hasTable tells whether the replica has $table already (it was created on the primary). */
    public function replicaHasTable(string $table): bool
    {
        $replica = $this->pdo('REPLICA');
        $st = $this->type === 'mysql'
            ? $replica->prepare('SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?')
            : $replica->prepare('SELECT COUNT(*) FROM pg_class WHERE relname = ?');
        $st->execute([$table]);

        return (int) $st->fetchColumn() > 0;
    }

    /** @param 'PRIMARY'|'REPLICA' $role */
    private function pdo(string $role): \PDO
    {
        $var = \sprintf('TETHER_TEST_%s_%s_ADMIN_DSN', $this->type === 'mysql' ? 'MYSQL' : 'POSTGRES', $role);
        $dsn = \getenv($var);
        if ($dsn === false || $dsn === '') {
            throw new \RuntimeException("$var is not set (scripts/lib/replicas.sh exports it)");
        }
        $options = [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION];
        if ($this->type === 'mysql') {
            if (\preg_match('~^([^:@]*)(?::([^@]*))?@(unix|tcp)\(([^)]*)\)/([^?]*)~', $dsn, $m) !== 1) {
                throw new \RuntimeException("$var: not a go-sql-driver/mysql DSN: $dsn");
            }
            $where = $m[3] === 'unix' ? 'unix_socket=' . $m[4] : 'host=' . \str_replace(':', ';port=', $m[4]);

            return new \PDO("mysql:$where;dbname={$m[5]}", $m[1], $m[2] ?? '', $options);
        }
        $kv = [];
        foreach (\preg_split('/\s+/', \trim($dsn)) as $pair) {
            [$k, $v] = \explode('=', $pair, 2) + [1 => ''];
            $kv[$k] = $v;
        }
        $user = $kv['user'] ?? 'postgres';
        $password = $kv['password'] ?? null;
        unset($kv['user'], $kv['password'], $kv['sslmode']);
        $parts = [];
        foreach ($kv as $k => $v) {
            $parts[] = "$k=$v";
        }

        return new \PDO('pgsql:' . \implode(';', $parts), $user, $password, $options);
    }
}
