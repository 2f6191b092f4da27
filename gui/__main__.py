import sys

from extradeep.cli import main

sys.exit(main(["gui", *sys.argv[1:]]))
