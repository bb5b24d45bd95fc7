"""`detbench bisect` of the bundled trainer's Faster R-CNN cell on the CPU (128x128, batch 1, three
measured iterations) over real commits of a throwaway repository of this project: a slowdown made
only by a trainer config file, or only by the trainer's adapter, is named with its effect against
its parent. Each trial is a training of its own (about 15 s), so these run nightly."""
import io

import pytest

from harness.bisect import search
from tests.support import bisectrepo

pytestmark = [pytest.mark.nightly, pytest.mark.timing]


@pytest.fixture
def scenario(tmp_path):
    path = tmp_path / "faster.yaml"
    path.write_text(bisectrepo.trainer_scenario_text(), encoding="utf-8")
    return path


def hunt(tmp_path, shas, scenario):
    out = io.StringIO()
    opts = search.Options(scenario=str(scenario), good=shas[0], bad=shas[-1], repo=str(tmp_path / "repo"),
                          results_dir=str(tmp_path / "results"), seed=11)
    return search.bisect(opts, out), out.getvalue()


@pytest.mark.parametrize("by", ["config", "adapter"])
def test_a_larger_roi_sample_made_by_one_file_is_named_with_its_effect_against_its_parent(tmp_path, scenario, by):
    shas = bisectrepo.make_trainer_repo(tmp_path / "repo", commits=4, slow_at=2, by=by)
    outcome, text = hunt(tmp_path, shas, scenario)
    assert outcome.culprit is not None and outcome.culprit.label == shas[2], text
    assert outcome.found[0].parent.label == shas[1] and len(outcome.found) == 1, text
    assert outcome.effect.high < 0.95, text           # 512 -> 2048 RoIs: clearly slower than its parent
    assert text.rstrip().splitlines()[-1] == "first bad commit: %s %s" % (shas[2], outcome.culprit.subject)
