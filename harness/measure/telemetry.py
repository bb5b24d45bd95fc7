"""Flags from a trial's telemetry summary (trial.json "telemetry", runner.py's Sampler).

The flags, their thresholds and their rules are in harness.measure.flags (TELEMETRY, and
MIXED_HOSTS over the repeats' fingerprints); this module applies them to the summaries a
cell's trials stored. A cell gets a flag when any of its finished trials has it.
"""

from typing import Any, Dict, Iterable, List, Optional

from harness.measure import flags


def trial_flags(summary: Optional[Dict[str, Any]]) -> List[str]:
    """Flags for one trial's telemetry summary (a dict, or None when nothing was sampled)."""
    if not summary or not summary.get("samples"):
        return []
    return [f.name for f in flags.TELEMETRY if f.rule(summary)]


def cell_flags(summaries: Iterable[object], fingerprints: Iterable[Optional[str]] = ()) -> List[str]:
    """Flags for a cell from its trials' telemetry summaries (each a dict, or None where nothing
    was sampled or stored: the store's records decode them) and fingerprints, in FLAGS order."""
    seen: set[str] = set()
    for summary in summaries:
        seen.update(trial_flags(summary if isinstance(summary, dict) else None))
    if flags.mixed_hosts(fingerprints):
        seen.add(flags.MIXED_HOSTS)
    return [name for name in flags.FLAGS if name in seen]
