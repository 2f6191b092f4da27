import sys

from extradeep.gui.launch import main

sys.exit(main())
