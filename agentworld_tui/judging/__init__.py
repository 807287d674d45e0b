"""Judging, in one place: the judge's prompts and messages (``prompts``), asking a judge
engine (``judge``), reading its answer the project's way (``reading``) and the official
evaluator's way (``official``), and judging a turn through the simulator (``turn``).
The judgement kept with a turn is world data: ``agentworld_tui.world.judgement``."""
