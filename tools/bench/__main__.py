"""``python -m tools.bench``: time the solvers and trainers against generic references."""

import sys

from tools.bench.cli import main

sys.exit(main())
