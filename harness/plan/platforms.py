"""Platform specs (platforms/*.yaml) and the description of the host we run on."""

import re
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from pydantic import Field, ValidationError

from harness.plan import yamlfile
from harness.errors import UserError, located
from harness.plan.strict import Strict

PLATFORM_DIR = Path(__file__).resolve().parents[2] / "platforms"
LOCAL = "local"


class Cpu(Strict):
    model: str
    sockets: int = Field(default=1, ge=1)
    cores: Optional[int] = Field(default=None, ge=1)
    threads: Optional[int] = Field(default=None, ge=1)


class Gpus(Strict):
    model: str
    count: int = Field(ge=0)
    memory_gb: Optional[float] = Field(default=None, gt=0)


class Software(Strict):
    driver: Optional[str] = None
    cuda: Optional[str] = None
    cudnn: Optional[str] = None
    nccl: Optional[str] = None
    python_env: Optional[str] = None


class SlurmDefaults(Strict):
    """Partition and account a platform's cluster uses unless a scenario's `slurm:` names others."""

    partition: Optional[str] = Field(default=None, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.,+-]*$")
    account: Optional[str] = Field(default=None, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.,+-]*$")


class Platform(Strict):
    name: str
    description: str = ""
    cpu: Cpu
    memory_gb: float = Field(gt=0)
    gpus: Optional[Gpus] = None
    topology: Optional[str] = None
    os: str = ""
    software: Software = Software()
    cost_usd: Optional[int] = None
    slurm: Optional[SlurmDefaults] = None

    @property
    def devices(self) -> int:
        """Accelerators per node (1 for a CPU-only machine: the CPU is the device)."""
        return self.gpus.count if self.gpus and self.gpus.count else 1


Facts = Dict[str, Any]  # a host record as runner.host_facts writes it
PathLike = Union[str, Path]


def known_names(directory: PathLike = PLATFORM_DIR) -> List[str]:
    """The platforms there are: the platforms/*.yaml files and `local`."""
    return sorted([p.stem for p in Path(directory).glob("*.yaml")] + [LOCAL])


def load_file(path: PathLike) -> Platform:
    """One platform file, checked."""
    data, positions = yamlfile.load(path)
    if not isinstance(data, dict):
        raise UserError(located(path, 1, None, "a platform file holds a mapping"))
    try:
        return Platform.model_validate(data)
    except ValidationError as exc:
        raise yamlfile.validation_error(path, positions, exc) from None


def load(name: str, directory: PathLike = PLATFORM_DIR) -> Platform:
    """The platform called `name`: this host for `local`, else its file."""
    if name == LOCAL:
        return detect_local()
    path = Path(directory) / ("%s.yaml" % name)
    if not path.is_file():
        raise UserError("unknown platform %r (known: %s)" % (name, ", ".join(known_names(directory))))
    return load_file(path)


def host_facts() -> Facts:
    """The facts runner.py records on every trial, taken here (one implementation for both)."""
    import runner

    nvml, error = runner.load_nvml()
    facts: Facts = runner.host_facts(nvml, error)
    return facts


def detect_local(facts: Optional[Facts] = None) -> Platform:
    """Describe this host (or the host of some recorded facts) as a Platform."""
    facts = host_facts() if facts is None else facts
    cpu = facts["cpu"]
    gpus = None
    if facts.get("gpus"):
        names = sorted({g["name"] for g in facts["gpus"]})
        gpus = Gpus(
            model=" + ".join(names),
            count=len(facts["gpus"]),
            memory_gb=round(min(g["memory_mb"] for g in facts["gpus"]) / 1024.0, 1),
        )
    os_name = facts["os"].get("distro") or facts["os"].get("system", "")
    return Platform(
        name=LOCAL,
        description="this host (%s)" % facts.get("hostname", "?"),
        cpu=Cpu(
            model=cpu["model"] or "unknown",
            sockets=cpu["sockets"],
            cores=cpu["cores"] or None,
            threads=cpu["threads"] or None,
        ),
        memory_gb=round(facts["memory_mb"] / 1024.0, 1) or 0.1,
        gpus=gpus,
        topology=topology_summary(facts.get("gpu_links") or []),
        os="%s, kernel %s" % (os_name, facts["os"].get("kernel")),
        software=Software(driver=facts.get("gpu_driver"), cuda=facts.get("cuda_driver")),
    )


def topology_summary(links: Sequence[Dict[str, Any]]) -> Optional[str]:
    """How the GPU pairs are connected, e.g. 'NVLink on 28 of 28 pairs; PCIe: 16 cross-socket, ...'."""
    if not links:
        return None
    nvlinked = sum(1 for l in links if l.get("nvlinks"))
    paths: Dict[str, int] = {}
    for l in links:
        paths[l.get("path") or "unknown"] = paths.get(l.get("path") or "unknown", 0) + 1
    text = "PCIe: " + ", ".join("%d %s" % (n, p) for p, n in sorted(paths.items()))
    return ("NVLink on %d of %d pairs; " % (nvlinked, len(links)) if nvlinked else "") + text


def _norm_cpu(model: str) -> str:
    text = re.sub(r"\((r|tm)\)", " ", model.lower())
    text = re.sub(r"@.*$", " ", text)
    text = re.sub(r"\b(cpu|processor)\b", " ", text)
    return " ".join(text.split())


def _norm_gpu(model: str) -> str:
    text = " ".join(model.lower().split())
    return text[len("nvidia ") :] if text.startswith("nvidia ") else text


def differences(host: Platform, spec: Platform) -> List[str]:
    """What keeps `host` from being platform `spec`: CPU model and sockets, GPU model and count."""
    out: List[str] = []
    h, s = _norm_cpu(host.cpu.model), _norm_cpu(spec.cpu.model)
    if not (h == s or h.startswith(s + " ")):
        out.append("cpu.model: host %r, %s %r" % (host.cpu.model, spec.name, spec.cpu.model))
    if host.cpu.sockets != spec.cpu.sockets:
        out.append("cpu.sockets: host %d, %s %d" % (host.cpu.sockets, spec.name, spec.cpu.sockets))
    hg = host.gpus if host.gpus and host.gpus.count else None
    sg = spec.gpus if spec.gpus and spec.gpus.count else None
    if (hg is None) != (sg is None):
        out.append("gpus: host %s, %s %s" % (_gpu_text(hg), spec.name, _gpu_text(sg)))
    elif hg is not None and sg is not None:
        if _norm_gpu(hg.model) != _norm_gpu(sg.model):
            out.append("gpus.model: host %r, %s %r" % (hg.model, spec.name, sg.model))
        if hg.count != sg.count:
            out.append("gpus.count: host %d, %s %d" % (hg.count, spec.name, sg.count))
    return out


def _gpu_text(g: Optional[Gpus]) -> str:
    return "%dx %s" % (g.count, g.model) if g else "none"


def compare_all(host: Platform, directory: PathLike = PLATFORM_DIR) -> Dict[str, List[str]]:
    """{platform file name: differences} for every platforms/*.yaml ([] means it matches)."""
    return {name: differences(host, load(name, directory)) for name in known_names(directory) if name != LOCAL}


def host_record(
    platform_names: Iterable[str],
    force: bool = False,
    facts: Optional[Facts] = None,
    directory: PathLike = PLATFORM_DIR,
) -> Dict[str, Any]:
    """The run's host_json: this host, its fingerprint and facts, the detbench code that ran it
    (harness.plan.coderev), and "forced" when it matched not.

    Refuses (UserError listing the differences) when a platform the run's cells name does
    not describe this host, unless force is set; a forced run records what differed.
    """
    from harness.plan import coderev
    from harness.plan.fingerprint import fingerprint

    facts = host_facts() if facts is None else facts
    host = detect_local(facts)
    mismatch: Dict[str, List[str]] = {}
    for name in sorted(set(platform_names) - {LOCAL}):
        diffs = differences(host, load(name, directory))
        if diffs:
            mismatch[name] = diffs
    if mismatch and not force:
        raise UserError(
            "this host is not platform %s: %s (use --force to run anyway; the run is marked forced)"
            % (", ".join(mismatch), "; ".join(d for ds in mismatch.values() for d in ds))
        )
    record = host.model_dump()
    record["fingerprint"] = fingerprint(facts)
    record["facts"] = facts
    record["code"] = coderev.revision()
    if mismatch:
        record["forced"] = mismatch
    return record


def forced_note(host: object) -> Optional[str]:
    """The report line for a forced run, or None (host: the run's host record, as host_record
    made it and the store's run record gives it back; None where the run has none)."""
    if not isinstance(host, dict) or not isinstance(host.get("forced"), dict) or not host["forced"]:
        return None
    return "Forced run on a host that is not %s: %s." % (
        ", ".join(sorted(host["forced"])),
        "; ".join(d for ds in host["forced"].values() for d in ds),
    )


def summary(p: Platform) -> str:
    """One line describing a platform."""
    gpu = "%dx %s" % (p.gpus.count, p.gpus.model) if p.gpus else "no GPU"
    cores = " (%s cores)" % p.cpu.cores if p.cpu.cores else ""
    return "%s: %dx %s%s, %g GB, %s" % (p.name, p.cpu.sockets, p.cpu.model, cores, p.memory_gb, gpu)
