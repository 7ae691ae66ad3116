<?php

declare(strict_types=1);

use Illuminate\Database\Capsule\Manager as Capsule;
use Illuminate\Database\Migrations\Migration;
use Illuminate\Database\Schema\Blueprint;

return new class extends Migration {
    public function up(): void
    {
        Capsule::schema()->create('mig_teams', static function (Blueprint $t): void {
            $t->id();
            $t->string('name', 80)->unique();
            $t->timestamps();
        });
    }

    public function down(): void
    {
        Capsule::schema()->dropIfExists('mig_teams');
    }
};
