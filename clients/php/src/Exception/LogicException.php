<?php

declare(strict_types=1);

namespace Tether\Exception;

/**
 * LogicException reports a programming error in the caller: an unknown or invalid option, a statement on a
 * transaction that was already committed or rolled back, a batch element that is not an Operation. Nothing was
 * sent to tetherd; retrying the same call fails the same way.
 */
class LogicException extends TetherException
{
}
