"""What every task shares with the engine that scores it."""

from typing import Literal

IGNORE_INDEX = -100  # a target the loss and the accuracy skip (prompt tokens, padding)
# What a task is judged by when training stops at its target: answer accuracy, or bits per byte (text)
Criterion = Literal["accuracy", "bpb"]
