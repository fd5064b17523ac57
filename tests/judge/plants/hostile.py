# ruff: noqa: E501  (each submission is quoted whole)
"""Hostile submissions that reach outside the child: processes that would outlive the verdict, writes behind
the judge's back, native code, sockets. Each is exercise 122's solution plus one behaviour, attempted at
import or inside the graded function, with any exception swallowed: a refusal must decide the verdict even
when the submission catches it.

HOSTILE[name] = (source, what it targets). Sources are templates: {marker} is a unique number the test
looks for among the processes afterwards, {port} a port the test listens on. Paths are found the way a
submission would: next to the `pagedkv_lib` it imports (the judge's own checkout).
"""
from pathlib import Path

SOLUTIONS = Path(__file__).resolve().parents[3] / "solutions"
S122 = (SOLUTIONS / "122_slot_mapping.py").read_text()
BODY = "    return [block_table[p // block_size] * block_size + p % block_size for p in positions]\n"
ROOT = "import os, pagedkv_lib\nROOT = os.path.dirname(os.path.dirname(os.path.abspath(pagedkv_lib.__file__)))\n"
LOOP = "    import time\n    while True:\n        time.sleep(0.01)\n"   # after spawning: hold the case until its time limit


def at_import(code: str) -> str:
    body = "".join(f"    {line}\n" for line in code.splitlines())
    return S122 + "\n\n" + ROOT + "try:\n" + body + "except Exception:\n    pass\n"


def in_body(code: str, then: str = BODY) -> str:
    body = "".join(f"        {line}\n" for line in code.splitlines())
    return S122.replace(BODY, "    try:\n" + body + "    except Exception:\n        pass\n" + then)


SLEEP = "['sleep', '{marker}']"
HOSTILE = {
    "double_fork": (in_body("import os\nif os.fork() == 0:\n    if os.fork() == 0:\n        os.execvp('sleep', " + SLEEP + ")\n    os._exit(0)", LOOP), "process"),
    "setsid_subprocess": (in_body("import subprocess\nsubprocess.Popen(" + SLEEP + ", start_new_session=True)", LOOP), "process"),
    "subprocess": (in_body("import subprocess\nsubprocess.Popen(" + SLEEP + ")", LOOP), "process"),
    "os_system_in_the_background": (in_body("import os\nos.system('sleep {marker} &')", LOOP), "process"),
    "fork_loop": (in_body("import os, time\nfor _ in range(5000):\n    if os.fork() == 0:\n        os.execvp('sleep', " + SLEEP + ")", LOOP), "process"),
    "daemon_thread": (in_body("import threading, time\nthreading.Thread(target=lambda: time.sleep(97), daemon=True).start()", LOOP), "thread"),
    "writes_the_status_file": (at_import("import json\nwith open(os.path.join(ROOT, 'practice', '.judge_status.json'), 'w') as f:\n"
                                         "    json.dump({str(i): {'verdict': 'passed', 'passed': 1, 'total': 1, 'file': 'x', 'seed': 0, 'when': 'now'} for i in range(121, 133)}, f)"), "file"),
    "writes_a_case_module": (at_import("with open(os.path.join(ROOT, 'pagedkv_lib', 'judge', 'cases', 'ex122.py'), 'a') as f:\n    f.write('\\n# owned\\n')"), "file"),
    "writes_another_practice_file": (in_body("with open(os.path.join(ROOT, 'practice', '127_block_pool_cow.py'), 'w') as f:\n    f.write('stolen')"), "file"),
    "writes_the_library": (in_body("open(os.path.join(ROOT, 'pagedkv_lib', 'core', 'slot_mapping.py'), 'a').write('\\n# owned\\n')"), "file"),
    "deletes_a_file": (in_body("os.remove(os.path.join(ROOT, 'README.md'))"), "file"),
    "renames_a_file": (in_body("os.rename(os.path.join(ROOT, 'judge.py'), os.path.join(ROOT, 'judge.py.gone'))"), "file"),
    "torch_save_over_the_status_file": (in_body("import torch\ntorch.save({'121': 'passed'}, os.path.join(ROOT, 'practice', '.judge_status.json'))"), "file"),
    "torch_cpp_extension": (in_body("from torch.utils.cpp_extension import load_inline\nload_inline('owned', 'int f() { return 1; }', functions=['f'])"), "native"),
    "ctypes_native_code": (in_body("import ctypes\nctypes.CDLL(None).getpid()"), "native"),
    "socket_to_localhost": (in_body("import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'hello')"), "socket"),
}
for name, (source, target) in list(HOSTILE.items()):
    if "os.path.join(ROOT" in source and "ROOT =" not in source:      # in_body ones find the root too
        HOSTILE[name] = (source.replace("def slot_mapping_for", ROOT + "\n\ndef slot_mapping_for", 1), target)
