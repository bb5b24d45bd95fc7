"""What a test run left in the Slurm queue and the store, for the Slurm tests."""
from storerows import rows
from harness.launch import slurm


def our_jobs(prefix):
    """[(job id, name, state)] of queued or running jobs whose trial id starts with prefix (a run id)."""
    return [j for j in slurm.jobs_named() if j[1].startswith("detbench-" + prefix)]


def run_id_of(results):
    found = rows(results, "SELECT id FROM runs")
    return found[0][0] if found else None
