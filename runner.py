#!/usr/bin/env python3
"""Run one benchmark trial and record exactly what it printed and when.

    python runner.py --trial-dir DIR [--timeout SECONDS] [--env-key NAME ...] [--sample-interval S] -- ARGV...

This file is the contract between detbench and whatever environment a trial runs in
(a pinned virtual environment, an old framework container, a Slurm node). It must stay
ONE file, standard library only, and run on Python 3.6 and newer.

It spawns ARGV (never through a shell) in DIR/work, a fresh writable folder of the trial's own
(frameworks that write next to themselves, or resolve relative paths, do so there), with stdout
and stderr merged into one pipe, and for every output line writes the raw bytes to DIR/log.txt
and, on the same line number of DIR/log.times, the monotonic and wall-clock seconds at which the
line arrived. It forwards SIGINT and SIGTERM to the trial's whole process group, kills the group at the
timeout, and finally writes DIR/trial.json atomically (write, fsync, rename, folder fsync).

trial.json also describes the machine ("host": CPU, memory, NUMA, kernel, GPUs and how
they are connected) and, unless --sample-interval is 0, a "telemetry" summary of the
samples a background thread writes to DIR/telemetry.jsonl: per-core CPU use, run queue,
memory and swap, the trial's process tree (its descendants and every process of its
session, so loader workers and launcher children count): CPU, resident memory summed
over the processes (RSS) and with shared pages counted once (PSS, where the kernel has
smaps_rollup; read less often than the rest when the tree is large, so that reading it
takes at most 1% of the time), all from /proc; and per-GPU use, clocks, temperature, power, throttle
reasons and the device memory the tree's processes hold (when pynvml imports and
nvmlInit works). Where the host shows NVIDIA GPUs (/proc/driver/nvidia/gpus, /dev/nvidiaN)
and NVML does not work, the summary says so in "gpu_telemetry_lost".
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

SCHEMA = 1
GRACE_S = 5.0
# what runner.py makes in the trial's folder; the harness reads these names from here
# (harness/plan/trialfiles.py)
WORKDIR = "work"     # the trial's working directory, inside its folder
LOG = "log.txt"                  # the trial's stdout and stderr, merged, as raw bytes
LOG_TIMES = "log.times"          # per line of LOG: the monotonic and wall-clock seconds it arrived
RECORD = "trial.json"            # the trial's record, written atomically at its end
TELEMETRY = "telemetry.jsonl"    # the telemetry samples, one JSON object a line
PIDFILE = "trial.pid"            # the trial's process (and process group) id
CHUNK = 1 << 16
# environment variables that decide how a trial performs; recorded in trial.json
RELEVANT_ENV = re.compile(
    r"^(OMP_|MKL_|OPENBLAS_|CUDA_|NCCL_|CUDNN_|TF_(CPP|ENABLE|XLA|GPU|FORCE)|MXNET_|PYTORCH_|TORCH_|NVIDIA_|"
    r"KMP_|GOMP_|SLURM_JOB_ID$|SLURM_NNODES$|SLURM_PROCID$|WORLD_SIZE$|LOCAL_WORLD_SIZE$)")
SECRET = re.compile(r"TOKEN|KEY|PASSWORD|SECRET|CREDENTIAL", re.IGNORECASE)


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="runner.py", description=__doc__.splitlines()[0])
    parser.add_argument("--trial-dir", required=True)
    parser.add_argument("--timeout", type=float, default=0.0, help="seconds; 0 = none")
    parser.add_argument("--env-key", action="append", default=[],
                        help="also record this environment variable in trial.json")
    parser.add_argument("--sample-interval", type=float, default=1.0, metavar="S",
                        help="seconds between telemetry samples (telemetry.jsonl); 0 = none")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        parser.error("no command given after --")
    return args


def recorded_env(environ, extra_keys):
    """The environment that matters for performance, secrets left out."""
    keep = {}
    for name, value in environ.items():
        if SECRET.search(name):
            continue
        if name in extra_keys or RELEVANT_ENV.match(name):
            keep[name] = value
    return keep


def write_json_atomic(path, obj):
    """Replace `path` whole with `obj` as JSON: a hidden temporary file beside it, unique to this
    process and call, written, fsynced and renamed over it, then the folder fsynced so the rename
    survives a crash. On any error (or interrupt) the temporary file goes and `path` keeps what
    it had. (harness/atomic.py does the same for the harness; this file cannot import it.)"""
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, ".%s.%d.%s.tmp" % (os.path.basename(path), os.getpid(), os.urandom(4).hex()))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        folder_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return   # a folder that cannot be opened (some file systems): the rename is the kernel's to flush
    try:
        os.fsync(folder_fd)
    except OSError:
        pass
    finally:
        os.close(folder_fd)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, IOError, ValueError):
        return None


def write_pid(trial_dir, pid):
    """trial.pid: the trial's process (and process group) id, so that whoever started this runner
    can end the trial's processes should the runner itself be killed. Best effort."""
    try:
        with open(os.path.join(trial_dir, PIDFILE), "w") as f:
            f.write("%d\n" % pid)
    except (OSError, IOError):
        pass


def die_with_parent():
    """Ask Linux to send us SIGTERM when the process that started us dies."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


# ---------------------------------------------------------------- host facts
# Everything below reads the machine the trial runs on: /proc and /sys (standard library)
# always, pynvml only when it imports. A trial environment without it still
# runs; its record just says what was missing.

TOPOLOGY = {0: "same-board", 10: "pcie-switch", 20: "pcie-switches", 30: "host-bridge",
            40: "numa-node", 50: "cross-socket"}   # nvmlDeviceGetTopologyCommonAncestor levels
THROTTLE_BITS = ((0x1, "gpu_idle"), (0x2, "applications_clocks"), (0x4, "sw_power_cap"),
                 (0x8, "hw_slowdown"), (0x10, "sync_boost"), (0x20, "sw_thermal"),
                 (0x40, "hw_thermal"), (0x80, "hw_power_brake"), (0x100, "display_clocks"))
NVLINK_MAX = 18


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except (OSError, IOError):
        return ""


def text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def optional_module(name):
    """(module, None) or (None, why not): pynvml is used when present, never needed.

    Imported by name through importlib so that the file's import statements stay standard
    library only (tests/launch/test_runner.py checks them)."""
    import importlib
    try:
        return importlib.import_module(name), None
    except Exception as exc:
        return None, "%s: %s" % (type(exc).__name__, exc)


def load_nvml():
    """(pynvml module after nvmlInit, None) or (None, why not)."""
    nvml, error = optional_module("pynvml")
    if nvml is None:
        return None, error
    try:
        nvml.nvmlInit()
        return nvml, None
    except Exception as exc:   # no driver, no GPU: both mean "no GPU figures"
        return None, "%s: %s" % (type(exc).__name__, exc)


NVIDIA_GPUS = "/proc/driver/nvidia/gpus"   # one folder per GPU the NVIDIA driver manages
DEVICES = "/dev"


def gpu_devices():
    """NVIDIA GPUs this process can see without pynvml: the driver's /proc entries, else the
    /dev/nvidiaN nodes (what a container with GPUs passed through gets)."""
    for folder, pattern in ((NVIDIA_GPUS, None), (DEVICES, re.compile(r"^nvidia[0-9]+$"))):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        found = [n for n in names if pattern is None or pattern.match(n)]
        if found:
            return len(found)
    return 0


# Instruction-set extensions that change how fast the same code runs (x86, then Arm). A CPU
# records the ones it has, as its "isa"; harness/plan/fingerprint.py hashes them.
CPU_FEATURES = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512dq", "avx512bw",
                "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16",
                "amx_int8", "asimd", "asimdhp", "asimddp", "sve", "sve2", "bf16", "i8mm", "sme")
# which /proc/cpuinfo field gives the CPU's identity, on x86 and on Arm
CPU_ID_FIELDS = (("vendor", ("vendor_id", "CPU implementer")), ("family", ("cpu family", "CPU architecture")),
                 ("model_number", ("model", "CPU part")), ("stepping", ("stepping", "CPU revision")))


def cpu_facts(cpuinfo):
    """Model, sockets, physical cores and hardware threads from /proc/cpuinfo text; where it lists
    processors also their identity (vendor, family, model number, stepping) and `isa`, the
    CPU_FEATURES every processor has."""
    model, sockets, cores, threads, ident, flags = None, set(), set(), 0, {}, None
    for block in cpuinfo.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        if "processor" not in fields:
            continue
        threads += 1
        model = model or fields.get("model name") or fields.get("Model") or fields.get("cpu")
        socket_id = fields.get("physical id", "0")
        sockets.add(socket_id)
        cores.add((socket_id, fields.get("core id", "t%d" % threads)))
        for name, keys in CPU_ID_FIELDS:
            found = [fields[k] for k in keys if k in fields]
            if found and name not in ident:
                ident[name] = found[0]
        listed = fields.get("flags", fields.get("Features"))
        if listed is not None:
            flags = set(listed.split()) if flags is None else flags & set(listed.split())
    if not threads:
        import platform
        return {"model": platform.processor() or platform.machine(), "sockets": 1,
                "cores": os.cpu_count(), "threads": os.cpu_count()}
    facts = {"model": model, "sockets": max(1, len(sockets)), "cores": len(cores), "threads": threads}
    facts.update(ident)
    if flags is not None:       # no flags line: the instruction set is unknown, not empty
        facts["isa"] = [f for f in CPU_FEATURES if f in flags]
    return facts


def meminfo():
    """/proc/meminfo as {field: kB}."""
    out = {}
    for line in read_text("/proc/meminfo").splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key] = int(parts[0])
    return out


def numa_nodes():
    try:
        return max(1, len([n for n in os.listdir("/sys/devices/system/node")
                           if n.startswith("node") and n[4:].isdigit()]))
    except OSError:
        return 1


def os_facts():
    distro = None
    for line in read_text("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            distro = line.split("=", 1)[1].strip().strip('"')
    uname = os.uname()
    return {"system": uname.sysname, "kernel": uname.release, "distro": distro, "machine": uname.machine}


def _bus(bus_id):
    """'00000000:3B:00.0' and '0000:3b:00.0' name the same device."""
    return ":".join(text(bus_id).lower().split(":")[-2:])


def gpu_facts(nvml):
    """GPUs, driver and CUDA versions, and how each pair of GPUs is connected."""
    facts = {"gpus": [], "driver": None, "cuda": None, "links": []}
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    buses = {}
    for i, h in enumerate(handles):
        gpu = {"index": i, "name": text(nvml.nvmlDeviceGetName(h)),
               "memory_mb": int(nvml.nvmlDeviceGetMemoryInfo(h).total // 2 ** 20), "compute_capability": None}
        try:
            gpu["compute_capability"] = "%d.%d" % tuple(nvml.nvmlDeviceGetCudaComputeCapability(h))
        except Exception:   # an NVML too old to say: the fingerprint records it as unknown
            pass
        try:
            gpu["bus_id"] = text(nvml.nvmlDeviceGetPciInfo(h).busId)
            buses[_bus(gpu["bus_id"])] = i
        except Exception:
            pass
        facts["gpus"].append(gpu)
    try:
        facts["driver"] = text(nvml.nvmlSystemGetDriverVersion())
    except Exception:
        pass
    try:
        v = int(nvml.nvmlSystemGetCudaDriverVersion())
        facts["cuda"] = "%d.%d" % (v // 1000, v % 1000 // 10)
    except Exception:
        pass
    nvlinks = [_nvlink_peers(nvml, h, buses) for h in handles]
    for a in range(len(handles)):
        for b in range(a + 1, len(handles)):
            try:
                level = nvml.nvmlDeviceGetTopologyCommonAncestor(handles[a], handles[b])
                path = TOPOLOGY.get(int(level), "level-%s" % level)
            except Exception:
                path = None
            facts["links"].append({"a": a, "b": b, "path": path, "nvlinks": nvlinks[a].get(b, 0)})
    return facts


def _nvlink_peers(nvml, handle, buses):
    """{peer GPU index: active NVLink links} for one GPU ({} without NVLink)."""
    peers = {}
    for link in range(NVLINK_MAX):
        try:
            if not nvml.nvmlDeviceGetNvLinkState(handle, link):
                continue
            peer = buses.get(_bus(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId))
        except Exception:   # no such link, or NVLink not supported at all
            continue
        if peer is not None:
            peers[peer] = peers.get(peer, 0) + 1
    return peers


def host_facts(nvml=None, nvml_error="not loaded"):
    """The machine this process runs on; stable facts and the moment's figures kept apart."""
    mem = meminfo()
    facts = {"cpu": cpu_facts(read_text("/proc/cpuinfo")), "numa_nodes": numa_nodes(),
             "memory_mb": mem.get("MemTotal", 0) // 1024, "os": os_facts(),
             "hostname": socket.gethostname(), "gpus": [], "gpu_driver": None, "cuda_driver": None,
             "gpu_links": [], "gpu_source": None}
    try:
        facts["cores_available"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        facts["cores_available"] = os.cpu_count()
    if nvml is None:
        facts["gpu_source"] = "none (%s)" % nvml_error
        return facts
    try:
        g = gpu_facts(nvml)
        facts.update(gpus=g["gpus"], gpu_driver=g["driver"], cuda_driver=g["cuda"], gpu_links=g["links"],
                     gpu_source="nvml")
    except Exception as exc:
        facts["gpu_source"] = "none (nvml: %s: %s)" % (type(exc).__name__, exc)
    return facts


# ---------------------------------------------------------------- telemetry

def proc_stat():
    """(per-core (busy, total) jiffies, runnable tasks now) from /proc/stat."""
    cores, running = [], None
    for line in read_text("/proc/stat").splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            v = [int(x) for x in line.split()[1:]]
            idle = v[3] + (v[4] if len(v) > 4 else 0)
            total = sum(v[:8])
            cores.append((total - idle, total))
        elif line.startswith("procs_running"):
            running = int(line.split()[1])
    return cores, running


def runnable_threads(pids, limit=4096):
    """Threads of these processes that are running or waiting for a CPU (state R) now."""
    count, looked = 0, 0
    for pid in pids:
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for tid in tids:
            looked += 1
            if looked > limit:
                return count
            stat = read_text("/proc/%d/task/%s/stat" % (pid, tid))
            if stat[stat.rfind(")") + 2:stat.rfind(")") + 3] == "R":
                count += 1
    return count


def swap_pages():
    pages = {}
    for line in read_text("/proc/vmstat").splitlines():
        key, _, value = line.partition(" ")
        if key in ("pswpin", "pswpout"):
            pages[key] = int(value)
    return pages


PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def pid_stat(pid):
    """(ppid, session, start ticks, CPU seconds, RSS bytes) of a process from /proc/PID/stat,
    or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
    except (OSError, IOError):
        return None
    fields = stat[stat.rfind(b")") + 2:].split()   # field 3 (state) onwards; the name may hold anything
    try:
        return (int(fields[1]), int(fields[3]), int(fields[19]),
                (int(fields[11]) + int(fields[12])) / float(CLOCK_TICKS), int(fields[21]) * PAGE_BYTES)
    except (IndexError, ValueError):
        return None


def tree_pids(procs, root):
    """The pids of root's process tree among procs {pid: (ppid, session, ...)}: root, its
    descendants, and every process of its session (the trial starts a new session, so a
    worker whose parent died and that init adopted still counts); empty when root is gone."""
    if root not in procs:
        return set()
    children = {}
    for pid, st in procs.items():
        children.setdefault(st[0], []).append(pid)
    tree, todo = set(), [root] + [pid for pid, st in procs.items() if st[1] == root]
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo += children.get(pid, ())
    return tree


def process_tree(root):
    """{pid: (start ticks, CPU seconds, RSS bytes)} of the trial's processes (tree_pids)."""
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = pid_stat(int(name))
            if st is not None:
                procs[int(name)] = st
    return dict((pid, procs[pid][2:]) for pid in tree_pids(procs, root))


def pss_kb(pid):
    """Proportional set size of a process in KiB (shared pages split among their users)."""
    for line in read_text("/proc/%d/smaps_rollup" % pid).splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return None


class Stat(object):
    """Running mean, minimum and maximum of one figure."""

    def __init__(self):
        self.n, self.total, self.min, self.max = 0, 0.0, None, None

    def add(self, x):
        if x is None:
            return
        self.n += 1
        self.total += x
        self.min = x if self.min is None else min(self.min, x)
        self.max = x if self.max is None else max(self.max, x)

    def mean(self):
        return round(self.total / self.n, 3) if self.n else None


def thread_cpu_s():
    try:
        return time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)
    except (AttributeError, OSError):
        return 0.0


class Sampler(object):
    """Samples the machine and the trial's process tree every `interval` seconds in a thread.

    Each sample is one JSON line in telemetry.jsonl; summary() gives means and maxima per
    figure and the GPU throttle reasons seen. Figures a sample cannot get are left out.
    """

    SATURATED = 90.0    # mean per-core utilization (%) that counts as a saturated CPU
    # PSS reads walk every page of every process in the tree, under the process's memory-map
    # lock: about 55 ms for a 3 GB trainer, which would stall its allocations and take that
    # much CPU from it every second. They are spaced so that they take at most this share of
    # the wall time (RSS, which costs nothing to read, is still sampled every interval).
    PSS_BUDGET = 0.01

    def __init__(self, path, interval, nvml, cores, nvml_error=None, devices=0):
        self.path, self.interval, self.nvml, self.cores = path, interval, nvml, cores
        # why NVML is not there (None: it is), and how many GPUs the host shows without it
        self.nvml_error, self.devices = nvml_error, devices
        self.stop_event = threading.Event()
        self.thread = None
        self.pid = None
        self.stats = {}
        self.saturated = 0
        self.gpus = {}
        self.samples = 0
        self.cost_s = 0.0
        self.pss = os.path.exists("/proc/self/smaps_rollup")
        self.pss_due = 0.0          # monotonic time of the next PSS read
        self.pss_samples = 0
        self.tree_pids = set()
        self.proc_cache = {}
        self.ended_cpu = 0.0
        self.prev = None

    def start(self, pid):
        self.pid = pid
        self.prev = self._baseline()
        self.thread = threading.Thread(target=self._loop, name="telemetry")
        self.thread.daemon = True
        self.thread.start()

    def stop(self):
        if self.thread is not None:
            self.stop_event.set()
            self.thread.join(10)

    def _loop(self):
        with open(self.path, "w") as out:
            due = time.monotonic()
            while True:
                due += self.interval
                if self.stop_event.wait(max(0.0, due - time.monotonic())):
                    return
                cpu0 = thread_cpu_s()
                try:
                    sample = self.sample()
                except Exception as exc:   # a sampler must never take the trial down
                    sample = {"t": time.monotonic(), "error": "%s: %s" % (type(exc).__name__, exc)}
                out.write(json.dumps(sample, sort_keys=True) + "\n")
                out.flush()
                self.cost_s += thread_cpu_s() - cpu0
                due = max(due, time.monotonic() - self.interval)   # never queue up missed samples

    def _baseline(self):
        cores, _ = proc_stat()
        return {"mono": time.monotonic(), "cores": cores, "swap": swap_pages(), "tree_cpu": 0.0}

    def _add(self, name, value):
        self.stats.setdefault(name, Stat()).add(value)

    def sample(self):
        now = time.monotonic()
        s = {"t": round(now, 3)}
        cores, running = proc_stat()
        prev = self.prev
        if cores and len(cores) == len(prev["cores"]):
            util = []
            for (busy, total), (busy0, total0) in zip(cores, prev["cores"]):
                util.append(round(100.0 * (busy - busy0) / (total - total0), 1) if total > total0 else 0.0)
            s["cpu_util"] = util
            mean = sum(util) / len(util)
            self._add("cpu_util_mean", mean)
            self.saturated += mean >= self.SATURATED
        if running is not None:
            s["procs_running"] = max(0, running - 1)   # less this sampler, which is running now
            self._add("procs_running", s["procs_running"])
        s["load1"] = os.getloadavg()[0]
        self._add("load1", s["load1"])
        mem = meminfo()
        if "MemAvailable" in mem:
            s["mem_available_mb"] = mem["MemAvailable"] // 1024
            s["swap_used_mb"] = (mem.get("SwapTotal", 0) - mem.get("SwapFree", 0)) // 1024
            self._add("mem_available_mb", s["mem_available_mb"])
            self._add("swap_used_mb", s["swap_used_mb"])
        swap = swap_pages()
        if swap and prev["swap"]:
            page_mb = os.sysconf("SC_PAGE_SIZE") / 2.0 ** 20
            for key, name in (("pswpin", "swap_in_mb"), ("pswpout", "swap_out_mb")):
                s[name] = round((swap.get(key, 0) - prev["swap"].get(key, 0)) * page_mb, 3)
                self._add(name, s[name])
        tree_cpu = self._tree(s)
        if tree_cpu is not None and now > prev["mono"]:
            s["tree_cpu_percent"] = round(100.0 * (tree_cpu - prev["tree_cpu"]) / (now - prev["mono"]), 1)
            self._add("tree_cpu_percent", s["tree_cpu_percent"])
        if self.nvml is not None:
            s["gpus"] = [self._gpu(i) for i in range(self.nvml.nvmlDeviceGetCount())]
            self._device_memory(s)
        self.prev = {"mono": now, "cores": cores, "swap": swap,
                     "tree_cpu": tree_cpu if tree_cpu is not None else prev["tree_cpu"]}
        self.samples += 1
        return s

    def _tree(self, s):
        """CPU seconds used so far by the trial's live process tree; fills RSS, PSS and count."""
        procs = process_tree(self.pid)
        if not procs:
            self.tree_pids = set()
            return None
        seen = dict(((pid, p[0]), p[1]) for pid, p in procs.items())
        # CPU time of processes that ended since the last sample still counts
        gone = sum(v for k, v in self.proc_cache.items() if k not in seen)
        self.ended_cpu += gone
        self.proc_cache = seen
        self.tree_pids = set(procs)
        used = self.ended_cpu + sum(seen.values())
        s["tree_rss_mb"] = round(sum(p[2] for p in procs.values()) / 2.0 ** 20, 1)
        s["tree_procs"] = len(procs)
        s["tree_runnable"] = runnable_threads(sorted(procs))
        if self.pss and time.monotonic() >= self.pss_due:
            t0, cpu0 = time.monotonic(), thread_cpu_s()
            pss = [pss_kb(pid) for pid in procs]
            cost = max(time.monotonic() - t0, thread_cpu_s() - cpu0)
            self.pss_due = t0 + cost / self.PSS_BUDGET
            if any(v is not None for v in pss):   # a process that ended meanwhile holds nothing
                s["tree_pss_mb"] = round(sum(v for v in pss if v is not None) / 1024.0, 1)
                self._add("tree_pss_mb", s["tree_pss_mb"])
                self.pss_samples += 1
        self._add("tree_runnable", s["tree_runnable"])
        self._add("tree_rss_mb", s["tree_rss_mb"])
        self._add("tree_procs", s["tree_procs"])
        return used

    def _device_memory(self, s):
        """Device memory (MiB) the tree's processes hold on all GPUs now, from NVML's
        per-process list; nothing when no GPU answers the query."""
        nvml, total, answered = self.nvml, 0.0, False
        for i, g in enumerate(s.get("gpus") or []):
            try:
                listed = nvml.nvmlDeviceGetComputeRunningProcesses(nvml.nvmlDeviceGetHandleByIndex(i))
            except Exception:   # not supported on this board or driver
                continue
            answered = True
            used = sum((p.usedGpuMemory or 0) for p in listed
                       if p.pid in self.tree_pids and isinstance(p.usedGpuMemory, int))
            g["tree_mem_mb"] = round(used / 2.0 ** 20, 1)
            total += g["tree_mem_mb"]
        if answered:
            s["tree_device_mb"] = round(total, 1)
            self._add("tree_device_mb", s["tree_device_mb"])

    def _gpu(self, i):
        nvml = self.nvml
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        g = {"index": i}
        calls = (("util", lambda: nvml.nvmlDeviceGetUtilizationRates(h).gpu),
                 ("mem_used_mb", lambda: nvml.nvmlDeviceGetMemoryInfo(h).used // 2 ** 20),
                 ("sm_mhz", lambda: nvml.nvmlDeviceGetClockInfo(h, getattr(nvml, "NVML_CLOCK_SM", 1))),
                 ("temp_c", lambda: nvml.nvmlDeviceGetTemperature(h, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))),
                 ("power_w", lambda: round(nvml.nvmlDeviceGetPowerUsage(h) / 1000.0, 1)),
                 ("throttle", lambda: self._reasons(h)))
        acc = self.gpus.setdefault(i, {"stats": {}, "throttle": {}})
        for name, call in calls:
            try:
                g[name] = call()
            except Exception:   # not supported on this board
                continue
            if name == "throttle":
                for reason in decode_throttle(g[name]):
                    acc["throttle"][reason] = acc["throttle"].get(reason, 0) + 1
            else:
                acc["stats"].setdefault(name, Stat()).add(g[name])
        acc["samples"] = acc.get("samples", 0) + 1
        return g

    def _reasons(self, h):
        nvml = self.nvml
        fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        return int(fn(h))

    def summary(self):
        out = {"interval_s": self.interval, "samples": self.samples, "cores": self.cores,
               "sources": {"proc": bool(read_text("/proc/stat")),
                           "tree": "proc" + (" with smaps_rollup" if self.pss else ""),
                           "nvml": "ok" if self.nvml is not None else None, "gpu_devices": self.devices},
               # GPUs here whose figures this environment cannot read (no pynvml, or nvmlInit failed)
               "gpu_telemetry_lost": None if self.nvml is not None or not self.devices else
               "%d GPU(s) here, no NVML: %s" % (self.devices, self.nvml_error or "not loaded"),
               "memory_total_mb": meminfo().get("MemTotal", 0) // 1024,
               "sampler_cpu_s": round(self.cost_s, 4),
               "pss_samples": self.pss_samples,
               "sampler_ms_per_sample": round(1000.0 * self.cost_s / self.samples, 3) if self.samples else None,
               "cpu_saturated_share": round(float(self.saturated) / self.samples, 3) if self.samples else None}
        for name, st in sorted(self.stats.items()):
            out[name] = {"mean": st.mean(), "min": st.min, "max": st.max}
        gpus = []
        for i, acc in sorted(self.gpus.items()):
            g = {"index": i, "samples": acc.get("samples", 0), "throttle": acc["throttle"]}
            for name, st in sorted(acc["stats"].items()):
                g[name] = {"mean": st.mean(), "min": st.min, "max": st.max}
            gpus.append(g)
        out["gpus"] = gpus
        return out


def decode_throttle(mask):
    return [name for bit, name in THROTTLE_BITS if mask & bit]


class Trial(object):
    def __init__(self, args):
        self.args = args
        self.dir = args.trial_dir
        self.proc = None
        self.stop_reason = None   # "timeout" | "interrupted"
        self.stop_signal = None
        self.kill_at = None
        self.sampler = None

    # signal handling -------------------------------------------------------
    def on_signal(self, signum, _frame):
        if self.stop_reason is None:
            self.stop_reason = "interrupted"
            self.stop_signal = signum
        self.signal_group(signum)
        if self.kill_at is None:
            self.kill_at = time.monotonic() + GRACE_S

    def signal_group(self, signum):
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signum)
        except OSError:
            pass

    # main loop ---------------------------------------------------------------
    def run(self):
        workdir = os.path.abspath(os.path.join(self.dir, WORKDIR))
        os.makedirs(workdir, exist_ok=True)
        env_keys = set(self.args.env_key)
        record = {
            "schema": SCHEMA,
            "argv": self.args.command,
            "cwd": workdir,
            "env": recorded_env(os.environ, env_keys),
            "hostname": socket.gethostname(),
            "runner_python": sys.version.split()[0],
        }
        nvml, nvml_error = load_nvml()
        record["host"] = host_facts(nvml, nvml_error)
        if self.args.sample_interval > 0:
            self.sampler = Sampler(os.path.join(self.dir, TELEMETRY), self.args.sample_interval,
                                   nvml, record["host"]["cores_available"], nvml_error=nvml_error,
                                   devices=gpu_devices())
        log = open(os.path.join(self.dir, LOG), "wb")
        times = open(os.path.join(self.dir, LOG_TIMES), "w")
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self.on_signal)
        record["start_wall"] = time.time()
        record["start_mono"] = time.monotonic()
        try:
            self.proc = subprocess.Popen(
                self.args.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, cwd=workdir,
                stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
        except OSError as exc:
            record.update(exit_code=None, signal=None, error="cannot start: %s" % exc)
            return self.finish(record, log, times, 0)
        write_pid(self.dir, self.proc.pid)
        if self.sampler is not None:
            self.sampler.start(self.proc.pid)
        deadline = None
        if self.args.timeout > 0:
            deadline = record["start_mono"] + self.args.timeout
        try:
            lines = self.pump(log, times, deadline)
        except (OSError, IOError) as exc:   # e.g. the results disk is full: end the trial, say why
            record["error"] = "cannot write the trial's log: %s" % exc
            self.signal_group(signal.SIGKILL)
            lines = None
        if self.sampler is not None:
            self.sampler.stop()
            record["telemetry"] = self.sampler.summary()
        record.update(self.exit_status())
        return self.finish(record, log, times, lines)

    def pump(self, log, times, deadline):
        """Copy the child's output line by line with arrival times; returns line count."""
        import select
        fd = self.proc.stdout.fileno()
        pending = b""
        count = 0
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP)
        while True:
            now = time.monotonic()
            if deadline is not None and now >= deadline and self.stop_reason is None:
                self.stop_reason = "timeout"
                self.signal_group(signal.SIGTERM)
                self.kill_at = now + GRACE_S
            if self.kill_at is not None and now >= self.kill_at:
                self.signal_group(signal.SIGKILL)
            wait_ms = 1000
            for limit in (deadline, self.kill_at):
                if limit is not None:
                    wait_ms = max(0, min(wait_ms, int((limit - now) * 1000) + 1))
            try:
                ready = poller.poll(wait_ms)
            except InterruptedError:  # pragma: no cover - Python < 3.5 only
                continue
            if not ready:
                continue
            chunk = os.read(fd, CHUNK)
            if not chunk:
                break
            mono = time.monotonic()
            stamp = "%.6f\t%.6f\n" % (mono, time.time())
            # whole lines go out as one slice; no per-line objects (cheap at 100s of lines/read)
            data = pending + chunk if pending else chunk
            cut = data.rfind(b"\n") + 1
            pending = data[cut:]
            if cut:
                lines_now = data.count(b"\n", 0, cut)
                log.write(data[:cut])
                times.write(stamp * lines_now)
                count += lines_now
                log.flush()
                times.flush()
        if pending:
            log.write(pending + b"\n")
            times.write("%.6f\t%.6f\n" % (time.monotonic(), time.time()))
            count += 1
        return count

    def exit_status(self):
        while True:
            try:
                code = self.proc.wait(timeout=GRACE_S)
                break
            except subprocess.TimeoutExpired:
                self.signal_group(signal.SIGKILL)
        status = {"exit_code": code if code >= 0 else None,
                  "signal": -code if code < 0 else None}
        if self.stop_reason == "timeout":
            status["timed_out"] = True
        if self.stop_reason == "interrupted":
            status["interrupted_by"] = self.stop_signal
        # leftovers of the trial's process group (e.g. loader workers) go too
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        return status

    def finish(self, record, log, times, lines):
        record["end_wall"] = time.time()
        record["end_mono"] = time.monotonic()
        record["lines"] = lines
        for f in (log, times):
            try:
                f.close()
            except (OSError, IOError):
                pass   # the error that stopped the trial is in the record already
        path = os.path.join(self.dir, RECORD)
        earlier = read_json(path)
        if isinstance(earlier, dict):
            # the launcher gave its verdict while this runner was cut off from it (e.g. Slurm
            # requeued the job after losing the node): its error stands, and so do its fields
            for key, value in earlier.items():
                if key == "error" or key not in record:
                    record[key] = value
        try:
            write_json_atomic(path, record)
        except (OSError, IOError) as exc:
            sys.stderr.write("runner.py: cannot write trial.json: %s\n" % exc)
            return 3
        if record.get("exit_code") == 0 and not record.get("error"):
            return 0
        return 1


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    die_with_parent()
    return Trial(args).run()


if __name__ == "__main__":
    sys.exit(main())
