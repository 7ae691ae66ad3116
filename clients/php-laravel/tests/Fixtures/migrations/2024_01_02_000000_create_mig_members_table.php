<?php

declare(strict_types=1);

use Illuminate\Database\Capsule\Manager as Capsule;
use Illuminate\Database\Migrations\Migration;
use Illuminate\Database\Schema\Blueprint;

return new class extends Migration {
    public function up(): void
    {
        Capsule::schema()->create('mig_members', static function (Blueprint $t): void {
            $t->id();
            $t->foreignId('team_id')->constrained('mig_teams')->cascadeOnDelete();
            $t->string('email');
            $t->index(['team_id', 'email'], 'mig_members_team_email_index');
        });
        Capsule::table('mig_teams')->insert(['name' => 'founders']);
    }

    public function down(): void
    {
        Capsule::schema()->dropIfExists('mig_members');
    }
};
