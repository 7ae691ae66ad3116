<?php

declare(strict_types=1);

namespace Tether\WordPress\Tests\Integration;

use PHPUnit\Framework\TestCase;
use Tether\WordPress\Tests\Support\Browser;
use Tether\WordPress\Tests\Support\Response;
use Tether\WordPress\Tests\Support\Sites;
use Tether\WordPress\Tests\Support\WordPressSite;

/**
 * SiteComparisonTest runs the same visit on the native site, on the Tether site and on the Tether site with
 * tetherd's result cache (the same WordPress 6.1 code, the same database, installed the same way) and requires the
 * same output from all three, once what legitimately differs is normalised: the port, the table prefix, nonces,
 * timestamps. The cached site's reads may be served from the cache for a minute: the same output there means
 * every write through tetherd dropped what it made stale (the visit edits, publishes and comments, and reads each
 * change back at once).
 */
final class SiteComparisonTest extends TestCase
{
    /** @var array<string, array<string, string>>|null outputs by site name, then by step */
    private static ?array $outputs = null;

    public function testFrontPage(): void
    {
        $this->assertSameOutput('front page', 'Hello world!');
    }

    public function testSinglePost(): void
    {
        $this->assertSameOutput('single post', 'Welcome to WordPress. This is your first post.');
    }

    public function testSearch(): void
    {
        $this->assertSameOutput('search', 'Hello world!');
        $this->assertSameOutput('search with no result', 'Sorry, but nothing matched your search terms.');
    }

    /** WP_Query's paging: SQL_CALC_FOUND_ROWS then FOUND_ROWS() decide the pages and their links. */
    public function testPagination(): void
    {
        $this->assertSameOutput('front page 2', 'Filler 1');
        $this->assertSameOutput('search page 1', 'Filler 11');
        $this->assertSameOutput('search page 2', 'Filler 1');
        $this->assertStringNotContainsString('Filler 1<', self::outputs()['native']['search page 1'], 'search page 1 holds 10 of the 11 fillers');
    }

    /** The classic form handler: wp-admin/post.php, action=editpost, with the page's own nonce. */
    public function testEditPostThroughPostPhpForm(): void
    {
        $this->assertSameOutput('post.php edit', 'Location: HOST/wp-admin/post.php?post=');
        $this->assertSameOutput('post page after post.php edit', 'Edited through post.php');
    }

    public function testAdminDashboard(): void
    {
        $this->assertSameOutput('login', 'Location: HOST/wp-admin/');
        $this->assertSameOutput('dashboard', 'At a Glance');
    }

    public function testRestCreateAndEditPost(): void
    {
        $this->assertSameOutput('rest create', '"status":"publish"');
        $this->assertSameOutput('rest edit', 'Edited through REST');
        $this->assertSameOutput('edited post page', 'Edited through REST');
        $this->assertSameOutput('post list', 'Edited through REST');
    }

    public function testComment(): void
    {
        $this->assertSameOutput('comment', '/through-tether/#comment-');
        $this->assertSameOutput('post page with comment', 'A comment with &#8216;quotes&#8217; and ünïcödé');
    }

    private function assertSameOutput(string $step, string $mustContain): void
    {
        $outputs = self::outputs();
        $native = $outputs['native'][$step];
        self::assertStringContainsString($mustContain, $native, "native site, $step: the visit did not do what the test expects");
        foreach (['tether', 'cached'] as $site) {
            $theirs = $outputs[$site][$step];
            if ($native !== $theirs) {
                self::fail("$step: the $site site's output differs from the native site's:\n" . self::diff($native, $theirs));
            }
            self::assertSame($native, $theirs);
        }
    }

    /** @return array<string, array<string, string>> */
    private static function outputs(): array
    {
        if (self::$outputs === null) {
            $sites = Sites::get();
            self::$outputs = ['native' => self::visit($sites->native), 'tether' => self::visit($sites->tether),
                'cached' => self::visit($sites->cached)];
        }

        return self::$outputs;
    }

    /**
     * visit does, on one site, what a reader, an author and a commenter do, and returns each step's normalised
     * output (status line, Location header, body).
     *
     * @return array<string, string>
     */
    private static function visit(WordPressSite $site): array
    {
        $out = [];
        $reader = new Browser();
        $out['front page'] = self::normalise($site, $reader->get($site->url('/')));
        $out['single post'] = self::normalise($site, self::getFollowing($reader, $site->url('/?p=1')));
        $out['search'] = self::normalise($site, $reader->get($site->url('/?s=hello')));
        $out['search with no result'] = self::normalise($site, $reader->get($site->url('/?s=nothing-like-this')));

        $author = new Browser();
        $author->get($site->url('/wp-login.php'));
        $out['login'] = self::normalise($site, $author->post($site->url('/wp-login.php'), [
            'log' => 'admin', 'pwd' => 'tether-admin-pw', 'wp-submit' => 'Log In', 'redirect_to' => $site->url('/wp-admin/'), 'testcookie' => '1',
        ]));
        $out['dashboard'] = self::normalise($site, $author->get($site->url('/wp-admin/')));

        $nonce = $author->get($site->url('/wp-admin/admin-ajax.php?action=rest-nonce'))->body;
        $json = ['Content-Type' => 'application/json', 'X-WP-Nonce' => $nonce];
        $created = $author->post($site->url('/index.php?rest_route=/wp/v2/posts'), (string) \json_encode([
            'title' => 'Through Tether', 'content' => "<p>It's \"quoted\", back\\slashed, ünïcödé 😀</p>", 'status' => 'publish',
        ]), $json);
        $out['rest create'] = self::normalise($site, $created);
        $id = (int) ($created->json()['id'] ?? 0);
        $out['rest edit'] = self::normalise($site, $author->post($site->url('/index.php?rest_route=/wp/v2/posts/' . $id), (string) \json_encode([
            'title' => 'Edited through REST', 'excerpt' => 'An excerpt',
        ]), $json));
        for ($i = 1; $i <= 11; $i++) {
            $filler = $author->post($site->url('/index.php?rest_route=/wp/v2/posts'), (string) \json_encode([
                'title' => "Filler $i", 'content' => "<p>Filler post number $i.</p>", 'status' => 'publish', 'date' => \sprintf('2020-01-%02dT10:00:00', $i),
            ]), $json);
            if ($filler->status !== 201) {
                throw new \RuntimeException("{$site->name}: creating Filler $i: HTTP {$filler->status} " . \substr($filler->body, 0, 500));
            }
        }
        $out['front page 2'] = self::normalise($site, self::getFollowing($reader, $site->url('/?paged=2')));
        $out['search page 1'] = self::normalise($site, $reader->get($site->url('/?s=filler')));
        $out['search page 2'] = self::normalise($site, self::getFollowing($reader, $site->url('/?s=filler&paged=2')));

        $editPage = $author->get($site->url('/wp-admin/post.php?post=1&action=edit'));
        if (!\preg_match('/name="_wpnonce" value="([0-9a-f]{10})"/', $editPage->body, $nonceMatch)) {
            throw new \RuntimeException("{$site->name}: no _wpnonce on the edit page: HTTP {$editPage->status}");
        }
        $out['post.php edit'] = self::normalise($site, $author->post($site->url('/wp-admin/post.php'), [
            '_wpnonce' => $nonceMatch[1], 'action' => 'editpost', 'post_ID' => '1', 'post_type' => 'post', 'originalaction' => 'editpost',
            'original_post_status' => 'publish', 'post_status' => 'publish', 'post_title' => 'Edited through post.php',
            'content' => "<!-- wp:paragraph -->\n<p>Saved by the classic form handler: it's \"fine\".</p>\n<!-- /wp:paragraph -->",
        ]));
        $out['post page after post.php edit'] = self::normalise($site, self::getFollowing($reader, $site->url('/?p=1')));

        $out['edited post page'] = self::normalise($site, self::getFollowing($reader, $site->url('/?p=' . $id)));
        $out['post list'] = self::normalise($site, $author->get($site->url('/wp-admin/edit.php')));

        $out['comment'] = self::normalise($site, $author->post($site->url('/wp-comments-post.php'), [
            'comment' => "A comment with 'quotes' and ünïcödé", 'comment_post_ID' => (string) $id, 'comment_parent' => '0', 'submit' => 'Post Comment',
        ]));
        $out['post page with comment'] = self::normalise($site, self::getFollowing($reader, $site->url('/?p=' . $id)));

        return $out;
    }

    /** getFollowing GETs $url and follows one redirect (WordPress sends ?p=ID to the post's permalink). */
    private static function getFollowing(Browser $browser, string $url): Response
    {
        $response = $browser->get($url);
        if (\in_array($response->status, [301, 302], true) && isset($response->headers['location'])) {
            $response = $browser->get($response->headers['location']);
        }

        return $response;
    }

    private static function normalise(WordPressSite $site, Response $response): string
    {
        $text = 'HTTP ' . $response->status . "\n";
        if (isset($response->headers['location'])) {
            $text .= 'Location: ' . $response->headers['location'] . "\n";
        }
        $text .= $response->body;
        $text = \str_replace(['127.0.0.1:' . $site->port(), '127.0.0.1%3A' . $site->port()], 'HOST', $text);
        $text = \str_replace('http://HOST', 'HOST', $text);
        $text = \str_replace('http:\/\/HOST', 'HOST', $text);
        $text = \str_replace($site->prefix, 'wpX_', $text);

        return (string) \preg_replace([
            '/\b[0-9a-f]{10}\b/',                                  // nonces
            '/\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d/',                 // dates and times
            '/\b(January|February|March|April|May|June|July|August|September|October|November|December) \d{1,2}, \d{4}\b/', // dates (the two installs may straddle midnight)
            '/\b\d{4}\/\d\d\/\d\d\//',                           // the date part of permalinks
            '/\b(Today|Yesterday)\b/',
            '/\b1[6-9]\d{8}\b/',                                    // Unix timestamps
            '/\b\d{1,2}:\d\d( ?[ap]m)?\b/i',                        // times of day
            '/\b\d+ (sec|secs|second|seconds|min|mins|minute|minutes) ago\b/',
            '/(<div class="(?:mm|jj|aa|hh|mn|ss)">)\d+</',             // quick edit's copy of a post's date
            '/(name="(?:mm|jj|aa|hh|mn|ss|hidden_\w\w|cur_\w\w)" value=")\d+"/', // the date fields of the edit forms
            '/(<option value=")(\d\d)(" data-text="\w+" *)selected=\'selected\'/', // the month selected in them
        ], ['NONCE', 'DATETIME', 'DATE', 'YYYY/MM/DD/', 'DAY', 'UNIXTIME', 'TIME', 'AGO', '$1N<', '$1N"', '$1$2$3'], $text);
    }

    private static function diff(string $a, string $b): string
    {
        $la = \explode("\n", $a);
        $lb = \explode("\n", $b);
        $out = [];
        for ($i = 0, $n = \max(\count($la), \count($lb)); $i < $n && \count($out) < 20; $i++) {
            if (($la[$i] ?? null) !== ($lb[$i] ?? null)) {
                $out[] = "line $i\n  native: " . \substr($la[$i] ?? '(none)', 0, 400) . "\n  tether: " . \substr($lb[$i] ?? '(none)', 0, 400);
            }
        }

        return \implode("\n", $out);
    }
}
