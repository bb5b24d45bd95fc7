"""Framework adapters, one module each, listed explicitly."""
from harness.errors import UserError
from harness.frameworks import calibrate, simpledet

FRAMEWORKS = {
    "calibrate": calibrate.FRAMEWORK,
    "simpledet": simpledet.FRAMEWORK,
}


def get(name):
    try:
        return FRAMEWORKS[name]
    except KeyError:
        raise UserError("unknown framework %r (known: %s)" % (name, ", ".join(sorted(FRAMEWORKS)))) from None
