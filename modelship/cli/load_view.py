"""How a checkpoint load is shown to a person: shared by `modelship inspect` and `export-model`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import Progress, TaskID
from rich.table import Table

from modelship.cli.main import make_console

if TYPE_CHECKING:
    from modelship.checkpoint.load_report import LoadReport

MAX_ROWS = 15


class FingerprintProgress:
    """A callback that shows a progress bar on stderr while fingerprint signatures are built (cold cache)."""

    def __init__(self) -> None:
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = Progress(console=make_console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("building architecture signatures (cached afterwards)", total=total)
        assert self.task is not None
        self.bar.update(self.task, completed=done)
        if done == total:
            self.bar.stop()
            self.bar = None


def fingerprint_progress() -> FingerprintProgress:
    """A fresh progress callback for one load."""
    return FingerprintProgress()


def print_container(console: Console, r: LoadReport) -> None:
    """The file and the top-level structure of the checkpoint."""
    console.print(f"[bold]{r.checkpoint}[/]  {r.format}, {r.size_bytes / 1e6:.1f} MB, sha256 {r.sha256[:16]}")
    container = Table("key", "kind", "contents", title="container", title_justify="left")
    for row in r.container:
        container.add_row(row.key, row.kind, row.summary)
    console.print(container)


def print_load_report(console: Console, r: LoadReport) -> None:
    """Where the weights came from, the architecture and how it was resolved, every key change and problem."""
    where = f"'{r.state_key}'" if r.state_key else "the top level"
    dtypes = ", ".join(f"{n} {d}" for d, n in r.dtypes.items())
    console.print(
        f"weights: {where}{' (EMA)' if r.ema else ''}: {r.tensors} tensors, {r.parameters:,} values ({dtypes})"
    )
    if r.arch:
        kwargs = f" {r.arch_kwargs}" if r.arch_kwargs else ""
        console.print(f"architecture: [bold]{r.arch}[/]{kwargs} from {r.arch_source}: {r.arch_detail}")
    for prefix, count in r.stripped_prefixes.items():
        console.print(f"stripped wrapper prefix '{prefix}' from {count} keys")
    renames = {old: new for old, new in r.renamed.items() if not any(old == p + new for p in r.stripped_prefixes)}
    _table(console, "renamed (key map)", ("checkpoint key", "model key"), list(renames.items()))
    _table(console, "dropped (key map)", ("checkpoint key",), [(k,) for k in r.dropped])
    _table(console, "allowed missing (left as initialised)", ("model key",), [(k,) for k in r.allowed_missing])
    _table(console, "allowed unexpected (ignored)", ("checkpoint key",), [(k,) for k in r.allowed_unexpected])
    for rule in r.unused_key_map_rules:
        console.print(f"[yellow]key-map rule never applied:[/] {rule}")
    for note in r.notes:
        console.print(f"note: {note}")
    _print_problems(console, r)
    console.print("[green]OK[/]: every weight loaded" if r.ok else "[red]FAILED[/]")


def _table(console: Console, title: str, columns: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    if not rows:
        return
    table = Table(*columns, title=f"{title}: {len(rows)}", title_justify="left")
    for row in rows[:MAX_ROWS]:
        table.add_row(*row)
    if len(rows) > MAX_ROWS:
        table.add_row(*([f"... {len(rows) - MAX_ROWS} more (--json lists all)"] + [""] * (len(columns) - 1)))
    console.print(table)


def _print_problems(console: Console, r: LoadReport) -> None:
    from modelship.checkpoint.matching import group_keys

    for title, keys in (("missing from the checkpoint", r.missing_keys), ("unexpected", r.unexpected_keys)):
        if keys:
            _table(
                console,
                f"{title} ({len(keys)} keys), by module",
                ("module", "keys"),
                [(prefix, str(count)) for prefix, count in group_keys(keys)],
            )
    rows = [(m.key, str(tuple(m.checkpoint)), str(tuple(m.model))) for m in r.shape_mismatches]
    _table(console, "shape mismatches", ("key", "checkpoint", "model"), rows)
    for suggestion in r.suggestions:
        console.print(f"looks renamed: {', '.join(suggestion.old)} -> {', '.join(suggestion.new)}; key-map rule:")
        console.print(suggestion.toml, markup=False)
