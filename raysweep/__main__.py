import sys

from raysweep.cli import main

sys.exit(main())
