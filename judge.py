"""Grade an exercise from the repository root: python judge.py 127 (the command line of practice/judge.py)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pagedkv_lib.judge.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
