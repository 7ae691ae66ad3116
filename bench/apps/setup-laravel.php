<?php

/*
 * bench/apps/setup-laravel.php: creates and fills the tables of the benchmark's Laravel page in the run's database,
 * as root over the Unix socket:
 *
 *   php bench/apps/setup-laravel.php CONFIG_PHP
 *
 * `authors` (AUTHORS rows) and `posts` (POSTS rows, each by author id % AUTHORS + 1, created one hour apart from
 * 2026-01-01 00:00), with Laravel's timestamps and an index on posts.created_at (the page orders by it).
 */

declare(strict_types=1);

const AUTHORS = 10;
const POSTS = 200;

if ($argc !== 2) {
    fwrite(STDERR, "usage: php setup-laravel.php CONFIG_PHP\n");
    exit(2);
}
$cfg = require $argv[1];
mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
$db = new mysqli('localhost', 'root', '', $cfg['db_name'], 0, $cfg['mysql_socket']);
$db->set_charset('utf8mb4');
$db->query('CREATE TABLE authors (id bigint unsigned AUTO_INCREMENT PRIMARY KEY, name varchar(255) NOT NULL,
    email varchar(255) NOT NULL UNIQUE, created_at timestamp NULL, updated_at timestamp NULL)');
$db->query('CREATE TABLE posts (id bigint unsigned AUTO_INCREMENT PRIMARY KEY, author_id bigint unsigned NOT NULL,
    title varchar(255) NOT NULL, body text NOT NULL, created_at timestamp NULL, updated_at timestamp NULL,
    KEY posts_created_at_index (created_at), CONSTRAINT posts_author_id_foreign FOREIGN KEY (author_id) REFERENCES authors (id))');
$insert = $db->prepare('INSERT INTO authors (name, email, created_at, updated_at) VALUES (?, ?, ?, ?)');
for ($a = 1; $a <= AUTHORS; $a++) {
    $name = "Author $a <\"Ångström\" & co>";
    $email = "author$a@example.invalid";
    $at = '2025-12-01 00:00:00';
    $insert->bind_param('ssss', $name, $email, $at, $at);
    $insert->execute();
}
$insert = $db->prepare('INSERT INTO posts (author_id, title, body, created_at, updated_at) VALUES (?, ?, ?, ?, ?)');
for ($p = 1; $p <= POSTS; $p++) {
    $author = $p % AUTHORS + 1;
    $title = "Post $p: pooling & \"warm\" connections";
    $body = str_repeat("Paragraph of post $p. ", 40);
    $at = gmdate('Y-m-d H:i:s', strtotime('2026-01-01 00:00:00 UTC') + $p * 3600);
    $insert->bind_param('issss', $author, $title, $body, $at, $at);
    $insert->execute();
}
foreach (['authors' => AUTHORS, 'posts' => POSTS] as $table => $want) {
    $n = (int) $db->query("SELECT COUNT(*) FROM $table")->fetch_row()[0];
    if ($n !== $want) {
        fwrite(STDERR, "setup-laravel: $table has $n rows, want $want\n");
        exit(1);
    }
}
fprintf(STDERR, "  .. Laravel tables: %d authors, %d posts\n", AUTHORS, POSTS);
