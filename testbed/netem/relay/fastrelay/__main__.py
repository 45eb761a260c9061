import sys

from testbed.netem.relay.fastrelay import main

sys.exit(main())
