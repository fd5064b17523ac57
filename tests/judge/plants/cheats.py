# ruff: noqa: E501  (each submission is quoted whole)
"""Cheating and machine-hurting submissions of exercise 122 against the sandbox itself (the in-process guard
off): each tries one way to pass without solving, or to take more of the machine than its limits.

CHEATS[name] = (source, kind); all are of exercise 122 but `subclasses_find_the_originals` (127). kind "steal": the submission's `slot_mapping_for` is whatever it found (the
library's original, the reference solution, another student's file), else NotImplementedError; it must not
pass. kind "leak": it prints what it can read of the grader's environment and files; none of it may reach
the report. kind "hog": it takes a resource until the kernel says no, and does not catch the refusal: it must
end in a verdict, in time, leaving nothing. Templates: {secret_file} is a file the test writes in a
temporary home outside the repository; {peer} the name of another submission in the same batch.
Paths are found the way a submission would: from its own file and from the `pagedkv_lib` it imports.
"""
from pathlib import Path

SOLUTIONS = Path(__file__).resolve().parents[3] / "solutions"
S122 = (SOLUTIONS / "122_slot_mapping.py").read_text()
BODY = "    return [block_table[p // block_size] * block_size + p % block_size for p in positions]\n"
STUB = "    raise NotImplementedError('nothing found')\n"
FIND = """import os, pagedkv_lib
HERE = os.path.dirname(os.path.realpath(__file__))
ROOTS = [os.path.dirname(HERE), os.path.dirname(os.path.dirname(os.path.abspath(pagedkv_lib.__file__)))]
SOLUTION = [os.path.join(r, 'solutions', '122_slot_mapping.py') for r in ROOTS]
FOUND = None


def run_source(source):
    global FOUND
    if b'NotImplementedError(' not in source:
        space = {}
        exec(compile(source, 'stolen', 'exec'), space)
        FOUND = space.get('slot_mapping_for') or FOUND
"""


def steal(code: str) -> str:
    """A submission that runs `code` at import (errors swallowed), then answers with what it set FOUND to."""
    body = "".join(f"    {line}\n" for line in code.splitlines())
    graded = S122.replace(BODY, "    if FOUND is None:\n" + "    " + STUB + "    return FOUND(block_table, positions, block_size)\n")
    return FIND + "try:\n" + body + "except Exception:\n    pass\n\n\n" + graded.split("from __future__ import annotations\n", 1)[-1]


def hog(code: str) -> str:
    """The solution, with `code` run inside the graded function (not caught)."""
    body = "".join(f"    {line}\n" for line in code.splitlines())
    return S122.replace(BODY, body + BODY)


SUBCLASSES_127 = """try:
    import gc
    import pagedkv_lib.core.block_pool, pagedkv_lib.core.copy_on_write
    BlockPool = next(c for c in object.__subclasses__() if c.__name__ == 'BlockPool' and '__new__' not in vars(c))
    append_slot = next(o for o in gc.get_objects() if getattr(o, '__qualname__', '') == 'append_slot' and not isinstance(o, type))
except Exception:
    class BlockPool:
        def __init__(self, num_blocks):
            raise NotImplementedError('nothing found')

    def append_slot(*args):
        raise NotImplementedError('nothing found')
"""
CHEATS = {
    "gc_finds_the_original": (steal("import gc, pagedkv_lib.core.slot_mapping\n"
                                    "FOUND = next(o for o in gc.get_objects() if getattr(o, '__qualname__', '') == 'slot_mapping_for' and getattr(o, '__module__', '') == 'pagedkv_lib.core.slot_mapping')"), "steal"),
    "gc_after_importing_nothing": (steal("import gc\nFOUND = next(o for o in gc.get_objects() if callable(o) and getattr(o, '__qualname__', '') == 'slot_mapping_for' and 'pagedkv_lib' in getattr(o, '__module__', ''))"), "steal"),
    "library_source_read_and_run": (steal("src = open(os.path.join(os.path.dirname(pagedkv_lib.__file__), 'core', 'slot_mapping.py'), 'rb').read()\n"
                                          "space = {'__name__': 'x'}\nexec(compile(src.replace(b'from .validation', b'from pagedkv_lib.core.validation'), 'x', 'exec'), space)\nFOUND = space['slot_mapping_for']"), "steal"),
    "solution_through_a_dir_fd": (steal("for path in SOLUTION:\n    try:\n        d = os.open(os.path.dirname(path), os.O_RDONLY)\n        f = os.open(os.path.basename(path), os.O_RDONLY, dir_fd=d)\n"
                                        "        run_source(os.read(f, 10**6))\n    except OSError:\n        pass"), "steal"),
    "solution_through_torch_from_file": (steal("import torch\nfor path in SOLUTION:\n    try:\n        n = os.stat(path).st_size\n"
                                               "        run_source(bytes(torch.from_file(path, size=n, dtype=torch.uint8).tolist()))\n    except Exception:\n        pass"), "steal"),
    "solution_through_ctypes": (steal("import ctypes\nlibc = ctypes.CDLL(None)\nfor path in SOLUTION:\n    fd = libc.open(path.encode(), 0)\n    if fd >= 0:\n"
                                      "        buf = ctypes.create_string_buffer(10**6)\n        n = libc.read(fd, buf, 10**6)\n        run_source(buf.raw[:max(n, 0)])"), "steal"),
    "solution_from_the_git_objects": (steal("import zlib\nfor root in ROOTS:\n    for folder, _, files in os.walk(os.path.join(root, '.git', 'objects')):\n        for name in files:\n"
                                            "            try:\n                data = zlib.decompress(open(os.path.join(folder, name), 'rb').read())\n            except Exception:\n                continue\n"
                                            "            if data.startswith(b'blob') and b'def slot_mapping_for' in data:\n                run_source(data.split(b'\\0', 1)[1])"), "steal"),
    "another_student_in_the_batch": (steal("for name in sorted(os.listdir(HERE)):\n    if name.endswith('.py') and name != os.path.basename(__file__):\n"
                                           "        run_source(open(os.path.join(HERE, name), 'rb').read())"), "steal"),
    "subclasses_find_the_originals": (SUBCLASSES_127, "steal"),
    "environment_and_host_files": (S122 + "\n\nimport os\nprint(sorted(os.environ.items()))\nfor path in ['{secret_file}', os.path.expanduser('~/secret.txt')]:\n    try:\n"
                                   "        print(open(path).read())\n    except OSError as e:\n        print('unreadable', path, e)\n", "leak"),
    "memfd_of_3_gib": (hog("import os\nfd = os.memfd_create('hog')\nfor _ in range(3 * 1024):\n    os.write(fd, bytes(2**20))"), "hog"),
    "memfd_through_ctypes": (hog("import ctypes, os\nfd = ctypes.CDLL(None, use_errno=True).memfd_create(b'hog', 0)\n"
                                 "assert fd >= 0, os.strerror(ctypes.get_errno())\nfor _ in range(3 * 1024):\n    os.write(fd, bytes(2**20))"), "hog"),
    "two_gib_file_in_scratch": (hog("with open('hog.bin', 'wb') as f:\n    for _ in range(2 * 1024):\n        f.write(bytes(2**20))"), "hog"),
    "two_gib_of_files_in_scratch": (hog("for i in range(2 * 1024 // 32):\n    with open(f'hog{i}.bin', 'wb') as f:\n        for _ in range(32):\n            f.write(bytes(2**20))"), "hog"),
    "two_gib_in_dev_shm": (hog("for i in range(2 * 1024 // 32):\n    with open(f'/dev/shm/hog{i}', 'wb') as f:\n        for _ in range(32):\n            f.write(bytes(2**20))"), "hog"),
    "five_hundred_threads": (hog("import threading, time\nfor _ in range(500):\n    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()"), "hog"),
    "two_hundred_processes": (hog("import os, time\nfor _ in range(200):\n    if os.fork() == 0:\n        time.sleep(30)\n        os._exit(0)"), "hog"),
}
