"""A bisect over simulated revisions: each trial's figure is drawn from a seeded log-normal
distribution around the revision's true speed instead of being measured, and goes through the
same search, tests and alpha ledger as a real bisect (search.Bisect.search). It shows what the
decision code does with known truths (a culprit, two steps, a broken revision, noise too large to
settle) in milliseconds: benchmarks/bisect_calibration.py --simulate and the search's tests use it.
It says nothing of the trials themselves (that each revision runs as itself); the real mode and
the tests over real revisions do."""
import io
import math
import random
from typing import Dict, List, Optional, Sequence

from harness.bisect import search


class Simulated(search.Bisect):
    """`speeds[i]`: revision i's true throughput (or latency, with a latency metric); `cv`: the
    trials' coefficient of variation; `broken`: {index: the reason its trials fail}."""

    def __init__(self, opts: search.Options, speeds: Sequence[float], cv: float, seed: int,
                 broken: Optional[Dict[int, str]] = None, out=None):
        super().__init__(opts, out or io.StringIO())
        self.speeds = list(speeds)
        self.sigma = math.sqrt(math.log(1.0 + cv * cv))
        self.noise = random.Random(seed)
        self.broken = dict(broken or {})
        self.state = {"id": "simulated"}
        self.trials = 0

    def revisions(self) -> List[search.Arm]:
        return [search.Arm("r%02d" % i, "r%02d" % i, "revision %d" % i) for i in range(len(self.speeds))]

    def prepare(self, arm: search.Arm):
        index = int(arm.label[1:])
        if index in self.broken:
            raise search.Skip(self.broken[index])

    def measure(self, arm: search.Arm):
        self.prepare(arm)
        self.trials += 1
        arm.values.append(self.speeds[int(arm.label[1:])] * math.exp(self.noise.gauss(0.0, self.sigma)))

    def simulate(self) -> search.Outcome:
        arms = self.revisions()
        self.arms_list = arms
        return self.search(arms)


def simulate(speeds: Sequence[float], cv: float = 0.03, seed: int = 0, broken: Optional[Dict[int, str]] = None,
             opts: Optional[search.Options] = None):
    """(the outcome, the revisions, the simulated bisect) of one simulated search."""
    opts = opts or search.Options(scenario="<simulated>", seed=seed)
    sim = Simulated(opts, speeds, cv, seed, broken)
    outcome = sim.simulate()
    return outcome, sim.arms_list, sim
