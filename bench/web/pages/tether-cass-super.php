<?php
require __DIR__ . '/lib.php';
// phpcassa: $s1->get_super_column('a', 'b1'), the columns of one super column of row a.
$rows = timed(static fn () => tether()->scan('s1', prefix: [CASS_KEY, CASS_SUPER], columns: ['column', 'value'], backend: 'cass')->rows);
echo render_cells(array_column($rows, 'value', 'column'));
