"""The world model in-process, through llama-cpp-python.

- ``engine``: ``LlamaEngine``, the model's lifecycle and the decoding loop;
- ``cache``: what the context's sequence holds, reused, kept and restored across prompts
  (a hybrid model's recurrent checkpoints, other conversations' whole states, the state
  file of ``predict --session``);
- ``states``: the store of saved states, within a byte budget;
- ``loading``: llama-cpp-python's load, its logs, and the crash trial before it.
"""

from agentworld_tui.engines.llama.engine import LlamaEngine

__all__ = ["LlamaEngine"]
