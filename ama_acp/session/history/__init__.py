"""A session's history as the person moves in it: checkpoints around every write, `/rewind`, session/fork."""
