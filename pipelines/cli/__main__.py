"""`python -m pipelines.cli.main`: the command."""

import sys

from pipelines.cli.main import console

sys.exit(console())
