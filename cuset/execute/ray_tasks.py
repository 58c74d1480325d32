"""Run one function over many inputs as Ray tasks; the caller's process gets every outcome.

The one place cuset talks to Ray (used by the batch runner, cuset.evaluate.batch, which
evaluation and curation share). Ray is optional (`pip install 'cuset[ray]'`) and imported here only.

    with ray_session(address=None, num_cpus=2):
        ray_map(fn, [(a, b), ...], resources={"num_cpus": 1}, max_retries=2,
                on_result=lambda i, value: ..., on_lost=lambda i, error: ...)

`fn` must be a module-level function (workers import it). A task whose worker process
dies (killed, out of memory, node lost) is retried `max_retries` times by Ray; after that
`on_lost(i, error)` is called instead of `on_result`. Exceptions raised by `fn` itself
propagate, as they would locally. On Ctrl-C or any error the outstanding tasks are
cancelled before the exception leaves.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
from typing import Any, Callable, Iterator, Sequence

_WORKER_STATE: dict[str, Any] = {}  # in each Ray worker process, by key (see worker_state)


def import_ray():
    try:
        import ray
    except ImportError:
        raise RuntimeError("executor=ray needs Ray: pip install 'cuset[ray]' (or use executor=local)") from None
    return ray


@contextlib.contextmanager
def ray_session(address: str | None, num_cpus: int) -> Iterator[str]:
    """Connect to `address` (an existing cluster), or start an embedded one with `num_cpus`
    cores and stop it afterwards; an already initialised Ray (tests, notebooks) is used as is.
    Yields a description of the cluster for reports."""
    ray = import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        kwargs = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
        if address:
            ray.init(address=address, **kwargs)
        else:
            ray.init(num_cpus=num_cpus, **kwargs)
    try:
        yield address or f"embedded ({ray.get_runtime_context().gcs_address})"
    finally:
        if started_here:
            ray.shutdown()


def ray_map(fn: Callable, calls: Sequence[tuple], *, resources: dict, max_retries: int,
            on_result: Callable[[int, Any], None], on_lost: Callable[[int, BaseException], None],
            shared: tuple = ()) -> None:
    """fn(*shared, *calls[i]) for every i on the cluster, reporting each as it finishes.
    `shared` arguments are put in the object store once and handed to every call."""
    ray = import_ray()
    from ray.exceptions import NodeDiedError, ObjectLostError, OutOfMemoryError, WorkerCrashedError

    lost = (WorkerCrashedError, NodeDiedError, ObjectLostError, OutOfMemoryError)
    remote = ray.remote(fn).options(max_retries=max_retries, retry_exceptions=False, **resources)
    shared_refs = [ray.put(x) for x in shared]
    pending = {remote.remote(*shared_refs, *args): i for i, args in enumerate(calls)}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                i = pending.pop(ref)
                try:
                    value = ray.get(ref)
                except lost as err:
                    on_lost(i, err)
                    continue
                on_result(i, value)
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise


def worker_state(key: str, build: Callable[[], contextlib.AbstractContextManager]) -> Any:
    """The value of the context manager `build()` entered once per worker process and `key`
    (an evaluation pipeline: backend, workspace, compile cache), exited when the process ends."""
    if key not in _WORKER_STATE:
        manager = build()
        _WORKER_STATE[key] = manager.__enter__()
        atexit.register(manager.__exit__, None, None, None)
    return _WORKER_STATE[key]
