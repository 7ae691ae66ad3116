<?php

declare(strict_types=1);

namespace Tether\Exception;

/**
 * InvalidArgumentException reports a value the caller passed that cannot be used, such as a `causal_token` option
 * that is not a token Client::causalToken() gave (cut, altered, or from something else). Its message names the
 * option. Nothing was sent to tetherd. A LogicException, so code that catches those catches it too.
 */
class InvalidArgumentException extends LogicException
{
}
