"""The nightly's rolling baseline, one per runner fingerprint (.github/workflows/nightly.yml).

After a passing night on main, the workflow uploads that night's candidate baseline as an
artifact named after the job and the runner's host fingerprint; the next night on a runner
with the same fingerprint downloads the newest such artifact and judges against it, before
the committed file. A landed speed-up then becomes the bar the next night is held to.

    nightly_baseline.py fingerprint CANDIDATE        the host fingerprint a baseline file records
    nightly_baseline.py find NAME                    the id of the newest run on main holding an
                                                     unexpired artifact NAME (nothing if none)
    nightly_baseline.py pick CANDIDATE COMMITTED PREVIOUS
                                                     "<file> strict": the baseline of this same
                                                     machine (PREVIOUS first, else COMMITTED);
                                                     "<file> lenient": COMMITTED, of another
                                                     machine (its cells are not comparable);
                                                     "none": no baseline at all
    nightly_baseline.py failed CANDIDATE             exit 1 naming the cells with failed or
                                                     unfinished trials
    nightly_baseline.py keep COMPARE_TEXT            "true" when the comparison passed with no
                                                     regression, not even a possible one

Standard library only: it runs before and beside detbench. `find` reads GITHUB_API_URL,
GITHUB_REPOSITORY, GH_TOKEN and BASELINE_BRANCH (default main) and never fails the night:
an API it cannot reach means no previous baseline, with a warning.
"""
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request


def warn(text):
    print("::warning::%s" % text, file=sys.stderr)


def fingerprint_of(path):
    """The host fingerprint a baseline file records, or None (no file, not JSON, no fingerprint)."""
    try:
        with open(path, encoding="utf-8") as f:
            side = json.load(f)
    except (OSError, ValueError):
        return None
    host = side.get("host") if isinstance(side, dict) else None
    value = host.get("fingerprint") if isinstance(host, dict) else None
    return value if isinstance(value, str) and value else None


def find(name):
    api = os.environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
    repo = os.environ.get("GITHUB_REPOSITORY", "")
    branch = os.environ.get("BASELINE_BRANCH", "main")
    url = "%s/repos/%s/actions/artifacts?%s" % (api, repo, urllib.parse.urlencode({"name": name, "per_page": 100}))
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    if os.environ.get("GH_TOKEN"):
        headers["Authorization"] = "Bearer " + os.environ["GH_TOKEN"]
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
            listing = json.load(response)
    except (OSError, ValueError, urllib.error.URLError) as exc:
        warn("cannot list the artifacts named %s (%s): judging against the committed baseline" % (name, exc))
        return None
    found = [a for a in listing.get("artifacts") or [] if isinstance(a, dict) and a.get("name") == name
             and not a.get("expired") and (a.get("workflow_run") or {}).get("head_branch") == branch
             and (a.get("workflow_run") or {}).get("id")]
    if not found:
        return None
    newest = max(found, key=lambda a: a.get("created_at") or "")
    return str(newest["workflow_run"]["id"])


def pick(candidate, committed, previous):
    mine = fingerprint_of(candidate)
    if mine is None:
        return "none"
    if os.path.isfile(previous):
        theirs = fingerprint_of(previous)
        if theirs == mine:
            return "%s strict" % previous
        warn("%s records fingerprint %s, not this runner's %s: not used" % (previous, theirs, mine))
    if not os.path.isfile(committed):
        return "none"
    return "%s %s" % (committed, "strict" if fingerprint_of(committed) == mine else "lenient")


def failed(candidate):
    try:
        with open(candidate, encoding="utf-8") as f:
            cells = json.load(f)["cells"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print("::error::%s cannot be read: %s" % (candidate, exc))
        return 1
    bad = sorted(k for k, c in cells.items() if c.get("failed") or c.get("unfinished"))
    if bad:
        print("::error::trials failed or never finished in: " + ", ".join(bad))
        return 1
    return 0


def keep(compare_text):
    """The first line of `detbench compare`'s text is its headline: "PASS: 2 unchanged (...)"."""
    try:
        with open(compare_text, encoding="utf-8") as f:
            headline = f.readline()
    except OSError:
        return False
    verdicts = headline.split(" (", 1)[0]
    return verdicts.startswith("PASS:") and "regression" not in verdicts


def main(argv):
    if len(argv) == 2 and argv[0] == "fingerprint":
        print(fingerprint_of(argv[1]) or "unknown")
    elif len(argv) == 2 and argv[0] == "find":
        print(find(argv[1]) or "")
    elif len(argv) == 4 and argv[0] == "pick":
        print(pick(*argv[1:]))
    elif len(argv) == 2 and argv[0] == "failed":
        return failed(argv[1])
    elif len(argv) == 2 and argv[0] == "keep":
        print("true" if keep(argv[1]) else "false")
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
