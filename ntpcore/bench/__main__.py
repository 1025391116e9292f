"""``python -m ntpcore.bench``: time the solvers and trainers against generic references."""

import sys

from ntpcore.bench.cli import main

sys.exit(main())
