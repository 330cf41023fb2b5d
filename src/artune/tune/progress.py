"""The tuner's progress bar: rich, on stderr, rank 0 only, in budget seconds spent (from the samples)."""

from __future__ import annotations

from types import TracebackType


class RichProgress:
    """A ``Progress`` sink drawing one bar whose total is the run's measuring budget."""

    def __init__(self, total_s: float, title: str = "artune tune") -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            TextColumn(title),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._task = self._bar.add_task("", total=max(total_s, 1e-9))

    def phase(self, description: str) -> None:
        """Show which phase runs."""
        self._bar.update(self._task, description=description)

    def advance(self, seconds: float) -> None:
        """Move the bar by the seconds one harness call spent."""
        self._bar.advance(self._task, seconds)

    def __enter__(self) -> RichProgress:
        self._bar.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._bar.stop()
