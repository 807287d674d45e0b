"""Reality in the loop: twins, routing between simulation and reality, and grounding."""
