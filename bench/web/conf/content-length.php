<?php

/*
 * bench/web/conf/content-length.php: php-fpm's auto_prepend_file in the web benchmark (nginx only).
 *
 * ab speaks HTTP/1.0, and nginx keeps an HTTP/1.0 connection alive (ab -k) only after a response with a
 * Content-Length, which php-fpm never sends (an HTTP/1.1 client would get chunked encoding and keep-alive instead).
 * Without this, every -k run under nginx would silently be a run without keep-alive. apache2's mod_php sets the
 * length itself, so there the pages run without it. Costs one output buffer per request.
 */
ob_start(static function (string $buffer, int $phase): string {
    if (($phase & PHP_OUTPUT_HANDLER_FINAL) && !headers_sent()) {
        header('Content-Length: ' . strlen($buffer));
    }
    return $buffer;
});
