"""The pictures of notebooks 11 and 12: how the decode kernel cuts work into pieces, and which tiles the
prefill kernel visits, checked against a per-(query, key) and per-token count."""
import random

import numpy as np
import pytest

from pagedkv_lib.kernels.decode_config import choose_config
from pagedkv_lib.viz import prefill_tiles, work_partition


@pytest.mark.parametrize("seq_len,q_len,block_q,block_n", [
    (20, 8, 4, 4), (129, 129, 16, 32), (300, 17, 8, 64), (64, 1, 16, 16), (40, 40, 32, 16)])
def test_tile_kinds_visit_every_visible_pair_mask_only_the_diagonal_and_skip_nothing_needed(
        seq_len, q_len, block_q, block_n):
    visible = prefill_tiles.causal_mask(seq_len, q_len)                    # [q_len, seq_len]
    kinds = prefill_tiles.tile_kinds(seq_len, q_len, block_q, block_n)
    for qi, kj in np.ndindex(*kinds.shape):
        tile = visible[qi * block_q:(qi + 1) * block_q, kj * block_n:(kj + 1) * block_n]
        if kinds[qi, kj] == prefill_tiles.SKIPPED:
            assert not tile.any(), (qi, kj)
        elif kinds[qi, kj] == prefill_tiles.FULL:
            assert tile.all() and tile.shape[1] == block_n, (qi, kj)        # no mask needed
        else:
            assert tile.any(), (qi, kj)


def test_causal_mask_of_a_chunk_is_bottom_right_and_top_left_differs():
    right, left = prefill_tiles.causal_mask(20, 8), prefill_tiles.causal_mask(20, 8, bottom_right=False)
    assert right[0].sum() == 13 and right[-1].sum() == 20                  # query 0 at position 12
    assert left[0].sum() == 1 and left[-1].sum() == 8
    assert (prefill_tiles.causal_mask(9, 9) == np.tril(np.ones((9, 9), bool))).all()   # no cache: same


def test_tile_pictures_draw_one_image_each():
    fig = prefill_tiles.plot_causal_offset(20, 8)
    assert [len(ax.images) for ax in fig.axes] == [1, 1]
    ax = prefill_tiles.plot_tile_grid(300, 17, 8, 64).axes[0]
    assert ax.images[0].get_array().shape == (3, 5) and "never loaded" in ax.get_title()


def test_pieces_of_every_version_cover_every_token_once():
    rng = random.Random(3)
    lens = [rng.randint(1, 8192) for _ in range(64)]
    for version, splits in ((1, 1), (2, None), (3, None)):
        cfg = choose_config(64, 32, 8, 128, 8192, splits, num_sms=132, interpreted=False, version=version)
        assert sum(work_partition.pieces(lens, cfg)) == sum(lens), version
    v1 = choose_config(64, 32, 8, 128, 8192, 1, num_sms=132, interpreted=False)
    v3 = choose_config(64, 32, 8, 128, 8192, num_sms=132, interpreted=False)
    assert work_partition.balance(lens, v3)["ratio"] < work_partition.balance(lens, v1)["ratio"] / 1.5
    ax = work_partition.plot_pieces(lens, {"v1": v1, "v3": v3}).axes[0]
    assert len(ax.get_legend().get_texts()) == 2
