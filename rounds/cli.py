"""The single `rounds` command, the top of the house: every component contributes its subcommands through
`register(app)`, listed in rounds/registry.py `COMMANDS`.

A command's module is imported when that command runs (or shows its own help), never before: importing
every component costs seconds (the web stack, the simulator, the scorer), and `rounds --help` needs only
the table's names and summaries. `LazyCommands` is the group's command mapping; a lookup of one name
imports that name's module, calls its `register` on a private Typer app and keeps the commands it added.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup

from rounds.registry import COMMANDS, CommandEntry

Command = TyperCommand | TyperGroup


class LazyCommands(MutableMapping[str, "Command"]):
    """name -> click command, importing a command's module on its first lookup. An unknown name is a
    KeyError (so `get` answers None, as a dict would)."""

    def __init__(self, entries: tuple[CommandEntry, ...]) -> None:
        self.entries = {entry.name: entry for entry in entries}
        self.loaded: dict[str, Command] = {}

    def load(self, module: str) -> None:
        """Import `module`, let it register on a fresh app, keep every command it added."""
        owned = typer.Typer()
        importlib.import_module(module).register(owned)
        self.loaded.update(typer.main.get_group(owned).commands)

    def __getitem__(self, name: str) -> Command:
        if name not in self.loaded and name in self.entries:
            self.load(self.entries[name].module)
        return self.loaded[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self.entries.pop(name, None)
        del self.loaded[name]

    def __iter__(self) -> Iterator[str]:
        yield from self.entries
        yield from (name for name in self.loaded if name not in self.entries)

    def __len__(self) -> int:
        return len(self.entries.keys() | self.loaded.keys())


class LazyGroup(TyperGroup):
    """The root group: its own help lists the registry's summaries; any other use loads the command."""

    def __init__(self, **attrs: object) -> None:
        super().__init__(**attrs)
        self.commands = LazyCommands(COMMANDS)

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Command | None:
        return self.commands.get(cmd_name)

    def format_help(self, ctx: typer.Context, formatter: object) -> None:
        """The root's help in Typer's layout, drawn with rich's console, panel and table alone: Typer's own
        help renderer imports rich's Markdown and syntax highlighting (pygments), which took as long as the
        rest of `rounds --help` together, for markup the summaries do not use."""
        from rich import box
        from rich.console import Console
        from rich.padding import Padding
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

        console = Console(highlight=False)
        console.print()
        console.print(Text.assemble(" ", ("Usage: ", "yellow"), (ctx.command_path, "bold"),
                                    " [OPTIONS] COMMAND [ARGS]..."))
        console.print()
        console.print(Padding(Text(" ".join((self.help or "").split())), (0, 1)))
        console.print()
        for title, rows in (("Options", [("--help", "Show this message and exit.")]),
                            ("Commands", [(e.name, e.summary) for e in self.commands.entries.values()])):
            table = Table(show_header=False, box=None, expand=True, padding=(0, 2, 0, 0), pad_edge=False)
            table.add_column(style="bold cyan", no_wrap=True, width=max(len(name) for name in self.commands))
            table.add_column(ratio=10)
            for name, summary in rows:
                table.add_row(name, Text(summary))
            console.print(Panel(table, title=title, title_align="left", border_style="dim", box=box.ROUNDED))


app = typer.Typer(
    name="rounds",
    cls=LazyGroup,
    help="Rounds: MIMIC-IV -> FHIR R4 mapping, a FHIR R4 server with per-session sandboxes, "
    "and an event-sourced simulation/scoring backbone.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(ctx: typer.Context) -> None:
    """The process's composition root, made as a command starts and closed when it ends: the settings read
    once, its engine and bus made on first use (rounds/root.py); commands read it with rounds/wiring.py
    `wiring(ctx)`. A caller that set `obj` (a test's own root) keeps it."""
    if ctx.obj is None:
        from rounds.root import Root

        ctx.obj = Root.from_environment()
        ctx.call_on_close(ctx.obj.close)


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
