"""NVIDIA's EfficientDet-D0 tables (reports/published/nvidia-efficientdet.yaml): every figure of
the seed README rendered exactly as printed, in its own form; a wrong file is one line."""
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.errors import UserError
from harness.report import published
from harness.plan import platforms

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "tests" / "reference" / "seed_nvidia_efficientdet_inference.md"
YAML = ROOT / "reports" / "published" / "nvidia-efficientdet.yaml"
ROW = r"\|\s*(\d+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|"


def seed_inference_rows():
    """{(platform, precision): [row cells as printed]} from the seed README's inference tables
    (tests/reference/seed_nvidia_efficientdet_inference.md holds them as the README prints them)."""
    out = {}
    for m in re.finditer(r"^## (.*?), (FP16|TF32|FP32)\n(.*?)(?=^## |\Z)", SEED.read_text(), re.S | re.M):
        plat = "DGX-A100" if "A100" in m.group(1) else "DGX1-V100"
        out[(plat, m.group(2).lower())] = re.findall(ROW, m.group(3))
    return out


def render(platform):
    out = CliRunner().invoke(main, ["report", "--platform", platform, "--published", "nvidia-efficientdet",
                                    "--results", "/nonexistent-results"])
    assert out.exit_code == 0, out.output
    return out.output


def test_every_published_inference_row_renders_as_printed():
    rows = seed_inference_rows()
    assert sorted(rows) == [("DGX-A100", "fp16"), ("DGX-A100", "tf32"), ("DGX1-V100", "fp16"), ("DGX1-V100", "fp32")]
    assert [len(r) for _, r in sorted(rows.items())] == [9, 8, 8, 8]
    for plat in ("DGX-A100", "DGX1-V100"):
        text = render(plat)
        assert "| Batch size | Throughput Avg | Latency Avg (ms) | Latency 90% (ms) | Latency 95% (ms) | " \
               "Latency 99% (ms) |" in text
        for (p, precision), cells in rows.items():
            if p != plat:
                continue
            title = "#### %s-%s EfficientDet-D0 inference" % (plat, precision.upper())
            table = text[text.index(title):].split("\n\n")[1]
            assert table.splitlines()[2:] == ["| %s |" % " | ".join(c) for c in cells], title


def test_training_tables_render_as_printed():
    text = render("DGX1-V100")
    assert "| 8 | 645 | 777 | 1.2 | 5.7 | 3.34 |" in text
    assert "| 32 | 512 x 512 | FP16 | 64 | 34.02 | 4.19 hrs | 1.33x |" in text
    text = render("DGX-A100")
    assert "| 1 | 162 | 397 | 2.45 | 1 | 1 |" in text and "| 8 | 512 x 512 | TF32 | 104 | 34.53 | 8.5 hrs | - |" in text


def test_the_accuracy_grids_are_the_time_to_train_and_stability_tables():
    pub = published.load("nvidia-efficientdet")
    titles = [g[0] for g in published.grids(pub, kind="accuracy")]
    assert len(titles) == 4 and all("accuracy and time to train" in t for t in titles[:3]) and "stability" in titles[3]
    stability = published.grids(pub, kind="accuracy")[3]
    assert stability[1] == ("Config", "Seed 1", "Seed 2", "Seed 3", "Seed 4", "Seed 5", "Mean", "Standard Deviation")
    assert stability[2] == (("8 GPUs, final AP BBox", "34.38", "34.56", "34.3", "34.34", "34.4", "34.39", "0.1"),)
    assert [g[0] for g in published.grids(pub, kind="throughput")] == [
        "DGX-A100 EfficientDet-D0 training throughput (8x A100 80GB)",
        "DGX1-V100 EfficientDet-D0 training throughput (8x V100 32GB)"]


def test_the_machines_they_name_are_platforms():
    for name, gpu in (("DGX-A100", "A100"), ("DGX1-V100", "V100")):
        spec = platforms.load(name)
        assert gpu in spec.gpus.model and spec.gpus.count == 8


def broken(tmp_path, old, new):
    text = YAML.read_text()
    assert old in text
    (tmp_path / "nvidia-efficientdet.yaml").write_text(text.replace(old, new, 1))
    with pytest.raises(UserError) as info:
        published.load("nvidia-efficientdet", tmp_path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(tmp_path / "nvidia-efficientdet.yaml") + ":")
    return message


@pytest.mark.parametrize("old,new,words", [
    (", p99: 26.31}", "}", "inference.0.rows.0: the 99% latency column is missing"),
    ("throughput: 38, avg: 26.31", "throughput: -38, avg: 26.31", "inference.0.rows.0.throughput"),
    ("{batch: 2, throughput: 40, avg: 49.75", "{batch: 1, throughput: 40, avg: 49.75", "listed twice"),
    ("    platform: DGX-A100\n    precision: fp16", "    platform: DGX-B200\n    precision: fp16", "unknown platform"),
    ("      - [1, 162, 397, 2.45, 1, 1]", "      - [1, 162, 397, 2.45, 1]", "5 cells under 6 headings"),
    ("    kind: accuracy\n    platform: DGX-A100", "    kind: scores\n    platform: DGX-A100", "grids.1.kind"),
    ("    kind: throughput\n", "", "grids.0.kind"),
])
def test_a_wrong_published_file_is_one_line_at_its_line(tmp_path, old, new, words):
    message = broken(tmp_path, old, new)
    assert re.match(r".*:\d+: ", message) and words in message, message


def test_the_published_rows_reach_the_page_and_the_exports():
    base = ["report", "--platform", "DGX-A100", "--published", "nvidia-efficientdet", "--results", "/nonexistent"]
    page = CliRunner().invoke(main, base + ["--format", "html"]).output
    assert "<td>296.1</td>" in page and "<td>8.5 hrs</td>" in page
    import json
    cells = json.loads(CliRunner().invoke(main, base + ["--format", "json"]).output)["cells"]
    first = next(c for c in cells if c["batch_per_gpu"] == 256)
    assert first["source"] == "published" and first["throughput"] == 858
    assert first["latency_percentiles_ms"] == {"90": 296.1, "95": 296.62, "99": 297.76}
