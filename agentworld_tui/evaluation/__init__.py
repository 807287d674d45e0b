"""Evaluation without the UI: running a model over AgentWorldBench, judging its predictions
and scoring them as the benchmark does (``agentworld bench``)."""
