"""Tasks: where batches come from. Every task is generated or built in; none downloads."""

from posenc.tasks.text import TextTask

__all__ = ["TextTask"]
