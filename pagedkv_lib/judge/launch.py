"""Starting a child: exec'd in a bubblewrap sandbox (a graded file), or forked from the judge (a notebook, or
where bwrap is missing). Either way the child writes protocol frames to `res_w` and its output to `out_w`."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path

from . import isolation

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])    # what the exec'd child needs on sys.path


def in_fork(job, res_r: int, res_w: int, out_r: int, out_w: int) -> int:
    """Fork the judge; the child runs child.fork_main and never returns. Returns the child's pid."""
    from .child import fork_main

    for stream in (sys.stdout, sys.stderr):       # nothing buffered may be printed twice
        if stream is not None:
            stream.flush()
    pid = os.fork()
    if pid == 0:
        os.close(res_r)
        os.close(out_r)
        fork_main(job, res_w, out_w)
    return pid


def in_sandbox(job, res_w: int, out_w: int, enter) -> tuple:
    """`python -m pagedkv_lib.judge.child` inside bwrap, the job pickled to its stdin; `enter` runs in the new
    process before exec (it joins the cgroup). Returns (pid, the Popen to keep alive)."""
    interpret = "1" if job.device == "cpu" else "0"
    path = os.pathsep.join(filter(None, [PACKAGE_PARENT, os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", TRITON_INTERPRET=interpret, PYTHONPATH=path)
    argv = [*isolation.bwrap_argv(job.scratch, job.device), sys.executable, "-m",
            "pagedkv_lib.judge.child", "--result-fd", str(res_w)]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out_w, stderr=out_w, pass_fds=(res_w,),
                            env=env, start_new_session=True, preexec_fn=enter)
    payload = pickle.dumps(job, protocol=4)

    def send() -> None:                           # the job can exceed the pipe's buffer
        try:
            proc.stdin.write(payload)
            proc.stdin.close()
        except OSError:
            pass

    threading.Thread(target=send, daemon=True).start()
    return proc.pid, proc
