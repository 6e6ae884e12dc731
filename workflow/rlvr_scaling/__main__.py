import sys

from rlvr_scaling.cli import main

sys.exit(main())
