"""The world model on a server that speaks the OpenAI chat-completions API.

One module per job:

- ``engine``: ``RemoteEngine``, the Engine protocol: load, the answer's stream and what is
  asked again after a refusal;
- ``discovery``: what the engine learns of the server (model, software, context size,
  tokens per character) and its address;
- ``requests``: what a request carries (the answer's body, the parameters a server
  refused, the API key);
- ``reading``: chunks into reasoning and answer events, token counts and the turn's stats;
- ``watch``: the one thread that ends stopped or silent streams;
- ``transport`` and ``events``: the one HTTP client (connections, proxies, bounded
  replies) and the answer's event stream;
- ``errors``: what a failure means, as an ``EngineError`` with its kind.
"""

from agentworld_tui.engines.remote.discovery import base_url, display_url
from agentworld_tui.engines.remote.engine import RemoteEngine
from agentworld_tui.engines.remote.errors import safe_line

__all__ = ["RemoteEngine", "base_url", "display_url", "safe_line"]
