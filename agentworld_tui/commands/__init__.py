"""Sub-commands beyond ``predict``: each module has ``register(sub, engine_flags)`` and is
named in ``cli.COMMAND_MODULES``; nothing heavy is imported until a command runs."""
