"""The one error type users see: a clear line, exit code 2, no traceback."""


class UserError(Exception):
    """Bad input or an environment problem the user can fix."""

    exit_code = 2


def located(path, line, field, message):
    """Format `file:line: field: message` (line and field optional)."""
    where = str(path)
    if line:
        where += ":%d" % line
    if field:
        return "%s: %s: %s" % (where, field, message)
    return "%s: %s" % (where, message)
