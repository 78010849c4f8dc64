"""pybb: the repair controller of seed 000, built on the blackboard kernel."""
