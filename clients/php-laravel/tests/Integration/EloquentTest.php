<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Integration;

use Illuminate\Database\Connection;
use Illuminate\Database\Schema\Blueprint;
use Illuminate\Support\Carbon;
use Tether\Laravel\Tests\Fixtures\Models\Author;
use Tether\Laravel\Tests\Fixtures\Models\Post;
use Tether\Laravel\Tests\Fixtures\Models\Tag;
use Tether\Laravel\Tests\Support\Databases;

/**
 * EloquentTest runs Eloquent models and relations through the tether driver: creation with ids and timestamps,
 * casts, hasMany, belongsTo, belongsToMany with a pivot, and eager loading with the number of queries it takes.
 */
final class EloquentTest extends TestCase
{
    private function migrate(Connection $db): void
    {
        $schema = $db->getSchemaBuilder();
        foreach (['el_post_tag', 'el_tags', 'el_posts', 'el_authors'] as $table) {
            $schema->dropIfExists($table);
        }
        $schema->create('el_authors', static function (Blueprint $t): void {
            $t->id();
            $t->string('name');
            $t->boolean('active')->default(false);
            $t->json('settings')->nullable();
            $t->dateTime('born_at')->nullable();
            $t->timestamps();
        });
        $schema->create('el_posts', static function (Blueprint $t): void {
            $t->id();
            $t->foreignId('author_id')->constrained('el_authors')->cascadeOnDelete();
            $t->string('title');
            $t->boolean('published')->default(false);
            $t->timestamps();
        });
        $schema->create('el_tags', static function (Blueprint $t): void {
            $t->id();
            $t->string('name')->unique();
        });
        $schema->create('el_post_tag', static function (Blueprint $t): void {
            $t->foreignId('post_id')->constrained('el_posts')->cascadeOnDelete();
            $t->foreignId('tag_id')->constrained('el_tags')->cascadeOnDelete();
            $t->integer('weight')->default(1);
            $t->timestamps();
            $t->primary(['post_id', 'tag_id']);
        });
    }

    /** @dataProvider platforms */
    public function testModelsTimestampsAndCasts(string $platform): void
    {
        $db = $this->connect($platform);
        $this->migrate($db);
        Carbon::setTestNow(Carbon::create(2024, 2, 29, 12, 0, 0));
        try {
            $ada = Author::create(['name' => 'ada', 'active' => true, 'settings' => ['theme' => 'dark', 'n' => 3], 'born_at' => Carbon::create(1815, 12, 10, 8, 30)]);
        } finally {
            Carbon::setTestNow();
        }
        self::assertIsInt($ada->id);
        self::assertTrue($ada->exists);

        $fresh = Author::findOrFail($ada->id);
        self::assertTrue($fresh->active);
        self::assertSame(['theme' => 'dark', 'n' => 3], $fresh->settings);
        self::assertInstanceOf(Carbon::class, $fresh->born_at);
        self::assertSame('1815-12-10 08:30:00', $fresh->born_at->format('Y-m-d H:i:s'));
        self::assertSame('2024-02-29 12:00:00', $fresh->created_at->format('Y-m-d H:i:s'));
        self::assertSame('2024-02-29 12:00:00', $fresh->getRawOriginal('updated_at'), 'raw timestamps read as PDO gives them');

        $fresh->active = false;
        $fresh->settings = ['theme' => 'light'];
        self::assertTrue($fresh->isDirty(['active', 'settings']));
        self::assertFalse($fresh->isDirty('born_at'));
        $fresh->save();
        self::assertTrue($fresh->updated_at->greaterThan(Carbon::create(2024, 2, 29, 12)));

        $direct = Databases::direct($platform)->query("SELECT active, settings FROM el_authors WHERE id = {$ada->id}")->fetch();
        self::assertFalse((bool) $direct['active']);
        self::assertSame(['theme' => 'light'], \json_decode($direct['settings'], true));

        self::assertSame(1, Author::where('active', false)->count());
        self::assertNull(Author::where('active', true)->first());
        self::assertTrue($fresh->delete());
        self::assertSame(0, Author::count());
    }

    /** @dataProvider platforms */
    public function testRelationsAndEagerLoading(string $platform): void
    {
        $db = $this->connect($platform);
        $this->migrate($db);

        $ada = Author::create(['name' => 'ada']);
        $bob = Author::create(['name' => 'bob']);
        $p1 = $ada->posts()->create(['title' => 'engines', 'published' => true]);
        $p2 = $ada->posts()->create(['title' => 'notes']);
        $p3 = $bob->posts()->create(['title' => 'logic', 'published' => true]);
        [$math, $hist] = [Tag::create(['name' => 'math']), Tag::create(['name' => 'history'])];
        $p1->tags()->attach([$math->id => ['weight' => 5], $hist->id => ['weight' => 2]]);
        $p3->tags()->attach($math->id, ['weight' => 9]);
        $p2->tags()->sync([$hist->id]);

        self::assertSame('ada', $p1->author->name);
        self::assertSame(['engines', 'notes'], $ada->posts()->orderBy('id')->pluck('title')->all());
        self::assertSame(5, (int) $p1->tags()->where('name', 'math')->first()->pivot->weight);
        self::assertNotNull($p1->tags()->first()->pivot->created_at);

        $db->enableQueryLog();
        $authors = Author::with(['posts' => static fn ($q) => $q->orderBy('id'), 'posts.tags' => static fn ($q) => $q->orderBy('name')])->orderBy('name')->get();
        self::assertCount(3, $db->getQueryLog(), 'authors, posts and tags in one query each');
        self::assertSame(['engines', 'notes'], $authors[0]->posts->pluck('title')->all());
        self::assertSame(['history', 'math'], $authors[0]->posts[0]->tags->pluck('name')->all());
        self::assertSame([2, 5], $authors[0]->posts[0]->tags->map(static fn (Tag $t): int => (int) $t->pivot->weight)->all());
        self::assertSame(['math'], $authors[1]->posts[0]->tags->pluck('name')->all());

        self::assertSame(['ada', 'bob'], Author::whereHas('posts', static fn ($q) => $q->where('published', true))->orderBy('name')->pluck('name')->all());
        $counted = Author::withCount('posts')->orderBy('name')->get();
        self::assertSame([2, 1], $counted->map(static fn (Author $a): int => (int) $a->posts_count)->all());
        self::assertSame(['engines', 'logic'], Tag::where('name', 'math')->first()->posts()->orderBy('title')->pluck('title')->all());

        $p1->tags()->detach($hist->id);
        self::assertSame(1, $p1->tags()->count());
        $ada->delete();
        self::assertSame(1, Post::count(), 'the foreign key cascades');
    }
}
