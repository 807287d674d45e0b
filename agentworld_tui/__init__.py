"""agentworld-tui: explore language world models from the terminal."""

__version__ = "0.1.0"
