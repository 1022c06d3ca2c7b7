"""``python -m harness.cli``: the ``powercut`` command."""

import sys

from harness.cli import main

sys.exit(main())
