"""Published figures (reports/published/*.yaml) as report tables.

Column keys are the file's own names under `frameworks`, titled there; they need not be
frameworks the harness runs (a paper may compare frameworks detbench has no adapter for).
"""
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Dict, List, Literal, Optional, Union

from pydantic import BeforeValidator, Field, StringConstraints, ValidationError

from harness.spec import catalog, yamlfile
from harness.errors import UserError, located
from harness.report.model import Column, Entry, Table, batch_note
from harness.spec.strict import Strict

SPEED = "speed"   # a published form with images/s alone, printed as given: cells like 54

PUBLISHED_DIR = Path(__file__).resolve().parents[2] / "reports" / "published"


class Figure(Strict):
    throughput: Optional[float] = Field(default=None, gt=0)
    iteration_ms: Optional[float] = Field(default=None, gt=0)
    data_ms: Optional[float] = Field(default=None, ge=0)
    na: Optional[str] = None


class PublishedFramework(Strict):
    title: str
    pins: str = ""


def _feature_value(value):
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
    notes: List[Note] = Field(default_factory=list)   # printed under the table, after the pins


@dataclass(frozen=True)
class FeatureTable(Table):
    """A published table that also lists features: feature name -> column key -> value."""
    features: Dict[str, Dict[str, Union[bool, str]]] = field(default_factory=dict)


class Published(Strict):
    name: str
    source: str
    frameworks: Dict[str, PublishedFramework]
    tables: List[PublishedTable] = Field(min_length=1)


def names(directory=PUBLISHED_DIR):
    return sorted(p.stem for p in Path(directory).glob("*.yaml"))


def load(name, directory=PUBLISHED_DIR):
    path = Path(directory) / ("%s.yaml" % name)
    if not path.is_file():
        raise UserError("no published figures named %r (known: %s)" % (name, ", ".join(names(directory))))
    data, positions = yamlfile.load(path)
    try:
        pub = Published.model_validate(data)
    except ValidationError as exc:
        raise yamlfile.validation_error(path, positions, exc) from None
    for i, t in enumerate(pub.tables):
        for model, row in t.rows.items():
            for fw in row:
                if fw not in pub.frameworks:
                    raise UserError(located(path, 0, "tables.%s.rows.%s" % (t.title, model),
                                            "framework %r is not listed under frameworks" % fw))
                if t.form == SPEED and row[fw].na is None and (
                        row[fw].throughput is None or row[fw].iteration_ms is not None or row[fw].data_ms is not None):
                    where = ("tables", i, "rows", model, fw)
                    raise UserError(located(path, yamlfile.line_of(positions, where), ".".join(map(str, where)),
                                            "a speed table's figure is a throughput alone (or na)"))
        for feature, values in t.features.items():
            for fw in values:
                if fw not in pub.frameworks:
                    where = ("tables", i, "features", feature, fw)
                    raise UserError(located(path, yamlfile.line_of(positions, where), ".".join(map(str, where)),
                                            "framework %r is not listed under frameworks" % fw))
    return pub


def tables(pub, platform=None):
    out = []
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
                entries[(model, key)] = Entry(throughput=fig.throughput, iteration_ms=fig.iteration_ms,
                                              data_ms=fig.data_ms, na=fig.na)
        notes = ["Published in %s; %s." % (pub.source, batch_note(t.gpus, t.nodes, t.batch_per_gpu)),
                 "Pins: %s." % "; ".join("%s = %s" % (c.title, pub.frameworks[c.key].pins) for c in columns)]
        notes += t.notes
        common = dict(title=t.title, platform=t.platform, precision=t.precision, gpus=t.gpus,
                      nodes=t.nodes, batch_per_gpu=t.batch_per_gpu, form=t.form, columns=columns,
                      models=sorted(t.rows, key=_model_order), entries=entries, notes=notes,
                      source="published")
        if t.features:
            out.append(FeatureTable(features={k: dict(v) for k, v in t.features.items()}, **common))
        else:
            out.append(Table(**common))
    return out


def _model_order(model):
    order = list(catalog.MODELS)
    return (order.index(model) if model in order else len(order), model)
