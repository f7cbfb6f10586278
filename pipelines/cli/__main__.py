"""`python -m pipelines.cli`: the command."""

import sys

from pipelines.cli.main import console

sys.exit(console())
