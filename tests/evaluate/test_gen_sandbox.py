"""Untrusted gen.py (data curation: written by a model) runs inside the sandbox."""

import socket

from cuset.evaluate.workspace import Workspace
from cuset.execute.sandbox import SandboxPolicy
from cuset.tasks import Task
from sandbox_tools import AUTO_MODE, needs_a_sandbox

# Skipped only where no sandbox tool is installed: where one is, a sandbox that cuset
# cannot start fails the test (SandboxUnavailable) instead of hiding it.
pytestmark = needs_a_sandbox

GEN = r"""
import os, socket, numpy as np
os.makedirs("data", exist_ok=True)
np.arange(4, dtype=np.float32).tofile("data/x.bin")
np.arange(4, dtype=np.float32).tofile("data/x_ref.bin")
try:
    socket.create_connection(("127.0.0.1", int(os.environ["PROBE_PORT"])), timeout=2)
    net = "reached"
except OSError:
    net = "blocked"
try:
    open(os.environ["OUTSIDE"], "w").write("escaped")
    fs = "escaped"
except OSError:
    fs = "contained"
print(net, fs)
"""


def test_untrusted_gen_is_sandboxed(tmp_path, make_record, monkeypatch):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    outside = tmp_path / "outside.txt"
    gen = GEN.replace('os.environ["PROBE_PORT"]', str(listener.getsockname()[1])).replace('os.environ["OUTSIDE"]', repr(str(outside)))
    rec = make_record(0, **{"gen.py": gen, "inputs": [{"name": "x", "dtype": "float32", "shape": "(4,)"}]})
    task = Task.from_json(rec)
    with Workspace(parent=tmp_path, script_sandbox=SandboxPolicy(mode=AUTO_MODE)) as ws:
        prepared = ws.prepare(task, 0)
    listener.close()
    assert prepared.problem is None, prepared.step.stderr
    assert prepared.step.stdout.split() == ["blocked", "contained"]
    assert not outside.exists()
