<?php

declare(strict_types=1);

namespace Tether\Laravel;

use Illuminate\Support\ServiceProvider;

/**
 * TetherServiceProvider registers the `tether` database driver in a Laravel application (auto-discovered through
 * composer.json's extra.laravel.providers). Then a connection in config/database.php with 'driver' => 'tether'
 * runs through tetherd; see README.md.
 */
final class TetherServiceProvider extends ServiceProvider
{
    public function register(): void
    {
        TetherDriver::register($this->app);
    }
}
