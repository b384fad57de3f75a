"""python -m eval_bridge SUBCOMMAND ..."""

import sys

from .cli import main

sys.exit(main())
