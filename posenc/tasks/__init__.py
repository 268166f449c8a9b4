"""Tasks: where batches come from. Every task is generated or built in; none downloads unless asked."""

from posenc.tasks.images import ShapesTask
from posenc.tasks.text import TextTask
from posenc.tasks.vision import TorchvisionTask

__all__ = ["ShapesTask", "TextTask", "TorchvisionTask"]
