"""nbval honours a marker only when the comment is exactly `# NBVAL_...` on its own line."""
import re
from pathlib import Path

import pytest

SOURCES = sorted((Path(__file__).resolve().parents[2] / "notebooks" / "src").glob("*.py"))


@pytest.mark.parametrize("src", SOURCES, ids=[s.stem for s in SOURCES])
def test_nbval_markers_stand_alone_on_their_line(src):
    for number, line in enumerate(src.read_text().splitlines(), 1):
        if re.match(r"\s*#\s*NBVAL_", line):
            assert re.fullmatch(r"\s*#\s*NBVAL_[A-Z_]+\s*", line), \
                f"{src.name}:{number}: nbval ignores `{line.strip()}`; put the marker alone on its line"
