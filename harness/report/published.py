"""Published figures (reports/published/*.yaml) as report tables.

Column keys are the file's own names under `frameworks`, titled there; they need not be
frameworks the harness runs (a paper may compare frameworks detbench has no adapter for).
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Dict, List, Literal, Optional, Sequence, Tuple, Union

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints, ValidationError

from harness.vocab import catalog
from harness.plan import yamlfile
from harness.errors import UserError, located
from harness.report.model import Column, Entry, Latency, LatencyTable, Table, batch_note
from harness.plan.strict import Strict

SPEED = "speed"  # a published form with images/s alone, printed as given: cells like 54

PUBLISHED_DIR = Path(__file__).resolve().parents[2] / "reports" / "published"


class Figure(Strict):
    throughput: Optional[float] = Field(default=None, gt=0)
    iteration_ms: Optional[float] = Field(default=None, gt=0)
    data_ms: Optional[float] = Field(default=None, ge=0)
    na: Optional[str] = None


class PublishedFramework(Strict):
    title: str
    pins: str = ""


def _feature_value(value: object) -> Union[bool, str]:
    """A feature cell: true (has it), false (lacks it) or a short word such as "few"."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip() and len(value) <= 40 and "\n" not in value:
        return value
    raise ValueError("a feature is true, false or a short word (at most 40 characters), got %r" % (value,))


FeatureValue = Annotated[Union[bool, str], BeforeValidator(_feature_value)]
Note = Annotated[str, StringConstraints(min_length=1, max_length=1000)]


class PublishedTable(Strict):
    title: str
    platform: str
    precision: str
    gpus: int = Field(ge=1)
    nodes: int = Field(default=1, ge=1)
    batch_per_gpu: int = Field(ge=1)
    form: Literal["throughput", "iteration", "speed"]
    rows: Dict[str, Dict[str, Figure]]
    # rows of what each framework has, not figures: feature name -> framework -> value
    features: Dict[str, Dict[str, FeatureValue]] = Field(default_factory=dict)
    notes: List[Note] = Field(default_factory=list)  # printed under the table, after the pins


@dataclass(frozen=True)
class FeatureTable(Table):
    """A published table that also lists features: feature name -> column key -> value."""

    features: Dict[str, Dict[str, Union[bool, str]]] = field(default_factory=dict)


PERCENTILE_KEYS = {90.0: "p90", 95.0: "p95", 99.0: "p99", 50.0: "p50"}


def _positive(value: float) -> float:
    if value <= 0:
        raise ValueError("a published figure is above 0, got %r" % (value,))
    return value


# a positive figure kept as printed: 38 stays an integer, 26.27 a float
Number = Annotated[Union[int, float], AfterValidator(_positive)]


class LatencyRow(Strict):
    """One batch size of a published inference table, each figure as printed."""

    batch: int = Field(ge=1)
    throughput: Number
    avg: Number  # latency average, ms
    p50: Optional[Number] = None
    p90: Optional[Number] = None
    p95: Optional[Number] = None
    p99: Optional[Number] = None


class PublishedInference(Strict):
    """A published inference table in NVIDIA's form: a row per batch size."""

    title: str
    platform: str
    precision: str
    framework: str
    model: str
    input_size: List[int] = Field(min_length=2, max_length=2)
    percentiles: List[float] = Field(min_length=1)
    rows: List[LatencyRow] = Field(min_length=1)
    notes: List[Note] = Field(default_factory=list)


Cell = Union[int, float, Annotated[str, StringConstraints(min_length=1, max_length=60)]]


class PublishedGrid(Strict):
    """A published table printed as it stands (headings and cells as given): training throughput
    and scaling (`kind: throughput`), accuracy, time to train and stability over seeds (`kind:
    accuracy`, which `detbench accuracy report` prints beside its own tables)."""

    title: str
    kind: Literal["throughput", "accuracy"]
    platform: str
    columns: List[Annotated[str, StringConstraints(min_length=1, max_length=80)]] = Field(min_length=2)
    rows: List[List[Cell]] = Field(min_length=1)
    notes: List[Note] = Field(default_factory=list)


class Published(Strict):
    name: str
    source: str
    frameworks: Dict[str, PublishedFramework]
    tables: List[PublishedTable] = Field(default_factory=list)
    inference: List[PublishedInference] = Field(default_factory=list)
    grids: List[PublishedGrid] = Field(default_factory=list)


def names(directory: Union[str, Path] = PUBLISHED_DIR) -> List[str]:
    """The published figure files there are (published/*.yaml), by name."""
    return sorted(p.stem for p in Path(directory).glob("*.yaml"))


def load(name: str, directory: Union[str, Path] = PUBLISHED_DIR) -> "Published":
    path = Path(directory) / ("%s.yaml" % name)
    if not path.is_file():
        raise UserError("no published figures named %r (known: %s)" % (name, ", ".join(names(directory))))
    data, positions = yamlfile.load(path)
    try:
        pub = Published.model_validate(data)
    except ValidationError as exc:
        raise yamlfile.validation_error(path, positions, exc) from None
    _check_forms(pub, path, positions)
    for i, t in enumerate(pub.tables):
        for model, row in t.rows.items():
            for fw in row:
                if fw not in pub.frameworks:
                    raise UserError(
                        located(
                            path,
                            0,
                            "tables.%s.rows.%s" % (t.title, model),
                            "framework %r is not listed under frameworks" % fw,
                        )
                    )
                if (
                    t.form == SPEED
                    and row[fw].na is None
                    and (row[fw].throughput is None or row[fw].iteration_ms is not None or row[fw].data_ms is not None)
                ):
                    where = ("tables", i, "rows", model, fw)
                    raise UserError(
                        located(
                            path,
                            yamlfile.line_of(positions, where),
                            ".".join(map(str, where)),
                            "a speed table's figure is a throughput alone (or na)",
                        )
                    )
        for feature, values in t.features.items():
            for fw in values:
                if fw not in pub.frameworks:
                    where = ("tables", i, "features", feature, fw)
                    raise UserError(
                        located(
                            path,
                            yamlfile.line_of(positions, where),
                            ".".join(map(str, where)),
                            "framework %r is not listed under frameworks" % fw,
                        )
                    )
    return pub


def _check_forms(pub: "Published", path: Path, positions: yamlfile.Positions) -> None:
    """What the typed models cannot say: something to show, known frameworks, models and platforms,
    every percentile column filled, a batch size once, rows as wide as the headings."""
    from harness.plan import platforms

    def fail(where: Sequence[Union[str, int]], message: str) -> None:
        raise UserError(located(path, yamlfile.line_of(positions, where), ".".join(map(str, where)), message))

    if not (pub.tables or pub.inference or pub.grids):
        fail(("tables",), "no tables, inference tables or grids: nothing to show")
    known = platforms.known_names()
    for i, t in enumerate(pub.inference):
        for field_name, value, valid in (
            ("framework", t.framework, pub.frameworks),
            ("model", t.model, catalog.MODELS),
            ("platform", t.platform, known),
            ("precision", t.precision, catalog.PRECISIONS),
        ):
            if value not in valid:
                fail(("inference", i, field_name), "unknown %s %r (known: %s)" % (field_name, value, ", ".join(valid)))
        for j, p in enumerate(t.percentiles):
            if p not in PERCENTILE_KEYS:
                fail(
                    ("inference", i, "percentiles", j),
                    "a published percentile column is one of %s" % ", ".join("%g" % k for k in sorted(PERCENTILE_KEYS)),
                )
        seen = set()
        for j, row in enumerate(t.rows):
            if row.batch in seen:
                fail(("inference", i, "rows", j, "batch"), "batch size %d is listed twice" % row.batch)
            seen.add(row.batch)
            for p in t.percentiles:
                if getattr(row, PERCENTILE_KEYS[p]) is None:
                    fail(("inference", i, "rows", j), "the %g%% latency column is missing" % p)
    for i, g in enumerate(pub.grids):
        if g.platform not in known:
            fail(("grids", i, "platform"), "unknown platform %r (known: %s)" % (g.platform, ", ".join(known)))
        for j, cells in enumerate(g.rows):
            if len(cells) != len(g.columns):
                fail(("grids", i, "rows", j), "%d cells under %d headings" % (len(cells), len(g.columns)))


def latency_tables(pub: "Published", platform: Optional[str] = None) -> List[LatencyTable]:
    """The published inference tables as LatencyTables (source "published"), figures as printed."""
    out: List[LatencyTable] = []
    for t in pub.inference:
        if platform and t.platform != platform:
            continue
        rows: List[Tuple[int, Entry]] = []
        for row in t.rows:
            lat = Latency(
                batch=row.batch,
                mean_ms=row.avg,
                percentiles=tuple((p, getattr(row, PERCENTILE_KEYS[p])) for p in t.percentiles),
                p50_ms=row.p50,
                batches=0,
                phases_ms={},
                detections_per_image=None,
                mean_spread_ms=None,
            )
            rows.append((row.batch, Entry(throughput=row.throughput, latency=lat)))
        fw = pub.frameworks[t.framework]
        notes = (
            "Published in %s; %dx%d images, one GPU; %s."
            % (pub.source, t.input_size[0], t.input_size[1], fw.pins or fw.title),
        ) + tuple(t.notes)
        out.append(
            LatencyTable(
                title=t.title,
                platform=t.platform,
                precision=t.precision,
                framework=t.framework,
                framework_title=fw.title,
                model=t.model,
                percentiles=tuple(t.percentiles),
                rows=tuple(rows),
                notes=notes,
                source="published",
            )
        )
    return out


Grid = Tuple[str, Tuple[str, ...], Tuple[Tuple[str, ...], ...], Tuple[str, ...]]


def grids(pub: "Published", platform: Optional[str] = None, kind: Optional[str] = None) -> List[Grid]:
    """The published grids of a platform (every platform without one), of one kind if given:
    (title, headings, rows of printed cells, notes)."""
    return [
        (
            g.title,
            tuple(g.columns),
            tuple(tuple(as_printed(c) for c in row) for row in g.rows),
            ("Published in %s." % pub.source,) + tuple(g.notes),
        )
        for g in pub.grids
        if (not platform or g.platform == platform) and (not kind or g.kind == kind)
    ]


def as_printed(value: Any) -> str:
    """A published figure as its source printed it: 38, 26.27, 296.1, "8.5 hrs"."""
    if isinstance(value, bool):
        return str(value)
    return repr(value) if isinstance(value, float) else str(value)


def tables(pub: "Published", platform: Optional[str] = None) -> List[Table]:
    """The published throughput tables of a platform (all of them without one)."""
    out: List[Table] = []
    for t in pub.tables:
        if platform and t.platform != platform:
            continue
        keys = []
        for row in list(t.rows.values()) + list(t.features.values()):
            keys += [k for k in row if k not in keys]
        columns = [Column(k, pub.frameworks[k].title) for k in keys]
        entries = {}
        for model, row in t.rows.items():
            for key, fig in row.items():
                entries[(model, key)] = Entry(
                    throughput=fig.throughput, iteration_ms=fig.iteration_ms, data_ms=fig.data_ms, na=fig.na
                )
        notes = [
            "Published in %s; %s." % (pub.source, batch_note(t.gpus, t.nodes, t.batch_per_gpu)),
            "Pins: %s." % "; ".join("%s = %s" % (c.title, pub.frameworks[c.key].pins) for c in columns),
        ]
        notes += t.notes
        common: Dict[str, Any] = dict(
            title=t.title,
            platform=t.platform,
            precision=t.precision,
            gpus=t.gpus,
            nodes=t.nodes,
            batch_per_gpu=t.batch_per_gpu,
            form=t.form,
            columns=columns,
            models=sorted(t.rows, key=_model_order),
            entries=entries,
            notes=notes,
            source="published",
        )
        if t.features:
            out.append(FeatureTable(features={k: dict(v) for k, v in t.features.items()}, **common))
        else:
            out.append(Table(**common))
    return out


def _model_order(model: str) -> Tuple[int, str]:
    order = list(catalog.MODELS)
    return (order.index(model) if model in order else len(order), model)
