<?php

declare(strict_types=1);

namespace Tether\WordPress;

use Tether\Client;

/**
 * Link is what $wpdb->dbh holds while the drop-in is connected: the Tether client, and the few properties of a
 * mysqli link that WordPress core reads from $wpdb->dbh directly (Site Health reads client_info and server_info).
 * It is not a mysqli object: code that calls mysqli_* functions on $wpdb->dbh does not work with the drop-in.
 */
final class Link
{
    public readonly string $client_info;
    public readonly string $host_info;

    public function __construct(
        public readonly Client $client,
        public readonly string $server_info,
        string $socket,
    ) {
        $this->client_info = 'tether-php';
        $this->host_info = 'tetherd via ' . $socket;
    }
}
