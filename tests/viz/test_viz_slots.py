"""Slot pictures (notebooks 03, 04): the walk's numbers; explorers redraw what slot_mapping computes."""
from __future__ import annotations

import time

import numpy as np
import pytest
from matplotlib.figure import Figure

from pagedkv_lib.core.slot_mapping import slot_mapping_for
from pagedkv_lib.viz import slots as sv


def test_walk_at_block_size_4_is_the_course_example():
    prefill, d1, d2 = sv.walk_example(4)
    assert prefill.slot_mapping == [28, 29, 30, 31, 8, 9, 20, 21, 22]
    assert (d1.slot_mapping, d1.context_lens, d1.new_block) == ([10, 23], {"A": 7, "B": 4},
                                                               {"A": None, "B": None})
    assert (d2.slot_mapping, d2.context_lens, d2.tables["B"]) == ([11, 0], {"A": 8, "B": 5}, [5, 0])


@pytest.mark.parametrize("bs", [2, 4, 16, 256])
def test_walk_slots_agree_with_slot_mapping_for(bs):
    for st in sv.walk_example(bs):
        expected = [s for k in ("A", "B") for s in slot_mapping_for(st.tables[k], st.positions[k], bs)]
        assert st.slot_mapping == expected
        for k, n in st.context_lens.items():
            assert (st.new_block[k] is not None) == (st.name != "prefill" and (n - 1) % bs == 0)


def test_format_slots():
    assert sv.format_slots([28, 29, 30, 31, 8, 9]) == "[28..31, 8, 9]"
    assert sv.format_slots([]) == "[]"


def test_draw_cache_rows_marks_exactly_the_marked_slots():
    owner, state = sv.slot_states([[7, 2], [5]], [6, 3], 8, 4, marked=[10, 23])
    img = sv.draw_cache_rows(Figure().add_subplot(), owner, state, 4)
    assert img.shape == (8, 4, 3)
    np.testing.assert_allclose(img[2, 2], sv.owner_colors([0])[0][:3])   # slot 10: block 2, offset 2
    assert state[10] == sv.MARKED and state[28] == sv.FILLED and state[11] == sv.ALLOCATED
    assert state[0] == sv.FREE and set(np.flatnonzero(state == sv.MARKED)) == {10, 23}


@pytest.fixture(scope="module")
def walk():
    return sv.SlotWalkExplorer()


@pytest.mark.parametrize("bs", [16, 256, 4])
def test_walk_explorer_block_size_redraws(walk, bs):
    walk.update(4, "prefill")
    before = walk.image.value
    start = time.perf_counter()
    walk.block_size.value = bs                                          # what the slider does
    walk.step.value = "decode 2"                                        # what the toggle does
    print(f"walk bs {bs}: two redraws {1e3 * (time.perf_counter() - start):.0f} ms")
    st = sv.walk_example(bs)[2]
    assert sv.format_slots(st.slot_mapping) in walk.text.value
    assert walk.image.value != before
    assert walk.img.shape == (sv.WALK_NUM_BLOCKS, bs, 3)
    owner = {b: k for k, seq in enumerate("AB") for b in st.tables[seq]}
    flat = walk.img.reshape(-1, 3)
    dark = [i for i in range(len(flat)) if i // bs in owner
            and np.allclose(flat[i], sv.owner_colors([owner[i // bs]])[0][:3])]
    assert sorted(dark) == sorted(st.slot_mapping)                      # dark cells = the slots written


def test_decode_reads_agree_with_slot_mapping_for():
    tables, reads = sv.decode_reads(4)
    for t, n, r in zip(tables, sv.DECODE_CONTEXT_LENS, reads, strict=True):
        assert len(t) == -(-n // 4) and r == slot_mapping_for(t, list(range(n)), 4)


@pytest.mark.parametrize("bs", sv.DecodeReadExplorer.BLOCK_SIZES)
def test_decode_explorer_slider_redraws(bs):
    ex = sv.DecodeReadExplorer(block_size=2 if bs != 2 else 4)
    before = ex.image.value
    start = time.perf_counter()
    ex.block_size.value = bs
    print(f"decode reads bs {bs}: {1e3 * (time.perf_counter() - start):.0f} ms")
    tables, reads = sv.decode_reads(bs)
    assert ex.image.value != before
    assert f"cuts {len(tables[0]) * bs - 13}" in ex.text.value
    flat = ex.img.reshape(-1, 3)
    for k, r in enumerate(reads):
        dark = [i for i in range(len(flat)) if np.allclose(flat[i], sv.owner_colors([k])[0][:3])]
        assert dark == sorted(r)


def test_css_classes(walk):
    assert "pagedkv-slots" in walk.image._dom_classes
    assert "pagedkv-decode-reads" in sv.DecodeReadExplorer().image._dom_classes
