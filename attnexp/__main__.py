import sys

from attnexp.cli import main

sys.exit(main())
