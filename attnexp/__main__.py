import time

STARTED = time.time()  # before any heavy import: the start-up the summary reports (startup_s) counts from here

import sys  # noqa: E402

from attnexp.cli import main  # noqa: E402

sys.exit(main(started=STARTED))
