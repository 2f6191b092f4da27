"""The cluster layout as the lines users read: where it came from, where its sources disagree, and
the system file's links. `inspect`, `model`, the report and the GUI show them; the layout itself is
read by :mod:`extradeep.io.placement`, which keeps to data."""

from __future__ import annotations

from extradeep.io.placement import LEGACY, SOURCES, resolve_layout, source_name


def layout_text(layout: dict | None, system: dict | None = None) -> list[str]:
    """Lines that describe the layout, where it came from and where its sources disagree
    (`inspect`, `model`, the report and the GUI show them)."""
    lines = [_system_line(system)] if system else []
    layout = layout or {}
    resolved = resolve_layout(layout, system)
    source = LEGACY.get(layout.get("source"), layout.get("source"))
    if source in (None, "none"):
        lines.append("layout: " + (layout.get("note") or "not read from the profiles"))
        if resolved["source"] == "system":
            lines.append(f"layout from the system file: {_gpus(resolved['gpus_per_node'])} per node")
        elif "--system" not in lines[-1]:
            lines[-1] += " (give --system to set the layout)"
    else:
        parts = [
            f"{p['ranks']} rank{'s' if p['ranks'] != 1 else ''} on {p['nodes']} node{'s' if p['nodes'] != 1 else ''}"
            for p in layout["points"]
        ]
        lines.append(
            f"layout from {_from(layout)}: {_gpus(int(layout['gpus_per_node']))} per node"
            + ("; " + "; ".join(parts) if parts else "")
        )
    lines += [f"layout: {n}" for n in layout.get("notes", [])]
    lines += [f"WARNING: {w}" for w in layout.get("warnings", [])]
    if resolved["warning"]:
        lines.append(resolved["warning"])
    return lines


def layout_source_text(source: str | None) -> str:
    """'system file' or "profiles' <signal>": where the layout the answers use came from."""
    source = LEGACY.get(source, source)
    return "system file" if source == "system" else f"profiles' {source_name(source)}"


def _from(layout: dict) -> str:
    source = LEGACY.get(layout.get("source"), layout.get("source"))
    if source == "mixed":
        return ", ".join(f"{source_name(s)} ({n} runs)" for s, n in (layout.get("sources") or {}).items())
    fields = ", ".join(layout.get("fields") or [SOURCES[source][1]])
    return f"{source_name(source)} ({fields})"


def _gpus(n: int) -> str:
    return f"{n} GPU{'s' if n != 1 else ''}"


def _system_line(system: dict) -> str:
    links = (
        f", intra {system['intra_bandwidth'] / 1e9:g} GB/s {system['intra_latency'] * 1e6:g} us, "
        f"inter {system['inter_bandwidth'] / 1e9:g} GB/s per NIC {system['inter_latency'] * 1e6:g} us, "
        f"{system['nics_per_node']} NICs per node"
        if system.get("intra_bandwidth")
        else ""
    )
    return f"system: {system.get('name') or 'file'}: {system['gpus_per_node']} GPUs per node{links}"
