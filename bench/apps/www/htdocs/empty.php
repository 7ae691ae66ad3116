<?php
// bench/apps: an empty page, for run.sh to see that the web server runs PHP.
