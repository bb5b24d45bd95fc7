"""Published figures (reports/published/*.yaml) as report tables."""
from pathlib import Path
from typing import Dict, List, Literal, Optional

from pydantic import Field, ValidationError

from harness.spec import catalog, yamlfile
from harness.errors import UserError, located
from harness.report.model import Column, Entry, Table, batch_note
from harness.spec.strict import Strict

PUBLISHED_DIR = Path(__file__).resolve().parents[2] / "reports" / "published"


class Figure(Strict):
    throughput: Optional[float] = Field(default=None, gt=0)
    iteration_ms: Optional[float] = Field(default=None, gt=0)
    data_ms: Optional[float] = Field(default=None, ge=0)
    na: Optional[str] = None


class PublishedFramework(Strict):
    title: str
    pins: str = ""


class PublishedTable(Strict):
    title: str
    platform: str
    precision: str
    gpus: int = Field(ge=1)
    nodes: int = Field(default=1, ge=1)
    batch_per_gpu: int = Field(ge=1)
    form: Literal["throughput", "iteration"]
    rows: Dict[str, Dict[str, Figure]]


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
    for t in pub.tables:
        for model, row in t.rows.items():
            for fw in row:
                if fw not in pub.frameworks:
                    raise UserError(located(path, 0, "tables.%s.rows.%s" % (t.title, model),
                                            "framework %r is not listed under frameworks" % fw))
    return pub


def tables(pub, platform=None):
    out = []
    for t in pub.tables:
        if platform and t.platform != platform:
            continue
        keys = []
        for row in t.rows.values():
            keys += [k for k in row if k not in keys]
        columns = [Column(k, pub.frameworks[k].title) for k in keys]
        entries = {}
        for model, row in t.rows.items():
            for key, fig in row.items():
                entries[(model, key)] = Entry(throughput=fig.throughput, iteration_ms=fig.iteration_ms,
                                              data_ms=fig.data_ms, na=fig.na)
        notes = ["Published in %s; %s." % (pub.source, batch_note(t.gpus, t.nodes, t.batch_per_gpu)),
                 "Pins: %s." % "; ".join("%s = %s" % (c.title, pub.frameworks[c.key].pins) for c in columns)]
        out.append(Table(title=t.title, platform=t.platform, precision=t.precision, gpus=t.gpus,
                         nodes=t.nodes, batch_per_gpu=t.batch_per_gpu, form=t.form, columns=columns,
                         models=sorted(t.rows, key=_model_order), entries=entries, notes=notes,
                         source="published"))
    return out


def _model_order(model):
    order = list(catalog.MODELS)
    return (order.index(model) if model in order else len(order), model)
