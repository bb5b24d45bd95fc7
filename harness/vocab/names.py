"""Framework names that changed, and how old stores, baselines and scenarios are read.

Until this version the bundled PyTorch trainer was called ``simpledet``, the name of the
original MXNet SimpleDet whose published figures sit beside it in reports. Stores and
baselines written under the old name are read under the new one; a scenario that still
says ``simpledet`` is told the new name instead of being run under the wrong one.
"""
RENAMED = {"simpledet": "detbench-trainer"}


def framework(name: str) -> str:
    """The current name of a framework that may carry an old one."""
    return RENAMED.get(name, name)


def cell_key(key: str) -> str:
    """A cell key (framework/model/precision/platform/gpus/nodes) with the framework renamed."""
    head, sep, rest = key.partition("/")
    return framework(head) + sep + rest if head in RENAMED else key


def hint(name: str) -> str:
    """A sentence for an unknown framework name that used to mean something, else ''."""
    if name in RENAMED:
        return ("; %r was the bundled trainer's old name: it is now %r (the original MXNet "
                "SimpleDet is 'simpledet-mxnet')" % (name, RENAMED[name]))
    return ""
