<?php

declare(strict_types=1);

namespace Tether\DBAL;

use Doctrine\DBAL\SQL\Parser;
use Doctrine\DBAL\SQL\Parser\Visitor;

/**
 * PlaceholderRewriter turns the placeholders of a DBAL statement (`?` positional, `:name` named, as DBAL's own SQL
 * parser finds them: not inside string literals, quoted identifiers or comments, not PostgreSQL's `::` casts)
 * into the ones tetherd binds for the dialect: `?` on MySQL/MariaDB, `$1..$n` on PostgreSQL. It records which
 * DBAL parameter fills each placeholder: positional ones by their 1-based position, named ones by name.
 */
final class PlaceholderRewriter implements Visitor
{
    /** @var list<string> */
    private array $parts = [];
    /** @var list<int|string> */
    private array $order = [];
    private int $positional = 0;

    private function __construct(private readonly Dialect $dialect)
    {
    }

    /**
     * rewrite returns [the SQL to send, the parameter key of each placeholder in order].
     *
     * @return array{string, list<int|string>}
     * @throws Parser\Exception DBAL's parser could not read the statement
     */
    public static function rewrite(string $sql, Dialect $dialect): array
    {
        if (!\str_contains($sql, '?') && !\str_contains($sql, ':')) {
            return [$sql, []];
        }
        $visitor = new self($dialect);
        (new Parser($dialect === Dialect::MySQL))->parse($sql, $visitor);

        return [\implode('', $visitor->parts), $visitor->order];
    }

    public function acceptPositionalParameter(string $sql): void
    {
        $this->order[] = ++$this->positional;
        $this->parts[] = $this->placeholder();
    }

    public function acceptNamedParameter(string $sql): void
    {
        $this->order[] = \substr($sql, 1);
        $this->parts[] = $this->placeholder();
    }

    public function acceptOther(string $sql): void
    {
        $this->parts[] = $sql;
    }

    private function placeholder(): string
    {
        return $this->dialect === Dialect::PostgreSQL ? '$' . \count($this->order) : '?';
    }
}
