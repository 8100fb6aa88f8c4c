"""What lets a run skip work: the generate cache and the inputs its keys cover (Note [Generate cache])."""
