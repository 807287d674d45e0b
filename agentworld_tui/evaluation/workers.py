"""Running one request per sample, one at a time or on threads for a server.

Each request gets its own ``GenerationControl`` so that Ctrl-C can stop the ones in flight;
results are handed to ``on_result`` in the calling thread, so writing them needs no lock
beyond the file's own.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from agentworld_tui.engines.base import GenerationControl

Item = TypeVar("Item")
Result = dict[str, Any]


def run_each(
    items: Sequence[Item],
    work: Callable[[Item, GenerationControl], Result],
    on_result: Callable[[Result], None],
    *,
    concurrency: int = 1,
) -> None:
    """``work`` every item; on KeyboardInterrupt the running requests are cancelled, the
    queued ones dropped, and the interrupt raised again once the threads are done."""
    controls: list[GenerationControl] = []
    try:
        if concurrency <= 1:
            for item in items:
                control = GenerationControl()
                controls = [control]
                on_result(work(item, control))
            return
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            futures = []
            for item in items:
                control = GenerationControl()
                controls.append(control)
                futures.append(pool.submit(work, item, control))
            try:
                for future in concurrent.futures.as_completed(futures):
                    on_result(future.result())
            except BaseException:
                for control in controls:
                    control.cancel()
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    except KeyboardInterrupt:
        for control in controls:
            control.cancel()
        raise
