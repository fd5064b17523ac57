"""Grade your exercises: python practice/judge.py 127 (or --list, --help). The engine is pagedkv_lib.judge."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pagedkv_lib.judge.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
