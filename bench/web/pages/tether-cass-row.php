<?php
require __DIR__ . '/lib.php';
// phpcassa: $c1->get('a'), every column of row a.
$rows = timed(static fn () => tether()->scan('c1', prefix: [CASS_KEY], columns: ['column1', 'value'], backend: 'cass')->rows);
echo render_cells(array_column($rows, 'value', 'column1'));
