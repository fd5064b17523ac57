"""python -m pagedkv_lib.judge: the same command line as practice/judge.py."""
import sys

from .cli import main

sys.exit(main())
