"""What a test run left in the Slurm queue and the store, for the Slurm tests."""
from tests.support.cliproc import error_lines
from tests.support.storerows import rows, statuses
from harness.launch import slurm


def our_jobs(prefix):
    """[(job id, name, state)] of queued or running jobs whose trial id starts with prefix (a run id)."""
    return [j for j in slurm.jobs_named() if j[1].startswith("detbench-" + prefix)]


def run_id_of(results):
    found = rows(results, "SELECT id FROM runs")
    return found[0][0] if found else None


def stopped_on_a_lost_node(code, out, results, run_id):
    """Check that a run whose trial 2 lost its node stopped as it should (exit 2, one error line
    with the resume command, trial 2 failed with Slurm's reason, trial 3 pending, no job left);
    return trial 1's row, which a resume must leave unchanged."""
    assert code == 2, out
    errors = error_lines(out)
    assert len(errors) == 1 and "lost its node" in errors[0], out
    assert "detbench run --resume %s" % run_id in errors[0]
    assert statuses(results) == ["done", "failed", "pending"]
    (reason,), = rows(results, "SELECT reason FROM trials WHERE seq = 2")
    assert reason.startswith("slurm job lost a node (requeued by Slurm after its node failed"), reason
    assert our_jobs(run_id) == [], "the run left its job in squeue"
    return rows(results, "SELECT * FROM trials WHERE seq = 1")
