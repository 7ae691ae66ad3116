<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Fixtures\Models;

use Illuminate\Database\Eloquent\Model;
use Illuminate\Database\Eloquent\Relations\BelongsToMany;

/** Tag belongs to many posts; it has no timestamps. */
final class Tag extends Model
{
    protected $table = 'el_tags';
    protected $guarded = [];
    public $timestamps = false;

    public function posts(): BelongsToMany
    {
        return $this->belongsToMany(Post::class, 'el_post_tag')->withPivot('weight');
    }
}
