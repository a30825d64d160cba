"""Fuse the index extraction of one resource shape into a single generated Python function.

`extract.index_tuples` runs, for a resource type and its set of top-level keys, every applicable parameter's
path programs and value extractor. Interpreting that plan costs a closure call per path step and a loop turn
per parameter; bulk load does it for every resource. So each (type, shape, row form) plan becomes, once,
straight-line source with the paths as nested loops calling the same value extractors. The rows and their
order are those of the interpreted plan: loops nest in the order the interpreter concatenates node lists
(plain elements, a choice element at the root, reference/where filters); a path with a choice element below
the root, whose interpreter order is by type name first, is run by its compiled closure instead.
tests/fhir_api/store/test_load.py checks both give the same rows over the HL7 examples and the MIMIC demo.
"""

from __future__ import annotations

from collections.abc import Callable

# index type -> the extractor call for node `n` (functions of extract.py; other types go through EX<i>)
CALLS = {
    "token": "_tokens({n}, {ftype})",
    "date": "_dates({n})",
    "quantity": "_quantities({n})",
    "reference": "_references({n}, rows, {head})",
}
# one parameter: (index type, extractor, row head, all-NULL row, ((steps, FHIR type, compiled path), ...),
# whether its rows are kept: a parameter without rows of its own runs for the extractor's side rows only)
Entry = tuple[str, Callable, tuple, tuple, tuple[tuple[tuple, str, Callable], ...], bool]


def generate(
    entries: list[Entry], kinds: tuple[str, ...], shape: tuple[str, ...], namespace: dict
) -> Callable:
    """A function resource -> {index type: rows} equal to running `entries` one after the other."""
    consts: dict[str, object] = {}

    def const(prefix: str, value: object) -> str:
        name = f"{prefix}{len(consts)}"
        consts[name] = value
        return name

    lists = {kind: f"L{i}" for i, kind in enumerate(kinds)}  # each index type's row list, as a local
    body = ["def fused(r):", *(f"    {name} = []" for name in lists.values())]
    body.append(f"    rows = {{{', '.join(f'{kind!r}: {name}' for kind, name in lists.items())}}}")
    for ptype, extract, head, empty, paths, own in entries:
        h, e = const("H", head), const("E", empty)
        call = CALLS.get(ptype) or f"{const('EX', extract)}({{n}}, {{ftype}}, rows, {{head}})"
        body.append("    found = []")
        for steps, ftype, path in paths:
            emit = ("found += " if own else "") + call.format(n="{n}", ftype=repr(ftype), head=h)
            body.extend(_loops(steps, path, shape, emit, const))
        if not own:
            continue
        body += [  # one row (the usual case) without a comprehension's frame
            "    if len(found) == 1:",
            f"        if found[0] != {e}:",
            f"            {lists[ptype]}.append({h} + found[0])",
            "    elif found:",
            f"        {lists[ptype]} += [{h} + row for row in dict.fromkeys(found) if row != {e}]",
        ]
    body.append("    return rows")
    scope = {**namespace, **consts}
    exec("\n".join(body), scope)  # noqa: S102 - source built above from the generated parameter table
    return scope["fused"]


def _loops(steps: tuple, path: Callable, shape: tuple[str, ...], emit: str, const) -> list[str]:
    """Source lines visiting the nodes `steps` reach from resource `r`, running `emit` (with {n}) on each."""
    if any(step[0] == "c" for step in steps[1:]) or any(step[0] not in "fcrw" for step in steps):
        return [f"    for n in {const('P', path)}(r):", "        " + emit.format(n="n")]
    first = steps[0]
    names = [first[1]] if first[0] == "f" else [f"{first[1]}{t[0].upper()}{t[1:]}" for t in first[2]]
    out: list[str] = []
    for name in names:
        if name not in shape:  # the interpreter would find nothing there either
            continue
        lines = [f"    v0 = r.get({name!r})", "    if v0 is not None:"]
        lines.append("        for n0 in (v0 if type(v0) is list else (v0,)):")
        depth, indent = 0, "            "
        for step in steps[1:]:
            node = f"n{depth}"
            if step[0] == "f":
                nxt = depth + 1
                lines += [
                    f"{indent}if type({node}) is dict:",
                    f"{indent}    v{nxt} = {node}.get({step[1]!r})",
                    f"{indent}    if v{nxt} is not None:",
                    f"{indent}        for n{nxt} in (v{nxt} if type(v{nxt}) is list else (v{nxt},)):",
                ]
                depth, indent = nxt, indent + "            "
            elif step[0] == "r":
                lines.append(f"{indent}if isinstance({node}, dict) and _ref_type({node}) == {step[1]!r}:")
                indent += "    "
            else:  # "w"
                lines.append(
                    f"{indent}if isinstance({node}, dict) and {node}.get({step[1]!r}) == {step[2]!r}:"
                )
                indent += "    "
        out += [*lines, indent + emit.format(n=f"n{depth}")]
    return out
