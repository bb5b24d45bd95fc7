"""`detbench platform detect`: this host in words (or JSON), its fingerprint and platform matches."""

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

from harness.plan import platforms
from harness.plan.fingerprint import CPU_ID, NO_ISA, fingerprint, isa_split, stable_facts


def describe(facts: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Everything `platform detect` says, as one JSON-ready dict."""
    facts = platforms.host_facts() if facts is None else facts
    host = platforms.detect_local(facts)
    matches = platforms.compare_all(host)
    return {
        "facts": facts,
        "fingerprint": fingerprint(facts),
        "fingerprinted": stable_facts(facts),
        "platform": host.model_dump(),
        "topology": host.topology,
        "matches": sorted(n for n, d in matches.items() if not d),
        "differences": {n: d for n, d in sorted(matches.items()) if d},
    }


def render_json(facts: Optional[Dict[str, Any]] = None) -> str:
    """`platform detect --json`: describe() as indented JSON."""
    return json.dumps(describe(facts), indent=1, sort_keys=True) + "\n"


def _plural(n: int, word: str) -> str:
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def render_text(facts: Optional[Dict[str, Any]] = None) -> str:
    """`platform detect`: describe() as lines of text."""
    d = describe(facts)
    f = d["facts"]
    cpu = f["cpu"]
    lines = (
        [
            "cpu:         %s; %s, %s, %s; %s available to jobs here"
            % (
                cpu["model"],
                _plural(cpu["sockets"], "socket"),
                _plural(cpu["cores"], "core"),
                _plural(cpu["threads"], "thread"),
                f.get("cores_available"),
            ),
        ]
        + cpu_lines(f)
        + [
            "numa nodes:  %d" % f["numa_nodes"],
            "memory:      %.1f GiB" % (f["memory_mb"] / 1024.0),
            "os:          %s, %s kernel %s (%s)"
            % (f["os"].get("distro") or "?", f["os"]["system"], f["os"]["kernel"], f["os"]["machine"]),
        ]
    )
    if f["gpus"]:
        lines.append(
            "gpus:        %d, driver %s, CUDA %s"
            % (len(f["gpus"]), f.get("gpu_driver") or "?", f.get("cuda_driver") or "?")
        )
        for g in f["gpus"]:
            lines.append(
                "  GPU%d       %s, %.1f GiB, compute capability %s%s"
                % (
                    g["index"],
                    g["name"],
                    g["memory_mb"] / 1024.0,
                    g.get("compute_capability") or "unknown",
                    ", bus " + g["bus_id"] if g.get("bus_id") else "",
                )
            )
        if f.get("gpu_links"):
            lines.append("interconnect: %s" % d["topology"])
            lines += ["  " + row for row in link_matrix(len(f["gpus"]), f["gpu_links"])]
    else:
        lines.append("gpus:        %s" % f.get("gpu_source"))
    lines.append("fingerprint: %s" % d["fingerprint"])
    lines.append("matches:     %s" % (", ".join(d["matches"]) or "no platforms/*.yaml"))
    for name, diffs in d["differences"].items():
        lines.append("  not %s: %s" % (name, "; ".join(diffs)))
    return "\n".join(lines) + "\n"


def cpu_lines(facts: Dict[str, Any]) -> List[str]:
    """The CPU's identity and the instruction-set extensions the fingerprint hashes, as text lines."""
    cpu = facts.get("cpu") or {}
    ident = [(k.replace("_number", ""), cpu.get(k)) for k in CPU_ID if cpu.get(k) is not None]
    lines = ["cpu id:      %s" % ", ".join("%s %s" % kv for kv in ident)] if ident else []
    split = isa_split(facts)
    if split is None:
        return lines + ["isa:         unknown (/proc/cpuinfo lists no flags): the fingerprint " + NO_ISA]
    have, lack = split
    return lines + [
        "isa:         %s" % (" ".join(have) or "none of the extensions the fingerprint checks"),
        "  without    %s" % (" ".join(lack) or "-"),
    ]


SHORT = {
    "same-board": "BRD",
    "pcie-switch": "PIX",
    "pcie-switches": "PXB",
    "host-bridge": "PHB",
    "numa-node": "NODE",
    "cross-socket": "SYS",
}


def link_matrix(n: int, links: Sequence[Dict[str, Any]]) -> List[str]:
    """nvidia-smi-topo-like matrix: NV<k> for k NVLinks, else the PCIe path's short name."""
    cell: Dict[Tuple[int, int], str] = {}
    for l in links:
        path = str(l.get("path") or "?")
        text = "NV%d" % l["nvlinks"] if l.get("nvlinks") else SHORT.get(path, path)
        cell[(l["a"], l["b"])] = cell[(l["b"], l["a"])] = text
    rows = ["      " + "".join("%-6s" % ("GPU%d" % j) for j in range(n))]
    for i in range(n):
        rows.append(
            "%-6s" % ("GPU%d" % i) + "".join("%-6s" % ("X" if i == j else cell.get((i, j), "?")) for j in range(n))
        )
    rows.append(
        "(BRD same board, PIX one PCIe switch, PXB several switches, PHB host bridge, "
        "NODE same NUMA node, SYS across sockets)"
    )
    return rows
