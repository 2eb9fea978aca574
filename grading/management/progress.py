"""How far a long command has come: a bar with counts, rate and time left on a terminal; a plain line every
PLAIN_EVERY_SECONDS in a log or a pipe (a short run writes none: the command's summary says it all). Written to
the command's stderr, so its stdout stays what it was (one line per item, JSON lines)."""

import time
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
from rich.progress import Progress as Bar

PLAIN_EVERY_SECONDS = 10.0


class Progress:
    def __init__(self, stream: TextIO, *, what: str, total: int | None) -> None:
        self.what = what
        self.total = total
        self.done = 0
        # A Django command's stderr wraps the real stream and appends a line ending to each write, which a bar
        # redrawn in place cannot have.
        self._stream: TextIO = getattr(stream, "_out", stream)
        self._started = self._last_line = time.monotonic()
        self._bar: Bar | None = None
        if self._stream.isatty():
            self._bar = Bar(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                console=Console(file=self._stream),
                transient=False,
            )
            self._task = self._bar.add_task(what, total=total, rate="")

    def __enter__(self) -> "Progress":
        if self._bar is not None:
            self._bar.start()
        return self

    def advance(self, count: int = 1) -> None:
        self.reached(self.done + count)

    def reached(self, done: int, total: int | None = None) -> None:
        """`done` of `total` (when the total is learnt on the way)."""
        self.done = done
        if total is not None:
            self.total = total
        now = time.monotonic()
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, total=self.total, rate=self._rate(now))
        elif now - self._last_line >= PLAIN_EVERY_SECONDS:
            self._last_line = now
            self._write_line(now)

    def say(self, out: TextIO, line: str) -> None:
        """Write a line of the command's own output; above the bar while both go to a terminal."""
        if self._bar is not None and out.isatty():
            self._bar.console.print(line.rstrip("\n"), markup=False, highlight=False, soft_wrap=True)
        else:
            out.write(line)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def _write_line(self, now: float) -> None:
        of = f" of {self.total:,}" if self.total is not None else ""
        line = f"{self.what}: {self.done:,}{of}, {self._rate(now)}"
        if self.total is not None and self.done:
            left = (self.total - self.done) * (now - self._started) / self.done
            line += f", about {_duration(left)} left"
        self._stream.write(line + "\n")
        self._stream.flush()

    def _rate(self, now: float) -> str:
        elapsed = now - self._started
        return f"{self.done / elapsed:,.1f}/s" if elapsed > 0 and self.done else "–/s"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
