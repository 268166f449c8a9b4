"""RULER's synthetic tasks (Hsieh et al. 2024), generated offline on a model's own tokenizer:
needle in a haystack (``niah``), variable tracking, common- and frequent-words extraction, and
the retrieval ones as token tasks for posenc's tiny LMs (``tokens``)."""
