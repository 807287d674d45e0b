"""Front-ends for agents: the simulator as tools, as an environment, and in rollouts."""
