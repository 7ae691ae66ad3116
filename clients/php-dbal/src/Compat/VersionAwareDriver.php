<?php

declare(strict_types=1);

namespace Tether\DBAL\Compat;

use Doctrine\DBAL\Driver as DriverInterface;
use Doctrine\DBAL\VersionAwarePlatformDriver;

/*
 * Tether\DBAL\Compat\VersionAwareDriver is the interface Tether\DBAL\Driver implements: DBAL 3's
 * VersionAwarePlatformDriver (which DBAL 4 removed: there every driver gets the server version through
 * getDatabasePlatform(ServerVersionProvider)), else DBAL 4's Driver. Loaded by the PSR-4 autoloader like a class.
 */
if (\interface_exists(VersionAwarePlatformDriver::class)) {
    \class_alias(VersionAwarePlatformDriver::class, VersionAwareDriver::class);
} else {
    \class_alias(DriverInterface::class, VersionAwareDriver::class);
}
