"""The CPU rewriter and the feature check on untrusted sources, under a time limit.

`rewrite` and `find_unsupported` are pure Python and, on pathological input, slow (a
150 KB source of 6,000 empty device functions took about 82 s): run in the
evaluator's own thread they would hold a compile worker with no limit before any
compiler starts. `analyse(sources, timeout)` runs both in a fork of a warm
interpreter that has them imported (cuset.execute.pyrunner.PyForkServer, one per
process, started on first use; a plain `python` process where no server runs),
kills it after `timeout` seconds and raises `RewriteTimeout`. A fork costs a few
milliseconds; results come back pickled from our own code, never from the program.
"""

from __future__ import annotations

import pickle
import shutil
import tempfile
import threading
from pathlib import Path

import cuset
from cuset.errors import CusetError

_JOB = "cuset_rewrite_job.py"
_JOB_CODE = """\
import os
# Said with preallocated bytes and no traceback: past RLIMIT_AS, formatting one can fail too.
OUT_OF_MEMORY = b"MemoryError: the rewriter exceeded its memory limit\\n"
try:
    import pickle
    from cuset.execute.cpu.features import find_unsupported
    from cuset.execute.cpu.rewriter import rewrite
    with open("sources.pickle", "rb") as fh:
        job = pickle.load(fh)
    results = []
    for source in job["sources"]:
        rewritten = rewrite(source, block_loops=job["block_loops"], order_proofs=job.get("order_proofs", False))
        results.append((rewritten, find_unsupported(list(rewritten.tokens), list(rewritten.decls))))
    with open("results.pickle.tmp", "wb") as fh:
        pickle.dump(results, fh)
    os.replace("results.pickle.tmp", "results.pickle")
except MemoryError:
    results = rewritten = job = None
    os.write(2, OUT_OF_MEMORY)
    os._exit(3)
"""
PRELOAD = ("cuset.execute.cpu.rewriter", "cuset.execute.cpu.features", "cuset.execute.cpu.block_loop",
           "cuset.execute.cpu.order_proof")
# Address space of one rewrite (RLIMIT_AS): the rewriter's trees and token lists of a
# 1 MiB source (the largest the evaluation accepts) stay far below it; a source built to
# blow them up ends with a MemoryError in the worker, not in the evaluator's memory.
MEMORY_BYTES = 4 << 30


class RewriteTimeout(CusetError, RuntimeError):
    """The rewriter did not finish on a source within its time limit."""


class RewriteFailed(CusetError, RuntimeError):
    """The rewriter's process ended without a result (its log in the message)."""


_server = None
_server_lock = threading.Lock()


def _env() -> dict[str, str]:
    # the cuset this process runs (a checkout may shadow an installed one)
    return {"PYTHONPATH": str(Path(cuset.__file__).resolve().parent.parent)}


def _fork_server():
    global _server
    from cuset.execute.pyrunner import PyForkServer

    with _server_lock:
        if _server is None or not _server.alive:
            if _server is not None:
                _server.close()   # a dead server's dir of logs goes with it
            _server = PyForkServer(PRELOAD, env=_env())
        return _server


def analyse(sources: list[str], timeout: float, block_loops: bool = False,
            memory_bytes: int = MEMORY_BYTES, order_proofs: bool = False) -> list[tuple]:
    """[(Rewritten, [Unsupported, ...]) per source], computed in a forked worker that is
    killed after `timeout` seconds (RewriteTimeout) and limited to `memory_bytes` of
    address space (RewriteFailed naming the MemoryError). `block_loops`: give kernels that
    need no fiber a block-loop version (block_loop.py); its caller rebuilds from
    `fallback_source` if g++ refuses one (the CPU backend does). `order_proofs`: checked
    pointers in the kernels the runtime can prove order-independent (order_proof.py)."""
    from cuset.execute.pyrunner import run_script

    work = Path(tempfile.mkdtemp(prefix="cuset-rewrite-"))
    try:
        (work / _JOB).write_text(_JOB_CODE)
        with open(work / "sources.pickle", "wb") as fh:
            pickle.dump({"sources": list(sources), "block_loops": block_loops, "order_proofs": order_proofs}, fh)
        step = run_script("rewrite", _JOB, cwd=work, timeout=timeout, extra_env=_env(), server=_fork_server(),
                          memory_bytes=memory_bytes)
        if step.timed_out:
            raise RewriteTimeout(f"the CPU rewriter did not finish in {timeout:g} s on this source")
        try:
            with open(work / "results.pickle", "rb") as fh:
                return pickle.load(fh)
        except OSError:
            raise RewriteFailed(f"the CPU rewriter failed (exit {step.returncode}): "
                                f"{(step.stderr or step.stdout).strip()[-500:]}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
