<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Fixtures\Models;

use Illuminate\Database\Eloquent\Model;
use Illuminate\Database\Eloquent\Relations\HasMany;

/** Author has many posts; its settings are a JSON column, its activity a boolean, its birthday a datetime. */
final class Author extends Model
{
    protected $table = 'el_authors';
    protected $guarded = [];
    protected $casts = ['active' => 'boolean', 'settings' => 'array', 'born_at' => 'datetime'];

    public function posts(): HasMany
    {
        return $this->hasMany(Post::class);
    }
}
