<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Integration;

use Illuminate\Database\Migrations\DatabaseMigrationRepository;
use Illuminate\Database\Migrations\Migrator;
use Illuminate\Database\QueryException;
use Illuminate\Database\Schema\Blueprint;
use Illuminate\Filesystem\Filesystem;
use Tether\Laravel\Tests\Support\Databases;

/**
 * SchemaTest runs Laravel's schema builder and its Migrator through the tether driver, and checks the result in
 * the database read directly: tables, columns, indexes and foreign keys.
 */
final class SchemaTest extends TestCase
{
    /** @return list<string> the index names of $table, read directly */
    private static function indexes(string $platform, \PDO $direct, string $table): array
    {
        $sql = $platform === Databases::MYSQL
            ? 'SELECT DISTINCT index_name FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? ORDER BY 1'
            : 'SELECT indexname FROM pg_indexes WHERE tablename = ? ORDER BY 1';
        $statement = $direct->prepare($sql);
        $statement->execute([$table]);

        return $statement->fetchAll(\PDO::FETCH_COLUMN);
    }

    /** @dataProvider platforms */
    public function testCreateAlterDropWithIndexesAndForeignKeys(string $platform): void
    {
        $db = $this->connect($platform);
        $schema = $db->getSchemaBuilder();
        $direct = Databases::direct($platform);
        $schema->dropIfExists('sc_children');
        $schema->dropIfExists('sc_parents');
        self::assertFalse($schema->hasTable('sc_parents'));

        $schema->create('sc_parents', static function (Blueprint $t): void {
            $t->id();
            $t->string('code', 20)->unique();
            $t->string('label')->nullable();
        });
        $schema->create('sc_children', static function (Blueprint $t): void {
            $t->id();
            $t->foreignId('parent_id')->constrained('sc_parents')->restrictOnDelete();
            $t->integer('rank');
            $t->index(['parent_id', 'rank']);
        });
        self::assertTrue($schema->hasTable('sc_parents'));
        self::assertTrue($schema->hasColumns('sc_children', ['id', 'parent_id', 'rank']));
        self::assertFalse($schema->hasColumn('sc_children', 'nope'));
        self::assertSame(['id', 'code', 'label'], $schema->getColumnListing('sc_parents'));
        self::assertContains('sc_children_parent_id_rank_index', self::indexes($platform, $direct, 'sc_children'));
        self::assertContains('sc_parents_code_unique', self::indexes($platform, $direct, 'sc_parents'));

        $schema->table('sc_parents', static function (Blueprint $t): void {
            $t->boolean('archived')->default(false);
            $t->index('label', 'sc_parents_label_index');
        });
        self::assertTrue($schema->hasColumn('sc_parents', 'archived'));
        self::assertContains('sc_parents_label_index', self::indexes($platform, $direct, 'sc_parents'));
        $schema->table('sc_parents', static function (Blueprint $t): void {
            $t->dropIndex('sc_parents_label_index');
            $t->dropColumn('archived');
        });
        self::assertFalse($schema->hasColumn('sc_parents', 'archived'));
        self::assertNotContains('sc_parents_label_index', self::indexes($platform, $direct, 'sc_parents'));

        $parent = $db->table('sc_parents')->insertGetId(['code' => 'p']);
        $db->table('sc_children')->insert(['parent_id' => $parent, 'rank' => 1]);
        try {
            $db->table('sc_children')->insert(['parent_id' => $parent + 100, 'rank' => 2]);
            self::fail('the foreign key let an orphan in');
        } catch (QueryException $e) {
            self::assertSame($platform === Databases::MYSQL ? '23000' : '23503', $e->getCode());
        }
        try {
            $db->table('sc_parents')->delete();
            self::fail('the foreign key let a referenced parent go');
        } catch (QueryException $e) {
            self::assertSame($platform === Databases::MYSQL ? '23000' : '23503', $e->getCode());
        }

        $schema->drop('sc_children');
        $schema->drop('sc_parents');
        self::assertFalse($schema->hasTable('sc_children'));
        self::assertSame(0, (int) $direct->query("SELECT COUNT(*) FROM information_schema.tables WHERE table_name LIKE 'sc\\_%'" . ($platform === Databases::MYSQL ? ' AND table_schema = DATABASE()' : ''))->fetchColumn());
    }

    /** @dataProvider platforms */
    public function testMigratorRunsAndRollsBackMigrations(string $platform): void
    {
        $this->connect($platform);
        $manager = $this->capsule->getDatabaseManager();
        $schema = $this->capsule->getConnection()->getSchemaBuilder();
        foreach (['mig_members', 'mig_teams', 'migrations'] as $table) {
            $schema->dropIfExists($table);
        }
        $repository = new DatabaseMigrationRepository($manager, 'migrations');
        $repository->createRepository();
        $migrator = new Migrator($repository, $manager, new Filesystem());
        $path = \dirname(__DIR__) . '/Fixtures/migrations';

        $ran = $migrator->run([$path]);
        self::assertCount(2, $ran);
        self::assertTrue($schema->hasTable('mig_teams'));
        self::assertTrue($schema->hasColumn('mig_members', 'team_id'));
        self::assertSame(['2024_01_01_000000_create_mig_teams_table', '2024_01_02_000000_create_mig_members_table'], $repository->getRan());
        self::assertSame(['founders'], $this->capsule->getConnection()->table('mig_teams')->pluck('name')->all());
        self::assertSame([], $migrator->run([$path]), 'nothing left to run');

        $migrator->rollback([$path]);
        self::assertFalse($schema->hasTable('mig_members'));
        self::assertFalse($schema->hasTable('mig_teams'));
        self::assertSame([], $repository->getRan());
    }

    public function testDisablingForeignKeyChecksHoldsForLaterStatementsOnMysql(): void
    {
        $db = $this->connect(Databases::MYSQL);
        $schema = $db->getSchemaBuilder();
        $schema->dropIfExists('sc_fk_children');
        $schema->dropIfExists('sc_fk_parents');
        $schema->create('sc_fk_parents', static function (Blueprint $t): void {
            $t->id();
        });
        $schema->create('sc_fk_children', static function (Blueprint $t): void {
            $t->id();
            $t->foreignId('parent_id')->constrained('sc_fk_parents');
        });

        // A seeder's pattern: SET FOREIGN_KEY_CHECKS=0 is a session setting tetherd keeps for this connection.
        $schema->disableForeignKeyConstraints();
        for ($i = 1; $i <= 10; $i++) {
            $db->table('sc_fk_children')->insert(['parent_id' => 1000 + $i]);
        }
        $schema->enableForeignKeyConstraints();
        self::assertSame(10, $db->table('sc_fk_children')->count());
        $this->expectException(QueryException::class);
        $db->table('sc_fk_children')->insert(['parent_id' => 999]);
    }
}
