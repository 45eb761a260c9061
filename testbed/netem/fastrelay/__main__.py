import sys

from testbed.netem.fastrelay import main

sys.exit(main())
