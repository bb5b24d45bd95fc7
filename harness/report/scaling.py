"""Scaling efficiency: throughput on N devices against N times the throughput on one.

    efficiency(N) = throughput(N) / (N x throughput(1))

Built from the measured report tables (harness.report.measured.tables): a series is one
framework and model on one platform, precision and per-device batch, across the device
counts (GPUs per node x nodes) its cells were measured at. Pure functions; the Report holds
scaling_series(), and the Markdown table and the HTML figure (SimpleDet Figure 1a) draw it.
"""

from collections import defaultdict
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from harness.report.model import THROUGHPUT, Table


class ScalingPoint(NamedTuple):
    devices: int
    throughput: float  # images / s, median over repeats
    efficiency: Optional[float]  # 1.0 is perfect linear scaling; None without a baseline


class SeriesKey(NamedTuple):
    platform: str
    precision: str
    batch_per_gpu: int
    model: str
    framework: str


class Layout(NamedTuple):
    nodes: int
    gpus: int  # devices per node

    @property
    def devices(self) -> int:
        return self.nodes * self.gpus


def scaling_points(measurements: Iterable[Tuple[int, float]]) -> List[ScalingPoint]:
    """(devices, throughput) pairs -> points sorted by devices, with their efficiency.

    The baseline is the single-device throughput. Without a 1-device measurement the
    smallest device count measured stands in (efficiency then reads "per device, relative
    to the smallest run"); with no positive throughput at all every efficiency is None.
    """
    pairs = sorted((int(d), float(t)) for d, t in measurements)
    for d, _ in pairs:
        if d < 1:
            raise ValueError("device count must be at least 1, got %d" % d)
    base = next(((d, t) for d, t in pairs if t > 0), None)
    out = []
    for d, t in pairs:
        eff = None if base is None else (t / d) / (base[1] / base[0])
        out.append(ScalingPoint(d, t, eff))
    return out


def scaling_series(tables: Iterable[Table]) -> Dict[SeriesKey, List[Tuple[Layout, ScalingPoint]]]:
    """{series: [(layout, point), ...]} for every series measured at two or more device counts."""
    measured: Dict[SeriesKey, List[Tuple[Layout, float]]] = defaultdict(list)
    for table in tables:
        if table.form != THROUGHPUT or table.source != "measured":
            continue
        for (model, column), entry in table.entries.items():
            if entry.na is not None or entry.throughput is None or column.startswith("published:"):
                continue
            key = SeriesKey(table.platform, table.precision, table.batch_per_gpu, model, column)
            measured[key].append((Layout(table.nodes, table.gpus), entry.throughput))
    out: Dict[SeriesKey, List[Tuple[Layout, ScalingPoint]]] = {}
    for key, rows in measured.items():
        rows.sort(key=lambda r: (r[0].devices, r[0].nodes))
        if len({layout.devices for layout, _ in rows}) < 2:
            continue
        points = scaling_points((layout.devices, thr) for layout, thr in rows)
        # scaling_points sorts by devices only; rows are already in that order (ties by nodes)
        out[key] = list(zip([layout for layout, _ in rows], points))
    return dict(sorted(out.items()))


def baseline_devices(series: Sequence[Tuple[Layout, ScalingPoint]]) -> int:
    """Device count the efficiencies of a series are relative to (1 when measured)."""
    return min(layout.devices for layout, _ in series)
