"""Polling for a condition that real processes, jobs and containers reach in their own time."""
import time


def wait_for(predicate, timeout_s, what="the condition", poll_s=0.1):
    """Return predicate()'s first true value; AssertionError naming `what` after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = predicate()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %gs waiting for %s" % (timeout_s, what))
        time.sleep(poll_s)
