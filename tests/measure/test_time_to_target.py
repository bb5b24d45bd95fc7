"""Time to target is the first crossing of the target, placed by a straight line between the two
checkpoints around it (from a start at 0 s and AP 0), and the spread over seeds is the sample one."""
import math

import pytest

from harness.frameworks.accuracy import checkpoint_of_line, loss_of_line
from harness.measure.accuracy import AccuracyPoint, LossPoint, best, spread, speedup, thin, time_to_target


def curve(*points):
    return [AccuracyPoint(it, s, ap50 / 2, ap50) for it, s, ap50 in points]


def test_crossing_between_two_checkpoints_is_interpolated():
    c = curve((100, 10.0, 0.2), (200, 20.0, 0.6), (300, 30.0, 0.7))
    hit = time_to_target(c, "bbox_AP50", 0.5)
    assert (hit.before, hit.after) == (100, 200)
    assert hit.seconds == pytest.approx(17.5)      # 0.5 is 3/4 of the way from 0.2 to 0.6
    assert hit.iteration == pytest.approx(175)


def test_a_checkpoint_exactly_on_the_target_is_its_own_time():
    hit = time_to_target(curve((100, 10.0, 0.3), (200, 21.0, 0.5)), "bbox_AP50", 0.5)
    assert hit.seconds == pytest.approx(21.0) and hit.iteration == pytest.approx(200)


def test_the_first_crossing_counts_even_if_the_curve_dips_after():
    hit = time_to_target(curve((100, 10.0, 0.6), (200, 20.0, 0.4), (300, 30.0, 0.8)), "bbox_AP50", 0.5)
    assert hit.seconds == pytest.approx(10.0 * 0.5 / 0.6)     # from the start (0 s, AP 0) to the first checkpoint


def test_a_curve_that_never_reaches_the_target_has_no_time():
    assert time_to_target(curve((100, 10.0, 0.2), (200, 20.0, 0.49)), "bbox_AP50", 0.5) is None
    assert time_to_target([], "bbox_AP50", 0.5) is None


def test_the_best_figure_of_a_curve_skips_checkpoints_that_did_not_score_it():
    c = curve((100, 10.0, 0.2), (200, 20.0, 0.45), (300, 30.0, 0.4))
    assert best(c, "bbox_AP50") == pytest.approx(0.45)
    assert best(c, "segm_AP50") is None            # a box model's curve has no mask figure
    assert best([], "bbox_AP50") is None


def test_checkpoints_are_taken_in_iteration_order():
    hit = time_to_target(curve((200, 20.0, 0.6), (100, 10.0, 0.2)), "bbox_AP50", 0.5)
    assert hit.seconds == pytest.approx(17.5)


def test_a_missing_segm_metric_is_skipped_and_unknown_metrics_refused():
    c = [AccuracyPoint(100, 10.0, 0.1, 0.2, None, None), AccuracyPoint(200, 20.0, 0.2, 0.6, 0.3, 0.6)]
    assert time_to_target(c, "segm_AP50", 0.5).seconds == pytest.approx(20.0 * 0.5 / 0.6)
    with pytest.raises(ValueError):
        time_to_target(c, "mAP", 0.5)
    with pytest.raises(ValueError):
        time_to_target(c, "bbox_AP50", 0.0)


def test_spread_is_the_sample_standard_deviation():
    s = spread([0.5, 0.6, 0.7])
    assert s.mean == pytest.approx(0.6) and s.std == pytest.approx(0.1)
    one = spread([0.4])
    assert one.mean == 0.4 and one.std is None
    assert spread([]) is None and spread([math.nan]) is None


def test_speedup_is_reference_over_this():
    assert speedup(30.0, 20.0) == pytest.approx(1.5)
    assert speedup(None, 20.0) is None and speedup(30.0, None) is None


def test_losses_and_checkpoints_are_read_from_every_log_form():
    assert loss_of_line('DETBENCH_ITER {"iteration":7,"time_s":0.1,"loss":1.25}') == (7, 1.25)
    tv = ("Epoch: [0]  [ 6/40]  eta: 0:00:05  lr: 0.000100  loss: 1.2345 (1.3456)  classification: 1.0 (1.0)  "
          "time: 0.2762  data: 0.0031  max mem: 0")
    assert loss_of_line(tv) == (7, 1.2345)          # torchvision counts from 0
    assert loss_of_line(tv.replace("Epoch: [0]", "Epoch: [2]")) == (87, 1.2345)   # ... within each epoch of 40
    assert loss_of_line("iter 7/10  loss 1.7484") is None
    mm = ("11/26 06:54:24 - mmengine - INFO - Iter(train) [2/2]  lr: 1.0000e-02  eta: 0:00:00  time: 0.6879  "
          "data_time: 0.0043  loss: 2.4616  loss_cls: 1.1298  loss_bbox: 1.3318")
    assert loss_of_line(mm) == (2, 2.4616)           # mmengine counts from 1; the total, not a term
    assert loss_of_line(mm.replace("[2/2]", "[  12/1500]").replace("lr:", "base_lr: 1.0e-02 lr:")) == (12, 2.4616)
    assert loss_of_line(mm.replace("Iter(train)", "Iter(val)")) is None
    assert checkpoint_of_line("checkpoint /x/iter_0000004.pth\n") == (4, "/x/iter_0000004.pth")
    assert checkpoint_of_line("checkpoint /x/iter_12.pth") == (12, "/x/iter_12.pth")
    assert checkpoint_of_line("resuming /x/iter_4.pth after iteration 4") is None


def test_thin_keeps_the_last_loss():
    losses = [LossPoint(i, float(i)) for i in range(1, 1001)]
    kept = thin(losses, keep=100)
    assert len(kept) <= 101 and kept[-1] == losses[-1] and kept[0] == losses[0]


# the quick run's trainer curve of the issue: one checkpoint above the target at noise level
BLIP = ((50, 25.0, 0.000), (100, 50.0, 0.058), (150, 75.0, 0.000), (200, 100.0, 0.000))


def test_under_the_stays_rule_a_blip_above_the_target_is_no_crossing():
    c = curve(*BLIP)
    assert time_to_target(c, "bbox_AP50", 0.05) is not None          # the first-crossing reading counted it
    assert time_to_target(c, "bbox_AP50", 0.05, "stays") is None
    assert time_to_target(c, "bbox_AP50", 0.05, "end") is None


def test_under_the_stays_rule_the_crossing_is_the_one_after_which_the_curve_stays_above():
    c = curve((100, 10.0, 0.6), (200, 20.0, 0.4), (300, 30.0, 0.8), (400, 40.0, 0.7))
    hit = time_to_target(c, "bbox_AP50", 0.5, "stays")
    assert (hit.before, hit.after) == (200, 300)
    assert hit.seconds == pytest.approx(20.0 + 10.0 * 0.1 / 0.4)
    # the end rule counts the curve (its last checkpoint is above) at its first crossing
    assert time_to_target(c, "bbox_AP50", 0.5, "end").seconds == pytest.approx(10.0 * 0.5 / 0.6)
    # a curve that ends below the target has reached it under neither
    dips = c + curve((500, 50.0, 0.45))
    assert time_to_target(dips, "bbox_AP50", 0.5, "stays") is None
    assert time_to_target(dips, "bbox_AP50", 0.5, "end") is None
    with pytest.raises(ValueError, match="unknown rule 'never'"):
        time_to_target(c, "bbox_AP50", 0.5, "never")


def test_time_per_iteration_leaves_out_the_start_up_before_the_first_checkpoint():
    from harness.measure.accuracy import iteration_seconds

    assert iteration_seconds(curve((100, 30.0, 0.1), (300, 50.0, 0.5))) == pytest.approx(0.1)
    assert iteration_seconds(curve((100, 30.0, 0.1))) is None
