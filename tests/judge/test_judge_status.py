"""The status file under several judges at once: every update lands (a lock and a temporary file of each
writer's own), and none leaves a temporary file behind."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WRITER = """
import sys, time
from types import SimpleNamespace
from pagedkv_lib.judge import status

first, count, start = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
while time.time() < start:                       # every writer begins at the same instant
    time.sleep(0.001)
for exercise_id in range(first, first + count):
    status.record(SimpleNamespace(exercise_id=exercise_id, verdict="wrong answer", passed=1, total=2,
                                  label="x.py", seed=0, tampered=[], ok=False))
"""


def test_simultaneous_records_from_several_processes_are_all_kept(tmp_path):
    target = tmp_path / "status.json"
    env = {"PAGEDKV_JUDGE_STATUS": str(target), "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    writers, per_writer = 6, 20
    start = time.time() + 3.0                        # after every interpreter has started
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(1000 + w * per_writer), str(per_writer),
                               str(start)], env=env) for w in range(writers)]
    assert [p.wait(timeout=120) for p in procs] == [0] * writers
    kept = json.loads(target.read_text())
    assert sorted(map(int, kept)) == list(range(1000, 1000 + writers * per_writer))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["status.json", "status.json.lock"]


def test_a_status_lock_held_forever_does_not_hang_the_judge(tmp_path, monkeypatch):
    """Another process holds the status file's lock and never lets go: the update gives up after LOCK_S (the
    verdict is then not kept), and the judge goes on."""
    import fcntl
    import threading
    from types import SimpleNamespace

    from pagedkv_lib.judge import status

    monkeypatch.setenv("PAGEDKV_JUDGE_STATUS", str(tmp_path / "status.json"))
    monkeypatch.setattr(status, "LOCK_S", 0.3)
    holder = open(tmp_path / "status.json.lock", "a")         # a descriptor of its own: flock excludes it
    fcntl.flock(holder, fcntl.LOCK_EX)
    result = SimpleNamespace(tampered=[], exercise_id=122, verdict="passed", passed=1, total=1, label="x.py",
                             seed=0, ok=True)
    updating = threading.Thread(target=status.record, args=(result,), daemon=True)
    updating.start()
    updating.join(10)
    holder.close()
    assert not updating.is_alive(), "the update still waits for the lock"
    assert status.read() == {}
