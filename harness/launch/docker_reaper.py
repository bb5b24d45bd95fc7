"""Remove a docker run's containers once the run's process is gone, however it ended.

    python -m harness.launch.docker_reaper PID OWNER

Started by the docker launcher in its own session, so a SIGKILL of `detbench run` (which
no handler in the run can see) still ends with the run's containers removed within a
second or so. Exits quietly when the run ends normally and removed its containers itself.
"""
import os
import sys
import time

POLL_S = 0.5
ENGINE_WAIT_S = 900.0   # an engine that is down when the run dies: wait this long for it to return


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main(argv):
    pid, owner = int(argv[0]), argv[1]
    while alive(pid) and os.getppid() == pid:
        time.sleep(POLL_S)
    from harness.launch import engine
    from harness.launch.docker import OWNER, remove_containers
    deadline = time.monotonic() + ENGINE_WAIT_S
    while True:
        try:
            client = engine.connect(timeout=60)
            break
        except Exception:
            if time.monotonic() > deadline:
                return 1    # the next docker run's orphan sweep removes what is left
            time.sleep(2.0)
    for _ in range(3):   # a container the run was starting as it died can appear a moment later
        remove_containers(client, [OWNER + "=" + owner])
        time.sleep(1.0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
