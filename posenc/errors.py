"""Errors that name a user mistake. The CLI turns them into one line and exit code 2."""


class UserError(Exception):
    """A mistake in what the user asked for (a name, a value, a path), not a bug."""


class ConfigError(UserError):
    """A config value that cannot work: an unknown name, a wrong type, an impossible shape."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the run is marked failed in its summary."""
