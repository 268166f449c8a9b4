"""The engine: compose a config, build what it names, train, evaluate, and write run folders.

Imports the science layer (``posenc.pe``, ``posenc.models``, ``posenc.tasks``) and ``posenc.analysis``;
never the layers above (``posenc.launch``, ``posenc.reporting``, experiments, the CLI).
"""
