# ruff: noqa: E501  (each submission is quoted whole)
"""Hostile or broken submissions: each must end in a clear non-passing verdict, within the time limits.

ADVERSARIAL[name] = (exercise id, source, allowed verdicts). Sources are built from the reference solutions
so that only the hostile behaviour is wrong.
"""
from pathlib import Path

SOLUTIONS = Path(__file__).resolve().parents[3] / "solutions"
S122 = (SOLUTIONS / "122_slot_mapping.py").read_text()
S125 = (SOLUTIONS / "125_paged_decode_attention.py").read_text()
S127 = (SOLUTIONS / "127_block_pool_cow.py").read_text()
BODY = "    return [block_table[p // block_size] * block_size + p % block_size for p in positions]\n"
WA, RE, TLE, MLE = "wrong answer", "runtime error", "time limit", "memory limit"


def in_body(code: str) -> str:
    """The 122 solution with `code` run first inside the function."""
    return S122.replace(BODY, "".join(f"    {line}\n" for line in code.splitlines()) + BODY)


def at_import(code: str, source: str = S122) -> str:
    return source + "\n" + code + "\n"


ADVERSARIAL = {
    "raises": (122, in_body("raise ValueError('boom')"), {RE}),
    "infinite_loop": (122, in_body("while True:\n    pass"), {TLE}),
    "ignores_sigterm_and_loops": (122, at_import("import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)")
                                  .replace(BODY, "    while True:\n        pass\n"), {TLE}),
    "infinite_loop_at_import": (122, at_import("while True:\n    pass"), {TLE}),
    "sleeps_too_long": (122, in_body("import time\ntime.sleep(30)"), {TLE}),
    "sys_exit_at_import": (122, at_import("import sys\nsys.exit(0)"), {RE}),
    "os_exit_at_import": (122, at_import("import os\nos._exit(0)"), {RE}),
    "sys_exit_inside": (122, in_body("import sys\nsys.exit(0)"), {RE}),
    "os_exit_inside": (122, in_body("import os\nos._exit(0)"), {RE}),
    "keyboard_interrupt": (122, in_body("raise KeyboardInterrupt"), {RE}),
    "allocates_64_gib": (122, in_body("import torch\ntorch.empty(64 * 2**30, dtype=torch.uint8)"), {MLE}),
    "allocates_64_gib_at_import": (122, at_import("import torch\nBIG = torch.empty(64 * 2**30, dtype=torch.uint8)"),
                                   {MLE}),
    "grows_a_list_until_memory_runs_out": (122, in_body("import torch\nhog = []\nwhile True:\n"
                                                   "    hog.append(torch.empty(2**28, dtype=torch.uint8))"),
                                           {MLE}),
    # bytearray(n) writes its n zeros: 2 GiB take about a second, so the cap or the deadline comes first
    "fills_memory_with_bytearrays": (122, in_body("hog = []\nfor _ in range(100):\n    hog.append(bytearray(100 * 2**20))"),
                                     {MLE, TLE}),
    "fills_memory_with_bytearrays_at_import": (122, at_import("hog = []\nfor _ in range(100):\n"
                                                              "    hog.append(bytearray(100 * 2**20))"), {MLE, TLE}),
    "fills_memory_slowly_past_the_time_limit": (122, in_body("import time\nhog = []\nwhile True:\n"
                                                             "    hog.append(bytearray(20 * 2**20))\n    time.sleep(0.05)"),
                                                {MLE, TLE}),   # little CPU: the cap, or the wall-clock backstop
    "floods_stdout": (122, in_body("while True:\n    print('x' * 1000)"), {RE}),
    "floods_stderr_then_answers": (122, in_body("import sys\nsys.stderr.write('y' * 10**7)"), {RE}),
    "prints_a_fake_verdict": (122, in_body("print('20/20 passed: PASSED')\nreturn []"), {WA}),
    "infinite_recursion": (122, in_body("def down(n):\n    return down(n + 1)\ndown(0)"), {RE}),
    "segfaults": (122, in_body("import ctypes\nctypes.string_at(0)"), {RE}),
    "patches_torch_comparisons": (125, at_import(
        "torch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True\n"
        "torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)\n"
        "torch.isclose = lambda a, b, **k: torch.ones_like(a, dtype=torch.bool)", S125)
        .replace("    return out\n", "    return torch.zeros_like(out)\n"), {WA}),
    "patches_the_library": (122, at_import(
        "import pagedkv_lib\nimport pagedkv_lib.core.slot_mapping\n"
        "pagedkv_lib.slot_mapping_for = pagedkv_lib.core.slot_mapping.slot_mapping_for = lambda t, p, b: [0] * len(p)")
        .replace(BODY, "    return [0] * len(positions)\n"), {WA}),
    "writes_garbage_to_every_fd": (122, at_import(
        "import os\nfor fd in range(3, 256):\n    try:\n        os.write(fd, b'PASSED' * 100)\n    except OSError:\n"
        "        pass"), {RE}),
    "forges_a_finished_frame": (122, at_import(
        "import os\nfrom pagedkv_lib.judge import protocol\nframe = protocol.encode(protocol.Done())\n"
        "for fd in range(3, 256):\n    try:\n        os.write(fd, frame)\n"
        "    except OSError:\n        pass"), {RE}),
    "closes_every_fd": (122, at_import("import os\nos.closerange(3, 1024)"), {RE}),
    "reexports_the_library": (122, "from pagedkv_lib.core.slot_mapping import slot_mapping_for  # noqa: F401\n", {RE}),
    "reexports_after_a_def": (122, at_import("from pagedkv_lib import slot_mapping_for  # noqa: F811"), {RE}),
    "wraps_the_library": (122, S122.replace(BODY, "    import pagedkv_lib\n"
                                                  "    return pagedkv_lib.slot_mapping_for(block_table, positions, "
                                                  "block_size)\n"), {RE}),
    "imports_the_solution": (122, "import importlib\n_s = importlib.import_module('solutions.122_slot_mapping')\n\n\n"
                                  "def slot_mapping_for(block_table, positions, block_size):\n"
                                  "    return _s.slot_mapping_for(block_table, positions, block_size)\n", {RE}),
    "loads_the_solution_by_path": (122, f"import importlib.util\n_spec = importlib.util.spec_from_file_location("
                                        f"'s', {str(SOLUTIONS / '122_slot_mapping.py')!r})\n"
                                        "_s = importlib.util.module_from_spec(_spec)\n_spec.loader.exec_module(_s)\n\n\n"
                                        "def slot_mapping_for(block_table, positions, block_size):\n"
                                        "    return _s.slot_mapping_for(block_table, positions, block_size)\n", {RE}),
    "reloads_the_library_module": (122, "import importlib\n\nimport pagedkv_lib.core.slot_mapping as _m\n\n"
                                        "_fresh = importlib.reload(_m)\n\n\n"
                                        "def slot_mapping_for(block_table, positions, block_size):\n"
                                        "    return _fresh.slot_mapping_for(block_table, positions, block_size)\n", {RE}),
    "execs_the_library_source": (122, "import pagedkv_lib.core.slot_mapping as _m\n\n_ns = {}\n"
                                      "exec(open(_m.__file__).read().replace('from .', 'from pagedkv_lib.'), _ns)\n\n\n"
                                      "def slot_mapping_for(block_table, positions, block_size):\n"
                                      "    return _ns['slot_mapping_for'](block_table, positions, block_size)\n", {RE}),
    "subclasses_the_library_class": (127, S127.replace("class BlockPool:", "import pagedkv_lib\n\n\n"
                                                       "class BlockPool(pagedkv_lib.BlockPool):"), {RE}),
    "syntax_error": (122, S122 + "\ndef broken(:\n", {RE}),
    "missing_function": (122, "X = 1\n", {"not implemented"}),
}
