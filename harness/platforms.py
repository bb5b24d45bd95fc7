"""Platform specs (platforms/*.yaml) and the description of the host we run on."""
import platform as pyplatform
import socket
from pathlib import Path
from typing import Optional

from pydantic import Field, ValidationError

from harness import yamlfile
from harness.errors import UserError, located
from harness.strict import Strict

PLATFORM_DIR = Path(__file__).resolve().parent.parent / "platforms"
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

    @property
    def devices(self):
        """Accelerators per node (1 for a CPU-only machine: the CPU is the device)."""
        return self.gpus.count if self.gpus and self.gpus.count else 1


def known_names(directory=PLATFORM_DIR):
    return sorted([p.stem for p in Path(directory).glob("*.yaml")] + [LOCAL])


def load_file(path):
    data, positions = yamlfile.load(path)
    if not isinstance(data, dict):
        raise UserError(located(path, 1, None, "a platform file holds a mapping"))
    try:
        return Platform.model_validate(data)
    except ValidationError as exc:
        raise yamlfile.validation_error(path, positions, exc) from None


def load(name, directory=PLATFORM_DIR):
    if name == LOCAL:
        return detect_local()
    path = Path(directory) / ("%s.yaml" % name)
    if not path.is_file():
        raise UserError("unknown platform %r (known: %s)" % (name, ", ".join(known_names(directory))))
    return load_file(path)


def detect_local():
    """Describe this host as a Platform (psutil for CPU and memory, pynvml for GPUs)."""
    import psutil

    gpus = _detect_gpus()
    return Platform(
        name=LOCAL, description="this host (%s)" % socket.gethostname(),
        cpu=Cpu(model=_cpu_model(), sockets=_sockets(), cores=psutil.cpu_count(logical=False) or None,
                threads=psutil.cpu_count(logical=True) or None),
        memory_gb=round(psutil.virtual_memory().total / 2**30, 1),
        gpus=gpus, os="%s %s" % (pyplatform.system(), pyplatform.release()),
        software=Software(driver=gpus and _nvml_driver()))


def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return pyplatform.processor() or pyplatform.machine()


def _sockets():
    try:
        ids = {line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
               if line.startswith("physical id")}
        return max(1, len(ids))
    except OSError:
        return 1


def _nvml():
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml
    except Exception:  # pynvml missing, no driver, no GPU: all mean "no GPUs"
        return None


def _detect_gpus():
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        count = nvml.nvmlDeviceGetCount()
        if count == 0:
            return None
        handle = nvml.nvmlDeviceGetHandleByIndex(0)
        name = nvml.nvmlDeviceGetName(handle)
        mem = nvml.nvmlDeviceGetMemoryInfo(handle).total
        return Gpus(model=name.decode() if isinstance(name, bytes) else name, count=count,
                    memory_gb=round(mem / 2**30, 1))
    except Exception:
        return None


def _nvml_driver():
    nvml = _nvml()
    try:
        version = nvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else version
    except Exception:
        return None


def summary(p):
    """One line describing a platform."""
    gpu = "%dx %s" % (p.gpus.count, p.gpus.model) if p.gpus else "no GPU"
    cores = " (%s cores)" % p.cpu.cores if p.cpu.cores else ""
    return "%s: %dx %s%s, %g GB, %s" % (p.name, p.cpu.sockets, p.cpu.model, cores, p.memory_gb, gpu)

