"""Imports between harness's stages run one way: the shared vocabularies and the drivers, the
framework records, plan, launch, measure, results, report, then run.py, cli.py and api.py on
top; the programs the harness launches (trainer/, workloads/) stand apart. Of those above launch,
only the ones that run trials (run.py, cli.py, bisect/) import it.

Read with `ast`, never imported, so a backward arrow inside a function counts as much as one at
the top of a module, and the tree under test can be a copy with an arrow added.
"""
import ast
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BASE = 0
RANKS = {
    # the first name under harness/ -> its rank; a module may import its own rank or lower
    "__init__": BASE, "atomic": BASE, "errors": BASE, "jsonlog": BASE,
    "vocab": 1, "drivers": 1,
    "frameworks": 2,
    "plan": 3,
    "launch": 4,
    "measure": 5,
    "results": 6,
    "report": 7,
    "run": 8, "cli": 8, "api": 8, "bisect": 8,
}
# programs the harness starts as processes and never imports: they may use base modules,
# drivers/ and themselves, and no stage module may import them
PROGRAMS = ("trainer", "workloads")
PROGRAM_MAY_IMPORT = {n for n, rank in RANKS.items() if rank == BASE} | {"drivers"}

BACKEND_MODULES = ("harness.launch.local", "harness.launch.docker", "harness.launch.slurm",
                   "harness.launch.sbatch", "harness.launch.docker_reaper")
# the names as scenarios and --backend spell them; "local" is also a platform's name, so only
# these two are looked for ("a Docker build argument", prose about the tool, is not one)
BACKEND_WORD = re.compile(r"\b(docker|slurm)\b")


def module_name(root, path):
    """harness/measure/scrapers/__init__.py -> harness.measure.scrapers"""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root):
    """(path, dotted name, tree) of every module under root/harness."""
    for path in sorted((root / "harness").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        yield path, module_name(root, path), tree


def is_module(root, dotted):
    base = root.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports(root, path, name, tree):
    """(line, imported harness module) for every import in the tree, in functions too.
    `from P import x` names P.x when that is a module, else P."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    for node in sorted(nodes, key=lambda n: n.lineno):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "harness" or alias.name.startswith("harness."):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                up = package.split(".")
                up = up[:len(up) - (node.level - 1)]
                source = ".".join(up + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source != "harness" and not source.startswith("harness."):
                continue
            for alias in node.names:
                sub = source + "." + alias.name
                yield node.lineno, sub if alias.name != "*" and is_module(root, sub) else source


def part(dotted):
    """The first name under harness: harness.measure.scrapers -> measure, harness -> __init__."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def backward_arrows(root):
    """One line per import against the one-way rule, as `harness/x/y.py:LINE imports harness.z (...)`."""
    root = Path(root)
    problems = []
    for path, name, tree in modules(root):
        where = path.relative_to(root).as_posix()
        own = part(name)
        if own not in RANKS and own not in PROGRAMS:
            problems.append("%s:1 is in no stage (rank it in tests/test_layers.py)" % where)
            continue
        for line, target in imports(root, path, name, tree):
            other = part(target)
            if own in PROGRAMS:
                if other != own and other not in PROGRAM_MAY_IMPORT:
                    problems.append("%s:%d imports %s (%s/ is launched, not imported: it may use only "
                                    "base modules, drivers/ and itself)" % (where, line, target, own))
            elif other in PROGRAMS:
                problems.append("%s:%d imports %s (%s/ is a program the harness launches, never imports)"
                                % (where, line, target, other))
            elif other not in RANKS:
                problems.append("%s:%d imports %s (in no stage)" % (where, line, target))
            elif RANKS[other] > RANKS[own]:
                problems.append("%s:%d imports %s (rank %d > %d)" % (where, line, target, RANKS[other],
                                                                     RANKS[own]))
    return problems


def harness_copy(tmp_path):
    """A copy of harness/ under tmp_path, to add an import to."""
    shutil.copytree(ROOT / "harness", tmp_path / "harness",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c"))


def test_imports_run_one_way_through_the_stages():
    problems = backward_arrows(ROOT)
    assert not problems, "backward imports:\n" + "\n".join(problems)


def test_the_checker_names_a_backward_import_added_to_a_copy(tmp_path):
    harness_copy(tmp_path)
    names = tmp_path / "harness" / "vocab" / "names.py"
    text = names.read_text(encoding="utf-8")
    lines = text.count("\n")
    names.write_text(text + "\n\ndef late():\n    from harness.report import markdown\n"
                     "    from harness import run\n    from ..measure import scrapers\n"
                     "    import harness.trainer.config\n", encoding="utf-8")
    found = [p for p in backward_arrows(tmp_path) if p.startswith("harness/vocab/names.py:")]
    assert found == [
        "harness/vocab/names.py:%d imports harness.report.markdown (rank 7 > 1)" % (lines + 4),
        "harness/vocab/names.py:%d imports harness.run (rank 8 > 1)" % (lines + 5),
        "harness/vocab/names.py:%d imports harness.measure.scrapers (rank 5 > 1)" % (lines + 6),
        "harness/vocab/names.py:%d imports harness.trainer.config (trainer/ is a program the harness "
        "launches, never imports)" % (lines + 7),
    ]


def test_the_checker_keeps_the_programs_apart(tmp_path):
    harness_copy(tmp_path)
    calibrate = tmp_path / "harness" / "workloads" / "calibrate.py"
    calibrate.write_text("from harness import jsonlog\nfrom harness.drivers import settings\n"
                         "from harness.measure import stats\n", encoding="utf-8")
    (tmp_path / "harness" / "extra.py").write_text("", encoding="utf-8")
    assert sorted(p for p in backward_arrows(tmp_path) if "workloads" in p or "extra" in p) == [
        "harness/extra.py:1 is in no stage (rank it in tests/test_layers.py)",
        "harness/workloads/calibrate.py:3 imports harness.measure.stats (workloads/ is launched, not "
        "imported: it may use only base modules, drivers/ and itself)",
    ]


# The stages after launch read what it left (the trial folder, the store) and never import it: what
# they share with it (the trial folder's names and reader, the cache location, host facts, the
# machine-load record) sits below it, in plan/. run.py, cli.py and bisect/ run trials (bisect runs a
# cell's trials at each revision, in envs it builds) and may.
AFTER_LAUNCH = ("measure", "results", "report", "api")


def launch_imports(root):
    """One line per import of harness.launch, or a module under it, in measure/, results/, report/
    or api.py."""
    root = Path(root)
    found = []
    for path, name, tree in modules(root):
        if part(name) not in AFTER_LAUNCH:
            continue
        for line, target in imports(root, path, name, tree):
            if part(target) == "launch":
                found.append("%s:%d imports %s" % (path.relative_to(root).as_posix(), line, target))
    return found


def test_the_stages_after_launch_never_import_it():
    found = launch_imports(ROOT)
    assert not found, "imports of the launch stage after it:\n" + "\n".join(found)


def test_the_launch_check_names_an_import_of_launch_after_it(tmp_path):
    harness_copy(tmp_path)
    added = {"measure/work.py": "def late():\n    from harness.launch.envs import env_dir\n",
             "report/markdown.py": "from harness import launch\n",
             "api.py": "import harness.launch.local\n",
             "bisect/decide.py": "from harness.launch import envs\n"}     # bisect runs trials: allowed
    lines = {}
    for where, text in added.items():
        module = tmp_path / "harness" / where
        before = module.read_text(encoding="utf-8")
        lines[where] = before.count("\n") + 1 + text.count("\n")       # the text's last line, its import
        module.write_text(before + "\n" + text, encoding="utf-8")
    assert sorted(launch_imports(tmp_path)) == [
        "harness/api.py:%d imports harness.launch.local" % lines["api.py"],
        "harness/measure/work.py:%d imports harness.launch.envs" % lines["measure/work.py"],
        "harness/report/markdown.py:%d imports harness.launch" % lines["report/markdown.py"],
    ]


def test_harness_keeps_at_most_seven_top_level_modules():
    # the package marker, the base modules every stage and program may use (atomic, errors,
    # jsonlog) and the entry points (run, cli, api); anything else belongs in a stage
    top = sorted(p.name for p in (ROOT / "harness").glob("*.py"))
    assert len(top) <= 7, top


def docstrings(tree):
    """The string constants that stand alone as statements: docstrings, and string comments."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)}


def backend_names_outside_launch(root):
    """One line per import of a backend module or string constant naming docker or slurm,
    in a module outside harness/launch."""
    root = Path(root)
    found = []
    for path, name, tree in modules(root):
        if part(name) == "launch":
            continue
        where = path.relative_to(root).as_posix()
        for line, target in imports(root, path, name, tree):
            if target in BACKEND_MODULES or target.startswith(tuple(m + "." for m in BACKEND_MODULES)):
                found.append((where, line, "imports %s" % target))
        skip = docstrings(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
                    and BACKEND_WORD.search(node.value)):
                found.append((where, node.lineno, "names a backend: %r" % node.value[:80]))
    return ["%s:%d %s" % item for item in sorted(found)]


def test_no_module_outside_launch_knows_a_backend_by_name():
    found = backend_names_outside_launch(ROOT)
    assert not found, "outside harness/launch:\n" + "\n".join(found)


def test_the_backend_check_sees_a_name_in_code_and_not_in_a_docstring(tmp_path):
    (tmp_path / "harness" / "run_copy").mkdir(parents=True)
    (tmp_path / "harness" / "launch").mkdir()
    for folder in ("harness", "harness/run_copy", "harness/launch"):
        (tmp_path / folder / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "harness" / "launch" / "slurm.py").write_text('KIND = "slurm"\n', encoding="utf-8")
    (tmp_path / "harness" / "run_copy" / "go.py").write_text(
        '"""Runs on docker or slurm."""\n'
        "from harness.launch import slurm\n"
        "def go(sc):\n"
        '    """Never on slurm."""\n'
        '    return sc.backend == "docker" or f"{sc}-slurm" or "dockerfile" or "local"\n',
        encoding="utf-8")
    assert backend_names_outside_launch(tmp_path) == [
        "harness/run_copy/go.py:2 imports harness.launch.slurm",
        "harness/run_copy/go.py:5 names a backend: '-slurm'",
        "harness/run_copy/go.py:5 names a backend: 'docker'",
    ]
