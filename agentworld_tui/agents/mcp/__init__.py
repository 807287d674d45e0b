"""A simulated MCP server: any MCP client calls tools, the world model answers.

``toolset`` says what is served (a tools/list, a captured server, or a domain as tools),
``server.AgentServer`` serves it over stdio or streamable HTTP through the official SDK's
low-level server: ``connections`` opens one session per connection, ``checking`` and
``answering`` turn each call into a turn of it, and ``steering`` is the API the app
drives (hold, edit and release observations, perturbations, worlds, stop).
"""
