"""The calibration workload: iterations of exactly known length, logged like the trainer.

    python -m harness.workloads.calibrate --iterations N --iteration-ms 50 --data-ms 5 --images 2

Each iteration ends on an absolute deadline (start + k x iteration time), so the mean
iteration time is exact however the operating system schedules the sleeps; the first
`data-ms` after the previous iteration ended stand for waiting on the data loader. It prints the same
`DETBENCH_ITER` lines as the bundled trainer, which lets detbench check its own accuracy
end to end. Standard library only.

With --inference it stands for an inference trial: batch k lasts iteration-ms, or tail-ms when
k is a multiple of tail-every (a known tail), ending on the absolute deadline start + the sum
of the batch times so far; its first data-ms stand for pre-processing and its last post-ms for
post-processing, and a DETBENCH_PHASES line follows each batch's DETBENCH_ITER line.
"""
import argparse
import os
import signal
import sys
import threading
import time

from harness import jsonlog

SPIN_S = 0.004  # sleep until this close to a deadline, then spin (sleeps overshoot by up to ~2 ms)


def wait_until(deadline):
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            return
        if left > SPIN_S:
            time.sleep(left - SPIN_S)


def burn(stop):
    """Keep one core busy until told to stop (used to oversubscribe the CPU)."""
    x = 0
    while not stop.is_set():
        x += 1


def spin_processes(n):
    """Fork n processes that each keep a core busy (real oversubscription, unlike GIL-bound threads)."""
    sys.stdout.flush()
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:   # child: spin until the parent is gone (or kills us)
            parent, x = os.getppid(), 0
            while True:
                x += 1
                if x % 1000000 == 0 and os.getppid() != parent:
                    os._exit(0)
        pids.append(pid)
    return pids


def stop_processes(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass


def parse_args(argv):
    p = argparse.ArgumentParser(prog="calibrate", description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, required=True)
    p.add_argument("--iteration-ms", type=float, required=True)
    p.add_argument("--data-ms", type=float, default=0.0)
    p.add_argument("--images", type=int, default=1, help="images per iteration")
    p.add_argument("--lines-per-iteration", type=int, default=0,
                   help="extra chatter lines printed each iteration")
    p.add_argument("--busy-threads", type=int, default=0,
                   help="threads that spin the whole time (CPU contention)")
    p.add_argument("--busy-processes", type=int, default=0,
                   help="processes that spin the whole time (oversubscribes the CPU)")
    p.add_argument("--fail-at", type=int, default=0, help="exit 1 at this iteration")
    p.add_argument("--hold-mb", type=int, default=0,
                   help="allocate and touch this many MiB before the first iteration, held to the end")
    p.add_argument("--inference", action="store_true", help="batches of an inference trial (see above)")
    p.add_argument("--post-ms", type=float, default=0.0, help="inference: post-processing of each batch")
    p.add_argument("--tail-every", type=int, default=0, help="inference: every N-th batch takes --tail-ms")
    p.add_argument("--tail-ms", type=float, default=0.0)
    args = p.parse_args(argv)
    if args.iterations < 1 or args.iteration_ms <= 0 or not 0 <= args.data_ms <= args.iteration_ms:
        p.error("need iterations >= 1, iteration-ms > 0 and 0 <= data-ms <= iteration-ms")
    if args.tail_every < 0 or (args.tail_every and args.tail_ms <= 0):
        p.error("need tail-every >= 0, and tail-ms > 0 with it")
    shortest = min(args.iteration_ms, args.tail_ms) if args.tail_every else args.iteration_ms
    if args.post_ms < 0 or args.data_ms + args.post_ms > shortest:
        p.error("need 0 <= post-ms and data-ms + post-ms <= the shortest batch")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    spinners = spin_processes(args.busy_processes)   # fork before any thread exists
    stop = threading.Event()
    for _ in range(args.busy_threads):
        threading.Thread(target=burn, args=(stop,), daemon=True).start()
    try:
        return run(args, stop)
    finally:
        stop.set()
        stop_processes(spinners)


def hold(mb):
    """A buffer of `mb` MiB with every page written, so it is resident, not just reserved."""
    buf = bytearray(mb << 20)
    for offset in range(0, len(buf), 4096):
        buf[offset] = 1
    return buf


def batch_ms(args, k):
    """The known latency of inference batch k (1-based)."""
    return args.tail_ms if args.tail_every and k % args.tail_every == 0 else args.iteration_ms


def run_inference(args, out, chatter):
    out.write(jsonlog.meta_line({"workload": "calibrate", "mode": "inference", "iteration_ms": args.iteration_ms,
                                 "tail_ms": args.tail_ms, "tail_every": args.tail_every,
                                 "pre_ms": args.data_ms, "post_ms": args.post_ms, "images": args.images}) + "\n")
    out.flush()
    start = prev_end = time.perf_counter()
    elapsed_ms = 0.0
    for k in range(1, args.iterations + 1):
        elapsed_ms += batch_ms(args, k)
        deadline = start + elapsed_ms / 1000.0
        fetched = time.perf_counter()
        wait_until(fetched + args.data_ms / 1000.0)
        pre_end = time.perf_counter()
        wait_until(deadline - args.post_ms / 1000.0)
        net_end = time.perf_counter()
        wait_until(deadline)
        end = time.perf_counter()
        if k == args.fail_at:
            sys.stderr.write("calibrate: failing at batch %d as asked\n" % k)
            return 1
        out.write(jsonlog.iter_line(k, end - prev_end, fetched - prev_end, args.images) + "\n")
        out.write(jsonlog.phases_line(k, pre_end - fetched, net_end - pre_end, end - net_end, args.images) + "\n")
        if chatter:
            out.write(chatter)
        out.flush()
        prev_end = end
    return 0


def run(args, stop):
    held = hold(args.hold_mb)   # noqa: F841 (kept alive to the end on purpose)
    if args.inference:
        chatter = "".join("calibrate: filler line %d of this batch\n" % i for i in range(args.lines_per_iteration))
        try:
            return run_inference(args, sys.stdout, chatter)
        finally:
            stop.set()
    period = args.iteration_ms / 1000.0
    data = args.data_ms / 1000.0
    out = sys.stdout
    out.write(jsonlog.meta_line({"workload": "calibrate", "iteration_ms": args.iteration_ms,
                                 "data_ms": args.data_ms, "images": args.images}) + "\n")
    out.flush()
    chatter = "".join("calibrate: filler line %d of this iteration\n" % i
                      for i in range(args.lines_per_iteration))
    start = prev_end = time.perf_counter()
    for k in range(1, args.iterations + 1):
        wait_until(prev_end + data)
        data_end = time.perf_counter()
        wait_until(start + k * period)
        end = time.perf_counter()
        if k == args.fail_at:
            sys.stderr.write("calibrate: failing at iteration %d as asked\n" % k)
            return 1
        out.write(jsonlog.iter_line(k, end - prev_end, data_end - prev_end, args.images,
                                    loss=1.0 / k) + "\n")
        if chatter:
            out.write(chatter)
        out.flush()
        prev_end = end
    stop.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())
