"""``python -m biglda.cli``: the ``biglda`` command."""

import sys

from biglda.cli import main

sys.exit(main())
