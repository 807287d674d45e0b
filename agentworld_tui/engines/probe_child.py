"""The child process of a model's trial (``engines/probe.py``): load the model as the engine
would, decode a batch of several tokens, then single tokens, and say how it went on stdout.

A native crash ends this process by a signal, which is the parent's verdict; a Python error
is reported as such (``probe.RESULT_MARK`` and a JSON object).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from agentworld_tui.engines.probe import (
    BATCH_TOKENS,
    INFO_MARK,
    PROBE_CTX,
    RESULT_MARK,
    SINGLE_STEPS,
    TRIAL_SLOTS,
)

TEXT = "The agent lists the files of the project folder, then reads the README."


def llama_trial(trial: dict[str, Any]) -> None:
    """llama-cpp-python: a batch of several tokens, then single tokens."""
    import llama_cpp

    from agentworld_tui.engines.llama.loading import llama_arguments, templates_left_uncompiled

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
    tokens = list(llm.tokenize(f"{TEXT} ".encode() * 4, add_bos=True, special=False))
    tokens = tokens[:BATCH_TOKENS]
    if len(tokens) < 2:
        tokens = [i % llm.n_vocab() for i in range(1, BATCH_TOKENS + 1)]
    llm.eval(tokens)
    for _ in range(SINGLE_STEPS):
        llm.eval([tokens[-1]])
    llm.close()


_KEPT: list[Any] = []
"""What must outlive the trial: freed only by the process's end."""


def xllamacpp_trial(trial: dict[str, Any]) -> None:
    """xllamacpp: its server engine with the engine's settings, a short prompt read and
    single tokens generated on ``TRIAL_SLOTS`` slots at once."""
    import xllamacpp

    from agentworld_tui.engines.xllamacpp import server_params, wait_serving

    devices = [str(d.get("name", "")) for d in xllamacpp.get_device_info()]
    build = {"system_info": str(xllamacpp.get_system_info()), "devices": devices}
    print(INFO_MARK + json.dumps(build), flush=True)  # said before the model is loaded
    params = server_params(
        Path(trial["model_path"]),
        n_ctx=PROBE_CTX,
        slots=TRIAL_SLOTS,
        gpu_layers=int(trial["gpu_layers"]),
        threads=int(trial["threads"]),
    )
    server = xllamacpp.Server(params)
    # Never freed before the process ends (os._exit): a server deleted before its task
    # loop runs waits for it forever, and the trial would then run out its time.
    _KEPT.append(server)
    wait_serving(str(server.listening_address), params.api_keys[0])
    replies: list[Any] = []
    failures: list[BaseException] = []

    def received(chunk: Any) -> bool:
        replies.append(chunk)
        return False  # go on

    def decode(slot: int) -> None:
        body = {"prompt": TEXT, "id_slot": slot, "max_tokens": SINGLE_STEPS,
                "cache_prompt": False, "temperature": 0.0}  # fmt: skip
        try:
            server.handle_completions(body, received)
        except Exception as exc:
            failures.append(exc)

    runners = [threading.Thread(target=decode, args=(slot,)) for slot in range(TRIAL_SLOTS)]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join()
    if failures:
        raise failures[0]
    for reply in replies:
        if isinstance(reply, dict) and reply.get("error"):
            error = reply["error"]
            raise RuntimeError(error.get("message") if isinstance(error, dict) else error)
    if len(replies) < TRIAL_SLOTS:
        raise RuntimeError("the server answered no completion")


def main(argument: str) -> int:
    """Load the model as its engine would and decode a batch, then single tokens."""
    import faulthandler

    faulthandler.enable()  # a crash's Python stack goes to stderr, for the log
    trial = json.loads(argument)
    try:
        if trial.get("engine") == "xllamacpp":
            xllamacpp_trial(trial)
        else:
            llama_trial(trial)
    except Exception as exc:  # reported, not a crash: the in-process load says it too
        error = f"{type(exc).__name__}: {exc}"
        print(RESULT_MARK + json.dumps({"ok": False, "error": error}), flush=True)
        return 1
    print(RESULT_MARK + json.dumps({"ok": True}), flush=True)
    return 0


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1]) if len(sys.argv) > 1 else 2)
