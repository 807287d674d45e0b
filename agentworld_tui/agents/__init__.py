"""Front-ends for agents: programs that act in a simulated environment instead of a person.

The MCP server (`agents.mcp`) serves the world model as tools; the environment (`agents.env`)
hands it to training and evaluation code, one episode at a time or thousands in rollouts. Each
drives the simulator service like the app does and keeps each agent's history as a normal session.
"""
