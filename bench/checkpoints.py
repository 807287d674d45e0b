"""Saving and restoring a hybrid model's recurrent state, against what llama.cpp's copy costs.

A generated qwen35moe model whose Gated DeltaNet state has the real model's size per
layer (32 heads of 128 x 128), with as many such layers as make the state the size asked
for. For each size, side by side in one run, the median of ``--reps`` of:

- llama.cpp alone: ``llama_state_seq_get_data_ext`` / ``_set_data_ext`` into and from a
  buffer made once (the floor);
- the engine (``SequenceCache.save`` / ``restore`` in ``engines/llama/cache.py``);
- the engine's former way: a zero-filled ctypes buffer copied into ``bytes`` on save,
  and ``bytes`` copied into a ctypes buffer on restore.

    python bench/checkpoints.py [--sizes 8,32,63] [--reps 7]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

PER_LAYER_MIB = 32 * 128 * 128 * 4 / 2**20  # one DeltaNet layer's state (conv state aside)


def median_ms(action: object, reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        action()  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(size_mib: float, reps: int, folder: Path) -> dict[str, float]:
    import llama_cpp
    import numpy as np
    from ggufgen import write_qwen35moe_model
    from test_engine_llama import MESSAGES, SCRIPT

    from agentworld_tui.engines.base import GenerationControl, GenerationParams
    from agentworld_tui.engines.llama import LlamaEngine

    recurrent = max(1, round(size_mib / PER_LAYER_MIB))
    n_layer = recurrent + recurrent // 3 + (1 if recurrent % 3 else 0)
    n_layer = 4 * -(-n_layer // 4)  # whole groups of three DeltaNet and one attention
    path = write_qwen35moe_model(
        folder / f"state-{size_mib}.gguf", SCRIPT, n_layer=n_layer, d_state=128, dt_rank=32
    )
    engine = LlamaEngine(path, n_ctx=1024, threads=1)
    engine.load()
    try:
        for _ in engine.stream(MESSAGES, GenerationParams(temperature=0.0), GenerationControl()):
            pass
        llm = engine._llm
        ctx = llm.ctx
        flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
        size = int(llama_cpp.llama_state_seq_get_size_ext(ctx, 0, flags))
        tokens = llm.input_ids[: llm.n_tokens].copy()
        floor = np.empty(size, dtype=np.uint8)
        pointer = floor.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))

        def raw_save() -> None:
            llama_cpp.llama_state_seq_get_data_ext(ctx, pointer, size, 0, flags)

        def raw_restore() -> None:
            llama_cpp.llama_state_seq_set_data_ext(ctx, pointer, size, 0, flags)

        def old_save() -> bytes:
            buffer = (ctypes.c_uint8 * size)()
            n = int(llama_cpp.llama_state_seq_get_data_ext(ctx, buffer, size, 0, flags))
            return bytes(memoryview(buffer)[:n])

        saved_bytes = old_save()

        def old_restore() -> None:
            buffer = (ctypes.c_uint8 * len(saved_bytes)).from_buffer_copy(saved_bytes)
            llama_cpp.llama_state_seq_set_data_ext(ctx, buffer, len(saved_bytes), 0, flags)

        cache = engine._cache
        assert cache is not None

        def new_save() -> None:
            cache.states = type(cache.states)(cache.states.budget)
            cache.save(tokens)

        new_save()
        checkpoint = cache.states._items[0]

        def new_restore() -> None:
            cache.restore(checkpoint, len(tokens))

        row = {"state_mib": size / 2**20}
        for name, action in (
            ("raw_save", raw_save),
            ("new_save", new_save),
            ("old_save", old_save),
            ("raw_restore", raw_restore),
            ("new_restore", new_restore),
            ("old_restore", old_restore),
        ):
            row[name] = median_ms(action, reps)
        return row
    finally:
        engine.unload()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,32,63", help="state sizes in MiB")
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    print(
        f"{'state MiB':>9}  {'save: llama.cpp':>15} {'engine':>8} {'before':>8} {'x floor':>7}"
        f"  {'restore: llama.cpp':>18} {'engine':>8} {'before':>8} {'x floor':>7}"
    )
    with tempfile.TemporaryDirectory() as folder:
        for size in (float(s) for s in args.sizes.split(",")):
            r = measure(size, args.reps, Path(folder))
            print(
                f"{r['state_mib']:9.1f}  {r['raw_save']:13.1f}ms {r['new_save']:6.1f}ms "
                f"{r['old_save']:6.1f}ms {r['new_save'] / r['raw_save']:7.2f}"
                f"  {r['raw_restore']:16.1f}ms {r['new_restore']:6.1f}ms "
                f"{r['old_restore']:6.1f}ms {r['new_restore'] / r['raw_restore']:7.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
