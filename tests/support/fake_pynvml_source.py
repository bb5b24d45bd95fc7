"""Source of a stand-in for the pynvml module (a test double: no GPU is lent to these tests).

FAKE_PYNVML is the text of a small module with pynvml's function names. Tests either exec
it into a module object and put that in sys.modules (in-process), or write it out as
pynvml.py on PYTHONPATH (runner.py in a subprocess, also under Python 3.6). Its knobs are
module variables: NAMES (one per GPU), MEMORY_MB, REASONS (throttle bit mask), FAIL_INIT,
NVLINK_PAIRS ({(a, b): links}), LEVELS ({(a, b): topology level}), PROCESSES
({gpu index: [(pid, MiB in use), ...]}, what nvmlDeviceGetComputeRunningProcesses lists) and
COMPUTE_CAPABILITY ((major, minor) of every GPU; None: an NVML too old to have the call).
"""

FAKE_PYNVML = '''
NVML_CLOCK_SM = 1
NVML_TEMPERATURE_GPU = 0
NAMES = ["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"]
MEMORY_MB = 81559
REASONS = 0
FAIL_INIT = False
NVLINK_PAIRS = {}
LEVELS = {}
PROCESSES = {}
COMPUTE_CAPABILITY = (9, 0)


class NVMLError(Exception):
    pass


class _Obj(object):
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _bus(i):
    return b"00000000:%02X:00.0" % (0x18 + i)


def nvmlInit():
    if FAIL_INIT:
        raise NVMLError("Driver Not Loaded")


def nvmlShutdown():
    pass


def nvmlDeviceGetCount():
    return len(NAMES)


def nvmlDeviceGetHandleByIndex(i):
    if not 0 <= i < len(NAMES):
        raise NVMLError("Invalid Argument")
    return i


def nvmlDeviceGetName(h):
    return NAMES[h].encode()


def nvmlDeviceGetMemoryInfo(h):
    return _Obj(total=MEMORY_MB * 2 ** 20, used=(1000 + h) * 2 ** 20, free=0)


def nvmlDeviceGetCudaComputeCapability(h):
    if COMPUTE_CAPABILITY is None:
        raise NVMLError("Function Not Found")
    return COMPUTE_CAPABILITY


def nvmlDeviceGetPciInfo(h):
    return _Obj(busId=_bus(h))


def nvmlSystemGetDriverVersion():
    return b"550.54.15"


def nvmlSystemGetCudaDriverVersion():
    return 12040


def nvmlDeviceGetTopologyCommonAncestor(a, b):
    return LEVELS.get((min(a, b), max(a, b)), 50)


def _peers(h):
    out = []
    for (a, b), n in sorted(NVLINK_PAIRS.items()):
        if h in (a, b):
            out += [b if h == a else a] * n
    return out


def nvmlDeviceGetNvLinkState(h, link):
    if link >= 12:
        raise NVMLError("Invalid Argument")
    return 1 if link < len(_peers(h)) else 0


def nvmlDeviceGetNvLinkRemotePciInfo(h, link):
    return _Obj(busId=_bus(_peers(h)[link]).decode().lower()[4:])


def nvmlDeviceGetUtilizationRates(h):
    return _Obj(gpu=97, memory=40)


def nvmlDeviceGetClockInfo(h, kind):
    return 1410 if kind == NVML_CLOCK_SM else 0


def nvmlDeviceGetTemperature(h, sensor):
    return 71


def nvmlDeviceGetPowerUsage(h):
    return 312500


def nvmlDeviceGetCurrentClocksThrottleReasons(h):
    return REASONS


def nvmlDeviceGetComputeRunningProcesses(h):
    return [_Obj(pid=pid, usedGpuMemory=None if mb is None else mb * 2 ** 20)
            for pid, mb in PROCESSES.get(h, [])]
'''


def fake_module(**knobs):
    """A fresh module object running FAKE_PYNVML, with knobs set."""
    import types
    mod = types.ModuleType("pynvml")
    exec(FAKE_PYNVML, mod.__dict__)
    mod.__dict__.update(knobs)
    return mod


def write_fake(folder, **knobs):
    """Write pynvml.py (with knobs appended) into folder; returns the folder."""
    text = FAKE_PYNVML + "".join("\n%s = %r\n" % (k, v) for k, v in knobs.items())
    (folder / "pynvml.py").write_text(text)
    return folder

