"""Training-free position and attention remaps of a rotary model (``configs/remap/``), one module per
remap; the shared chunked attention and the ``none`` option are in ``posenc.pe.remap.base``."""
