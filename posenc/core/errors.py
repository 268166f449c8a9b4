"""Errors that name a user mistake. The CLI turns them into one line and exit code 2."""


class UserError(Exception):
    """A mistake in what the user asked for (a name, a value, a path), not a bug."""


class ConfigError(UserError):
    """A config value that cannot work: an unknown name, a wrong type, an impossible shape."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the run is marked failed in its summary."""


class Interrupted(Exception):
    """A stop signal ended training. ``step`` is the step of the checkpoint just saved in
    ``run_dir`` (None: the signal came twice, so the last periodic checkpoint stands)."""

    def __init__(self, signum: int, step: int | None, run_dir: object = None) -> None:
        import signal

        self.signum, self.step, self.run_dir = signum, step, run_dir
        saved = f"checkpoint of step {step} saved" if step is not None else "last periodic checkpoint kept"
        where = f" in {run_dir}; resume with --resume {run_dir}" if run_dir is not None else ""
        super().__init__(f"stopped by {signal.Signals(signum).name}: {saved}{where}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum
