"""posenc: experiments on positional encodings in Transformers.

The library never prints and never parses the command line; ``cli/`` does both.
"""

from posenc.core.errors import ConfigError, UserError

__all__ = ["ConfigError", "UserError"]
__version__ = "0.1.0"
