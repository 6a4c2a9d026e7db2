import sys

from .install import main

sys.exit(main())
