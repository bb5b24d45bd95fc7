"""ingest: what a trial drew from its data set, from DETBENCH_DATA lines, over the measured
window and the whole trial, stored with the trial; a log without them is not observed."""
import json

import pytest

from harness import jsonlog
from harness.measure import drawn, flags, ingest

from tests.measure.test_ingest_work_memory import MEASURE, WARMUP, analyse, iteration_lines, trial_folder


def with_data(batches):
    """ITER lines of len(batches) iterations, each followed by its DATA line (epoch, views)."""
    out = []
    for i, line in enumerate(iteration_lines(len(batches)), start=1):
        out.append(line)
        epoch, views = batches[i - 1]
        out.append(jsonlog.data_line(i, epoch, views))
    return out


# 4 images, batch 2: epoch 0 draws every image once (images 1 and 3 mirrored), epoch 1 every image
# again with other flips; the trial's last iteration starts epoch 2
REDRAWN = [(0, [(1, 1), (2, 0)]), (0, [(3, 1), (4, 0)]),
           (1, [(2, 1), (1, 0)]), (1, [(4, 0), (3, 0)]),
           (1, [(1, 1), (2, 1)]), (2, [(3, 1), (4, 1)]), (2, [(1, 0), (2, 0)])]
# the same images, each mirrored always or never (a flip fixed per image), drawn with replacement
FIXED = [(None, [(1, 1), (1, 1)]), (None, [(3, 1), (1, 1)]),
         (None, [(2, 0), (1, 1)]), (None, [(2, 0), (2, 0)]),
         (None, [(1, 1), (3, 1)]), (None, [(1, 1), (2, 0)]), (None, [(3, 1), (3, 1)])]


def test_views_flips_draws_and_epochs_over_the_window_and_the_trial(tmp_path):
    result = analyse(trial_folder(tmp_path, with_data(REDRAWN)))
    # window = iterations 3..6: epoch 1 was started before it (iteration 3 is epoch 1's first, so it counts)
    assert result.drawn == {
        "window": {"views": 7.0, "flips": 5.0, "draws": 8.0, "epochs": 2.0, "images_per_iteration": 2.0},
        "trial": {"views": 8.0, "flips": 7.0, "draws": 14.0, "epochs": 3.0, "images_per_iteration": 2.0}}
    assert json.loads(result.columns()["drawn_json"]) == result.drawn


def test_a_fixed_flip_sampled_with_replacement_shows_fewer_views_and_no_epochs(tmp_path):
    result = analyse(trial_folder(tmp_path, with_data(FIXED)))
    assert result.drawn["trial"] == {"views": 3.0, "flips": 10.0, "draws": 14.0, "images_per_iteration": 2.0}
    assert "epochs" not in result.drawn["window"]      # no epoch logged: not observed, not zero


def test_an_epoch_that_begins_inside_the_window_counts_there_only(tmp_path):
    batches = [(0, [(k, 0)]) for k in range(1, WARMUP + 3)] + [(1, [(k, 0)]) for k in range(1, 4)]
    counts = drawn.summarize({i: b for i, b in enumerate(batches, start=1)}, WARMUP + 1, WARMUP + MEASURE)
    assert counts["epochs"] == 1.0 and counts["views"] == 4.0 and counts["draws"] == 4.0


def test_no_data_lines_or_unreadable_ones_are_not_observed(tmp_path):
    lines = iteration_lines(WARMUP + MEASURE) + [
        jsonlog.DATA_PREFIX + "{not json", jsonlog.DATA_PREFIX + '{"iteration": 3, "epoch": 0, "views": [[1]]}',
        jsonlog.DATA_PREFIX + '{"iteration": 4, "epoch": true, "views": []}']
    result = analyse(trial_folder(tmp_path, lines))
    assert result.drawn is None and result.columns()["drawn_json"] is None


def test_a_failed_trial_stores_no_summary(tmp_path):
    lines = with_data(REDRAWN)[:4]                      # ends before the window does
    result = ingest.analyse(trial_folder(tmp_path, lines), "detbench-jsonl", WARMUP, MEASURE, 2)
    assert result.status == "failed" and result.drawn is None


def many(fixed, images=400, batch=2, epochs=3):
    """`epochs` passes over `images` images in order, batch 2: each image mirrored at every other
    pass (a flip redrawn at each draw, here alternating) or always or never (fixed per image)."""
    draws = [(e, (k, (k % 2) if fixed else (k + e) % 2)) for e in range(epochs) for k in range(1, images + 1)]
    return [(draws[i][0], [view for _, view in draws[i:i + batch]]) for i in range(0, len(draws), batch)]


@pytest.mark.parametrize("rows, flagged", [
    # over 1200 draws of 400 images, flips fixed per image give 400 distinct views against 800
    (((many(False), "r"), (many(True), "f")), [True, True]),
    # the replica's redrawn flips against the fixed ones over 7 iterations: views and flips apart by
    # a few, as two coins over 14 draws are, and no count that is not random apart: no flag
    (((REDRAWN, "r"), (FIXED, "f")), [False, False]),
    # the same draws in two columns, a third that logged nothing: never a difference by itself
    (((REDRAWN, "a"), (REDRAWN, "b"), (None, "c")), [False, False, False]),
])
def test_a_row_whose_frameworks_differ_in_what_they_drew_is_flagged(tmp_path, rows, flagged):
    summaries = []
    for batches, name in rows:
        if batches is None:
            summaries.append(None)
            continue
        folder = tmp_path / name
        folder.mkdir()
        summaries.append(analyse(trial_folder(folder, with_data(batches))).drawn)
    assert flags.unequal_data(summaries) == flagged
