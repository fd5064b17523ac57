# ruff: noqa: E501  (each submission is quoted whole)
"""Submissions that attack the parent rather than the verdict: they flood or forge its result channel, keep it
busy, send numbers JSON has no words for, and quote huge or control-laden text back into the report.

FLOODS[name] = (exercise id, source, allowed verdicts). Each writes to every descriptor it may hold (its
result channel is one of them: a submission does not know which), from the graded function, so that
its first case is where it happens.
"""
from plants.adversarial import RE, TLE, in_body

EVERY_FD = "import os\nfds = [fd for fd in range(3, 64) if fd not in (0, 1, 2)]\n"
SEND = "def send(data):\n    for fd in fds:\n        try:\n            os.write(fd, data)\n        except OSError:\n            pass\n"

FLOODS = {
    # 60 MB case results, a list of 15 million floats each (a parser that takes it holds gigabytes), forever
    "floods_the_result_channel": (122, in_body(EVERY_FD + SEND + "line = b'{\"type\": \"case\", \"index\": 0, \"time_s\": 0, \"error\": null, \"observation\": [' + b'0.5,' * 15_000_000 + b'0.5]}\\n'\nwhile True:\n    send(line)"), {RE}),
    # 6 MiB messages, each one a valid refusal: over the stream's cap after a few
    "floods_with_refusals": (122, in_body(EVERY_FD + SEND + "line = b'{\"type\": \"refused\", \"action\": \"' + b'x' * (6 * 2**20) + b'\"}\\n'\nwhile True:\n    send(line)"), {RE}),
    # one line that never ends
    "sends_an_endless_line": (122, in_body(EVERY_FD + SEND + "while True:\n    send(b'[' * 2**16)"), {RE}),
    # small valid messages from a thread while the case hangs: the channel is never empty
    "keeps_the_channel_busy": (122, in_body(EVERY_FD + SEND + "import threading\nline = b'{\"type\": \"refused\", \"action\": \"busy\"}\\n'\n"
                                             "threading.Thread(target=lambda: [send(line) for _ in iter(int, 1)], daemon=True).start()\n"
                                             "import time\nwhile True:\n    time.sleep(1)"), {RE, TLE}),
    # a case result with a NaN time (then it exits, before its real one)
    "sends_nan_times": (122, in_body(EVERY_FD + SEND + "send(b'{\"type\": \"case\", \"index\": 0, \"time_s\": NaN, \"observation\": null, \"error\": null}\\n')\nos._exit(0)"), {RE}),
    "sends_an_infinite_benchmark": (122, in_body(EVERY_FD + SEND + "send(b'{\"type\": \"done\", \"figures\": {\"gbs\": Infinity}}\\n')\nos._exit(0)"), {RE}),
    "sends_extra_fields": (122, in_body(EVERY_FD + SEND + "send(b'{\"type\": \"case\", \"index\": 0, \"time_s\": 0, \"observation\": null, \"error\": null, \"verdict\": \"passed\"}\\n')\nos._exit(0)"), {RE}),
    "sends_a_negative_time": (122, in_body(EVERY_FD + SEND + "send(b'{\"type\": \"case\", \"index\": 0, \"time_s\": -1e9, \"observation\": null, \"error\": null}\\n')\nos._exit(0)"), {RE}),
    # an 8 MB path in a refusal, a huge exception message
    "refused_with_an_8_mb_path": (122, in_body("open('/' + 'x' * 8_000_000, 'w')"), {RE}),
    "raises_with_a_huge_message": (122, in_body("raise ValueError('y' * 8_000_000)"), {RE}),
    # terminal escapes in what it prints and in what it raises
    "prints_and_raises_escapes": (122, in_body("print('\\x1b[2J\\x1b[31mall cases PASSED\\r')\nraise ValueError('\\x1b]0;owned\\x07\\x1b[1A')"), {RE}),
}
