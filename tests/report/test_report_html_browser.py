"""The HTML report of a real calibration run, opened in headless Chromium as a person would."""
import base64
import io
import re
import shutil
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

from tests.support.services import need_service
from tests.support.htmlpage import Page
from harness.cli import main

pytestmark = pytest.mark.e2e

SCENARIO = """\
name: html-look
matrix:
  framework: [calibrate]
  model: [retinanet, faster_rcnn]
  precision: [fp32, fp16]
  platform: [local]
  gpus: [1, 2]
batch_per_gpu: 2
input_size: [320, 320]
warmup: 2
measure: 8
repeats: 2
timeout_s: 60
calibrate:
  iteration_ms: 20
  data_ms: 4
"""
BAR_BLUE = (76, 114, 176)     # plots.PALETTE[0], the first framework's bars


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


def browse(url, profile, *args):
    argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--user-data-dir=%s" % profile, *args, url]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_report_of_a_calibration_run_renders_tables_and_charts(tmp_path):
    need_service(chromium() is not None, "chromium is not installed (bash .ci/provision-chromium.sh)")
    from PIL import Image

    (tmp_path / "s.yaml").write_text(SCENARIO)
    results = tmp_path / "results"
    run = CliRunner().invoke(main, ["run", "--scenario", str(tmp_path / "s.yaml"), "--results", str(results)])
    assert run.exit_code == 0 and "16 trials, 0 failed" in run.output, run.output
    md = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results)]).output
    page = tmp_path / "report.html"
    out = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results),
                                    "--format", "html", "--out", str(page)])
    assert out.exit_code == 0, out.output

    dom = browse(page.as_uri(), tmp_path / "profile", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = Page(dom.stdout)
    expected = re.findall(r"^\|(?:RetinaNet|Faster R-CNN w/ FPN)\|([^|]+)\|$", md, re.M)
    assert len(expected) == 12                                   # 2 models x (2card + 1card + 1card iteration) x 2
    for cell in expected:
        assert re.sub(r"[¹²³⁴⁵⁶⁷⁸⁹]", "", cell) in [re.sub(r"\d+$", "", c) for c in parsed.cells]
    alts = [i["alt"] for i in parsed.imgs if i.get("src", "").startswith("data:image/png;base64,")]
    assert {"throughput, local FP32", "throughput, local FP16", "data time share"} <= set(alts)
    assert any(a.startswith("scaling efficiency") for a in alts)
    assert sum(a.startswith("iteration trace") for a in alts) == 8

    shot = tmp_path / "report.png"
    done = browse(page.as_uri(), tmp_path / "profile", "--screenshot=%s" % shot, "--window-size=1280,2000",
                  "--hide-scrollbars")
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 2000)
    pixels = np.asarray(image, dtype=int).reshape(-1, 3)
    white = int((pixels.min(axis=1) > 245).sum())
    assert white < 0.9 * len(pixels)                             # not a blank page
    near_bar = int((np.abs(pixels - BAR_BLUE).max(axis=1) < 12).sum())
    assert near_bar > 20000                                      # the bar charts were drawn, not broken images
    assert shot.stat().st_size > 50000


ORANGE = (221, 132, 82)      # plots.PALETTE[1], the second framework's curves


def test_accuracy_report_opens_with_its_tables_and_both_curves(tmp_path, monkeypatch):
    need_service(chromium() is not None, "chromium is not installed (bash .ci/provision-chromium.sh)")
    from PIL import Image
    from tests.report import test_accuracy_report as stored

    # a server CPU's scope: a dozen instruction-set features in every figure's title
    isa = ["sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni",
           "avx512_bf16", "amx_tile", "amx_bf16"]
    monkeypatch.setattr(stored, "HOST", {"cpu": {"model": "Intel Xeon Platinum 8480+"}, "facts": {"cpu": {"isa": isa}}})
    stored.fill(tmp_path)
    page = tmp_path / "accuracy.html"
    out = CliRunner().invoke(main, ["accuracy", "report", "--results", str(tmp_path), "--format", "html",
                                    "--out", str(page)])
    assert out.exit_code == 0, out.output
    dom = browse(page.as_uri(), tmp_path / "profile", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = Page(dom.stdout)
    # the seed-form table and the stability table, as the browser parsed them
    assert {"17.5 +- 3.5 s", "42.5 +- 10.6 s", "%.2fx" % (42.5 / 17.5), "0.800", "0.700"} <= set(parsed.cells)
    assert {"8 GPUs, final AP BBox", "34.39", "4.19 hrs"} <= set(parsed.cells)      # NVIDIA's tables beside
    alts = [i["alt"] for i in parsed.imgs if i.get("src", "").startswith("data:image/png;base64,")]
    assert alts == ["bbox_AP50 vs time", "loss vs iteration"]
    for img in parsed.imgs:     # the scope in each title is wrapped: no figure wider than the window
        data = base64.b64decode(img["src"].split(",", 1)[1])
        assert Image.open(io.BytesIO(data)).size[0] < 1280

    shot = tmp_path / "accuracy.png"
    done = browse(page.as_uri(), tmp_path / "profile", "--screenshot=%s" % shot, "--window-size=1280,1600",
                  "--hide-scrollbars")
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=int).reshape(-1, 3)
    assert int((pixels.min(axis=1) > 245).sum()) < 0.97 * len(pixels)       # not a blank page
    for colour in (BAR_BLUE, ORANGE):                                          # both frameworks' curves drawn
        assert int((np.abs(pixels - colour).max(axis=1) < 12).sum()) > 300, colour
