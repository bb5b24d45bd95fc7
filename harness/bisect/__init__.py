"""`detbench bisect`: the first revision (a commit, or an environment of an ordered list) at which a
scenario cell got slower, found by binary search with the regression gate's statistics.

`git.py` resolves and orders the revisions and checks each out in a worktree of its own;
`envaxis.py` gives each revision its Python environment (the running one where the pins are the
same, else one built and cached by its pins); `decide.py` judges each step and shares one alpha
over the search; `search.py` runs each commit's trials with that commit's own detbench, skips the
ones that cannot run, narrows the range, checks the culprit and prints the evidence;
`simulate.py` runs the same search on simulated figures.
"""
