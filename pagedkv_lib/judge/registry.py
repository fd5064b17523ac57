"""The exercises the judge knows: one `Exercise` per id, the single key for its files, cases and oracle. The
cards themselves, the course's content, are in cases/exercises.py.

Importing this module imports no torch, so `judge.py --list` answers at once.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from .cases.exercises import CARDS
from .speed import SpeedBar

ROOT = Path(__file__).resolve().parents[2]          # the repository: practice/, solutions/, notebooks/
PRACTICE_DIR = ROOT / "practice"
SOLUTIONS_DIR = ROOT / "solutions"


@dataclass(frozen=True)
class Exercise:
    id: int
    slug: str
    title: str
    difficulty: str                   # easy | medium | hard
    notebook: str                     # "NN title" of the notebook that teaches it
    oracle: dict                      # graded name -> "module:attr" of the library object checked against
    forbidden: tuple = ()             # more "module:attr" a submission may not call (they would do the work)
    statement: tuple = ()             # those of `forbidden` that its notebook shows as the exercise's
                                      # statement (a puzzle's PyTorch spec): closed to a submission still
    closed: tuple = ()                # more library modules never in its sandbox (harness.py: they could
                                      # do the graded work too)
    time_limit_s: float = 2.0         # per case
    memory_limit_mb: int | None = 2048  # address space a child may add to its own (None: no cap); on CUDA
                                        # none is set (it reserves far more address space than it uses)
    devices: tuple = ("cpu",)         # case sets: cases.exNNN.build(seed, device) for each of these
    triton: bool = False              # a Triton exercise: the interpreter on "cpu", native on "cuda"
    reference: tuple = ()             # "module:attr" that show_reference prints once passed (default: oracle)
    speed: SpeedBar | None = None     # the bar of its --bench on a GPU (speed.py), for a kernel exercise

    def __post_init__(self):
        shown_only = sorted(set(self.statement) - set(self.forbidden))
        if shown_only:
            raise ValueError(f"exercise {self.id}: statement {shown_only} is not in forbidden (what a "
                             "notebook shows is still closed to a submission)")

    @property
    def filename(self) -> str:
        return f"{self.id}_{self.slug}.py"

    @property
    def practice_path(self) -> Path:
        return PRACTICE_DIR / self.filename

    @property
    def solution_path(self) -> Path:
        return SOLUTIONS_DIR / self.filename

    def cases(self):
        """The case module `pagedkv_lib.judge.cases.ex<id>` (imports torch)."""
        return importlib.import_module(f"pagedkv_lib.judge.cases.ex{self.id}")

    def oracle_namespace(self) -> dict:
        return {name: resolve(target) for name, target in self.oracle.items()}


def resolve(target: str):
    """"pagedkv_lib.studies.memory:kv_bytes_per_token" -> the object."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def _exercise(card: dict) -> Exercise:
    """A card's Exercise; its `speed` (shape, ceiling, fraction) as a SpeedBar."""
    if "speed" in card:
        card = dict(card, speed=SpeedBar(*card["speed"]))
    return Exercise(**card)


EXERCISES: dict[int, Exercise] = {card["id"]: _exercise(card) for card in CARDS}


def get(exercise_id) -> Exercise:
    try:
        return EXERCISES[int(exercise_id)]
    except (KeyError, ValueError):
        known = ", ".join(str(i) for i in EXERCISES)
        raise KeyError(f"exercise {exercise_id!r}: expected one of {known}") from None
