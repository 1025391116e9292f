"""``python -m ntpcore.reproduce``: the figure runner (see :mod:`ntpcore.runner.runner`)."""

import sys

from ntpcore.runner.runner import main

if __name__ == "__main__":
    sys.exit(main())
