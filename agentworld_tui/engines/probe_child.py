"""The child process of a model's trial (``engines/probe.py``): load the model as the engine
would, decode a batch of several tokens, then single tokens, and say how it went on stdout.

A native crash ends this process by a signal, which is the parent's verdict; a Python error
is reported as such (``probe.RESULT_MARK`` and a JSON object).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from agentworld_tui.engines.probe import BATCH_TOKENS, PROBE_CTX, RESULT_MARK, SINGLE_STEPS


def main(argument: str) -> int:
    """Load the model as the engine would and decode a batch, then single tokens."""
    import faulthandler

    faulthandler.enable()  # a crash's Python stack goes to stderr, for the log
    trial = json.loads(argument)
    try:
        import llama_cpp

        from agentworld_tui.engines.llama.loading import (
            llama_arguments,
            templates_left_uncompiled,
        )

        with templates_left_uncompiled():
            llm = llama_cpp.Llama(
                **llama_arguments(
                    Path(trial["model_path"]),
                    n_ctx=PROBE_CTX,
                    gpu_layers=int(trial["gpu_layers"]),
                    threads=int(trial["threads"]),
                    n_batch=int(trial["n_batch"]),
                )
            )
        text = b"The agent lists the files of the project folder, then reads the README. " * 4
        tokens = list(llm.tokenize(text, add_bos=True, special=False))[:BATCH_TOKENS]
        if len(tokens) < 2:
            tokens = [i % llm.n_vocab() for i in range(1, BATCH_TOKENS + 1)]
        llm.eval(tokens)
        for _ in range(SINGLE_STEPS):
            llm.eval([tokens[-1]])
        llm.close()
    except Exception as exc:  # reported, not a crash: the in-process load says it too
        error = f"{type(exc).__name__}: {exc}"
        print(RESULT_MARK + json.dumps({"ok": False, "error": error}), flush=True)
        return 1
    print(RESULT_MARK + json.dumps({"ok": True}), flush=True)
    return 0


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1]) if len(sys.argv) > 1 else 2)
