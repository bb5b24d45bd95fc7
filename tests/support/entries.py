"""A measured report cell's Detail, with every field a test does not care about set plainly."""
from harness.report.model import Detail


def detail(**over):
    fields = dict(n=3, failed=0, minimum=54.0, maximum=56.0, iqr=1.0, ci=None, cv=0.01, observed=None, outliers=0,
                  settings={}, settings_variants=(), kinds=("exact",), windows=(), nominal_window=None, work=None,
                  peak_rss_mb=None, peak_device_mb=None, peak_mem_mb=None, run_id="run-1")
    fields.update(over)
    return Detail(**fields)
