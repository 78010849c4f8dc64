"""buddhi: the escalation supervisor of seed 002."""
