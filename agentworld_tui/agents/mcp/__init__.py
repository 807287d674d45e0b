"""A simulated MCP server: any MCP client calls tools, the world model answers.

``toolset`` says what is served (a tools/list, a captured server, or a domain as tools),
``server.AgentServer`` serves it over stdio or streamable HTTP through the official SDK's
low-level server, one session per connection, and exposes the steering API the app
drives (hold, edit and release observations, perturbations, worlds, stop).
"""
