"""Front-ends for agents: programs that act in a simulated environment instead of a
person (the MCP server; the Python environment and rollouts come later). Each drives the
simulator service like the app does, and keeps each agent's history as a normal session."""
