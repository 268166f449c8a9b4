"""What every task shares with the engine that scores it."""

IGNORE_INDEX = -100  # a target the loss and the accuracy skip (prompt tokens, padding)
