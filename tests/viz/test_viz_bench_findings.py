"""The sentences notebooks 10-13 print about the stored GPU runs say what the tables under them show, and
their wording follows the figures (a re-measured run that turns a win into a loss changes the words)."""
from __future__ import annotations

import copy

import pytest

from pagedkv_lib.studies import results
from pagedkv_lib.viz import bench_findings as bf
from pagedkv_lib.viz import fp8_plots, roofline


@pytest.fixture(scope="module")
def decode():
    return results.load("bench_decode.json")


def test_versus_names_the_faster_and_calls_3_percent_a_tie():
    assert bf.versus(100.0, 218.0) == "2.18x faster than"
    assert bf.versus(150.0, 100.0) == "1.50x slower than"
    assert bf.versus(101.0, 100.0) == bf.versus(100.0, 102.9) == "a tie with"


def test_decode_findings_quote_the_table_of_the_same_run(decode):
    text = " ".join(bf.decode_findings(decode).split())                  # the sentences, unwrapped
    table = roofline.decode_table(decode)
    for row in decode["shapes"]:
        if row["shape"] in ("ragged64", "ragged8"):
            us = f"{row['methods']['triton_v3']['us']:.1f}"
            assert f"v3 {us} us" in text and us in table
    assert "FLASH forced has no kernel for the padded batch" in text      # no "us" for sdpa_flash there


def test_decode_findings_turn_a_win_into_a_loss_when_the_figures_do(decode):
    slower = copy.deepcopy(decode)
    for row in slower["shapes"]:
        if row["shape"] == "ragged64":
            row["methods"]["triton_v3"]["us"] = 3 * row["methods"]["flash_varlen"]["us"]
    line = next(s for s in bf.decode_findings(slower).split("\n- ") if "ragged64" in s)
    assert "3.00x slower than it" in " ".join(line.split())


def test_the_first_run_is_quoted_only_when_given(decode):
    first = results.load("first_run/bench_decode.json")
    assert "in the first run" in bf.decode_findings(decode, first)
    assert "in the first run" not in bf.decode_findings(decode)


def test_prefill_fp8_and_store_findings_quote_their_results():
    prefill = results.load("bench_prefill.json")
    cold = next(r for r in prefill["shapes"] if r["shape"] == "cold8x2048")
    assert f"the kernel {cold['methods']['triton']['tflops']:.0f} TFLOP/s" in bf.prefill_findings(prefill)
    speed = fp8_plots.from_decode_results(results.load("bench_decode.json"), "triton_v3", "fp8_v3")
    best = max(r["bf16"]["us"] / r["fp8"]["us"] for r in speed["shapes"])
    assert f"{best:.2f}x" in bf.fp8_speed_findings(speed) and bf.fp8_speed_findings(None) == ""
    store = results.load("store_kvcache_h200.json")
    assert "90% of copy at 32,768 tokens" in bf.store_findings(store)


def test_target_verdicts_are_the_benchmarks_own_lines(tmp_path):
    verdicts = bf.target_verdicts(results.stored_text("bench_decode.txt"))
    assert any(line.split()[0] == "ragged8" and line.endswith("missed") for line in verdicts.splitlines())
    assert bf.target_verdicts(results.stored_text("bench_decode.txt", tmp_path)) == ""


def test_flashinfer_tables_quote_the_stored_run_and_name_a_missing_flashinfer():
    """Notebooks 11, 12, 18 and 21 print FlashInfer's rows from the H100 run; without FlashInfer a row shows
    its error's first words ("FlashInferMissing: not installed") and the verdict column a dash."""
    decode = results.load("flashinfer_run5/bench_decode.json")
    text = bf.flashinfer_table(decode, ("triton_v3", "vllm_unified"),
                               ("flashinfer_decode", "flashinfer_decode_tc"))
    row = next(r for r in decode["shapes"] if r["shape"] == "1x4096")
    assert f"{row['methods']['flashinfer_decode']['us']:.1f}" in text and "1x4096" in text
    assert f"{row['methods']['vllm_unified']['us']:.1f}" in text                 # a shown row, not compared
    missing = copy.deepcopy(decode)
    for r in missing["shapes"]:
        for m in ("flashinfer_decode", "flashinfer_decode_tc"):
            r["methods"][m] = {"error": "FlashInferMissing: not installed (ModuleNotFoundError)"}
    lines = bf.flashinfer_table(missing, ("triton_v3",), ("flashinfer_decode",)).split("\n")[2:]
    assert lines and all("FlashInferMissing: not" in line and line.endswith("   -") for line in lines)
    mla = results.load("flashinfer_run4/bench_mla.json")
    table = bf.mla_flashinfer_table(mla)
    assert all(f"{r['flashinfer_fa3']['us']:.1f}" in table for r in mla["shapes"])
    cascade = results.load("flashinfer_run4/bench_cascade.json")                 # rows: B, prefix + own
    lines = bf.flashinfer_table(cascade, ("cascade",), ("flashinfer_cascade",)).split("\n")[2:]
    assert [line.split()[:4] for line in lines] == [[f"B={B},", "4096", "+", "256"] for B in (64, 128, 256)]
