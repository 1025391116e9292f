"""``python -m ntpcore.reproduce``: the figure runner (see :mod:`ntpcore.pipeline.runner`)."""

import sys

from ntpcore.pipeline.runner import main

if __name__ == "__main__":
    sys.exit(main())
