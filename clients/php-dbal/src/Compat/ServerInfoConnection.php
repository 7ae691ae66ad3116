<?php

declare(strict_types=1);

namespace Tether\DBAL\Compat;

use Doctrine\DBAL\Driver\Connection as ConnectionInterface;
use Doctrine\DBAL\Driver\ServerInfoAwareConnection;

/*
 * Tether\DBAL\Compat\ServerInfoConnection is the interface Tether\DBAL\Connection implements: DBAL 3's
 * ServerInfoAwareConnection (getServerVersion()), which DBAL 4 folded into Driver\Connection itself.
 */
if (\interface_exists(ServerInfoAwareConnection::class)) {
    \class_alias(ServerInfoAwareConnection::class, ServerInfoConnection::class);
} else {
    \class_alias(ConnectionInterface::class, ServerInfoConnection::class);
}
