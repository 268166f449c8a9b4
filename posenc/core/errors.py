"""Errors that name a user mistake. The CLI turns them into one line and exit code 2."""


class UserError(Exception):
    """A mistake in what the user asked for (a name, a value, a path), not a bug."""


class ConfigError(UserError):
    """A config value that cannot work: an unknown name, a wrong type, an impossible shape."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the run is marked failed in its summary."""


class Interrupted(Exception):
    """A stop signal ended training. ``step`` is the step of the checkpoint just saved in
    ``run_dir`` (None: the signal came twice, so the last periodic checkpoint stands).

    The message is written when read: it names ``run_dir`` to resume only while the folder is
    there (a cached training deletes its unfinished folder on the way out). ``kept``: what
    ``run_dir`` keeps, when it is not a checkpoint (an extrapolation's finished cells)."""

    def __init__(self, signum: int, step: int | None, run_dir: object = None, kept: str | None = None) -> None:
        self.signum, self.step, self.run_dir, self.kept = signum, step, run_dir, kept
        super().__init__(signum, step, run_dir, kept)

    def __str__(self) -> str:
        import signal
        from pathlib import Path

        stopped = f"stopped by {signal.Signals(self.signum).name}"
        if self.run_dir is not None and not Path(str(self.run_dir)).is_dir():
            return f"{stopped}: the unfinished training was discarded, nothing to resume"
        saved = f"checkpoint of step {self.step} saved" if self.step is not None else "last periodic checkpoint kept"
        saved = self.kept or saved
        where = f" in {self.run_dir}; resume with --resume {self.run_dir}" if self.run_dir is not None else ""
        return f"{stopped}: {saved}{where}"

    @property
    def exit_code(self) -> int:
        return 128 + self.signum
