"""The paper's cells the course reproduces, each within the tolerance stated in studies.serving.paper; the
cells it does not reproduce differ, for the reason given."""
import pytest

from pagedkv_lib.studies.serving.paper import (
    CELLS,
    OPT13B_SLOTS,
    build_table,
    course_values,
    static_table,
    to_markdown,
)

REPRODUCED = [c for c in CELLS if c.tolerance is not None]
NOT_REPRODUCED = [c for c in CELLS if c.tolerance is None]


@pytest.fixture(scope="module")
def values():
    return course_values(num_requests=10_000, seed=0)


@pytest.mark.parametrize("cell", REPRODUCED, ids=lambda c: c.key)
def test_reproduced_within_tolerance(cell, values):
    got = values[cell.key]
    if isinstance(cell.paper, tuple):
        assert cell.paper[0] <= got <= cell.paper[1], f"{cell.key}: paper {cell.paper}, course {got:.2f}"
    else:
        assert abs(got - cell.paper) <= cell.tolerance, f"{cell.key}: paper {cell.paper}, course {got:.2f}"


@pytest.mark.parametrize("cell", NOT_REPRODUCED, ids=lambda c: c.key)
def test_cells_marked_not_reproduced_do_differ_by_over_10_percent(cell, values):
    assert abs(values[cell.key] / cell.paper - 1) > 0.10 and cell.reason.startswith("Differs")


def test_figure_2_token_share_of_token_plus_reservation_is_the_same_for_the_three_orca_variants():
    """The paper's own numbers (Fig. 2, p. 2): the share depends only on the workload, 0.60 in all three."""
    fig2 = {c.key: c.paper for c in CELLS if c.key.startswith("share/")}
    for policy in ("orca_max", "orca_pow2", "orca_oracle"):
        token, resv = fig2[f"share/sharegpt/{policy}/token"], fig2[f"share/sharegpt/{policy}/reserved"]
        assert token / (token + resv) == pytest.approx(0.60, abs=0.01)


def test_opt_13b_has_15_728_slots_in_12_gib():
    assert OPT13B_SLOTS == 15_728


def test_table_has_a_reason_per_row_and_renders(values):
    rows = build_table(values)
    assert len(rows) == len(CELLS) and all(r["reason"].endswith(".") for r in rows)
    text = to_markdown(rows)
    assert "FAILS" not in text and "OUT of range" not in text and text.count("\n") == len(CELLS) + 1


def test_static_table_orders_the_policies_as_the_paper_does():
    """Every workload: paging stores the most token states, then Oracle, Pow2, Max (Fig. 2's order)."""
    table = static_table(num_requests=2000)
    for workload, shares in table.items():
        token = [shares[k]["token"] for k in ("orca_max", "orca_pow2", "orca_oracle", "paged")]
        assert token == sorted(token), workload
