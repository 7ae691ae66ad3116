<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Fixtures\Models;

use Illuminate\Database\Eloquent\Model;
use Illuminate\Database\Eloquent\Relations\BelongsTo;
use Illuminate\Database\Eloquent\Relations\BelongsToMany;

/** Post belongs to an author and to many tags, through el_post_tag with a pivot column `weight`. */
final class Post extends Model
{
    protected $table = 'el_posts';
    protected $guarded = [];
    protected $casts = ['published' => 'boolean'];

    public function author(): BelongsTo
    {
        return $this->belongsTo(Author::class);
    }

    public function tags(): BelongsToMany
    {
        return $this->belongsToMany(Tag::class, 'el_post_tag')->withPivot('weight')->withTimestamps();
    }
}
