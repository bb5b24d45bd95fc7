"""Strict YAML loading that remembers where every value came from.

Documents go through PyYAML's safe composer (no tags that build Python objects), then
are turned into plain dicts and lists here, rejecting duplicate keys and non-string
keys, and keeping a map from each value's path to its line so that a later validation
error can name the line of the field it is about.
"""

from pathlib import Path
from typing import Any, Dict, Iterable, List, Tuple, Union

import yaml
from pydantic import ValidationError

from harness.errors import UserError, located

MAX_BYTES = 1 << 20  # scenario and platform files are small; refuse anything huge
MAX_DEPTH = 64  # nesting levels (PyYAML composes recursively: deeper would overflow the stack)
MAX_VALUES = 100_000  # values once aliases are expanded: a "billion laughs" stops here

Where = Tuple[Union[str, int], ...]  # a value's path of keys and indexes
Positions = Dict[Where, int]  # tuple path -> 1-based line


def load(path: Union[str, Path]) -> Tuple[Any, Positions]:
    """Return (data, positions) for a YAML file, or raise UserError naming file and line."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise UserError(located(path, 0, None, "cannot read: %s" % exc.strerror)) from None
    if size > MAX_BYTES:
        raise UserError(located(path, 0, None, "file is %d bytes; the limit is %d" % (size, MAX_BYTES)))
    try:
        with open(path, "rb") as f:  # stat says 0 for /dev/zero and pipes: never read past the limit
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise UserError(located(path, 0, None, "cannot read: %s" % exc.strerror)) from None
    if len(raw) > MAX_BYTES:
        raise UserError(located(path, 0, None, "file is more than %d bytes, the limit" % MAX_BYTES))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise UserError(located(path, line, None, "not UTF-8 text (byte 0x%02x)" % raw[exc.start])) from None
    return loads(text, path)


class _TooDeep(yaml.MarkedYAMLError):
    pass


class _Loader(yaml.SafeLoader):
    """The safe loader, refusing documents nested deeper than MAX_DEPTH."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise _TooDeep(
                    problem="nested more than %d levels deep" % MAX_DEPTH, problem_mark=self.peek_event().start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def loads(text: str, path: Union[str, Path] = "<string>") -> Tuple[Any, Positions]:
    """Return (data, positions) for YAML text, or raise UserError naming `path` and the line."""
    try:
        node = yaml.compose(text, Loader=_Loader)
    except _TooDeep as exc:
        raise UserError(located(path, exc.problem_mark.line + 1, None, exc.problem)) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        problem = exc.problem or str(exc)
        if "'\\t'" in problem or "tab" in problem.lower():
            problem = "tab characters cannot indent YAML; use spaces"
        raise UserError(located(path, line, None, "YAML syntax error: %s" % problem)) from None
    except yaml.reader.ReaderError as exc:  # a control character YAML does not allow
        line = text[: exc.position].count("\n") + 1
        raise UserError(located(path, line, None, "character %r is not allowed in YAML" % chr(exc.character))) from None
    except yaml.YAMLError as exc:
        raise UserError(located(path, 0, None, "YAML error: %s" % " ".join(str(exc).split()))) from None
    if node is None:
        raise UserError(located(path, 1, None, "the file is empty"))
    positions: Positions = {}
    data = _build(node, (), positions, path)
    return data, positions


def _scalar(node: Any, path: Union[str, Path]) -> Any:
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    except yaml.constructor.ConstructorError as exc:
        raise UserError(located(path, node.start_mark.line + 1, None, str(exc.problem))) from None
    finally:
        loader.dispose()


_SAFE_TAGS = {"tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "map", "seq")}


def _build(node: Any, where: Where, positions: Positions, path: Union[str, Path]) -> Any:
    positions[where] = node.start_mark.line + 1
    if len(positions) > MAX_VALUES:
        raise UserError(
            located(
                path,
                node.start_mark.line + 1,
                _dotted(where),
                "the document expands to more than %d values (YAML aliases?)" % MAX_VALUES,
            )
        )
    if node.tag not in _SAFE_TAGS:
        raise UserError(
            located(
                path,
                node.start_mark.line + 1,
                _dotted(where),
                "YAML tag %s is not allowed (plain data only)" % node.tag,
            )
        )
    if isinstance(node, yaml.MappingNode):
        out: Dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise UserError(
                    located(
                        path, key_node.start_mark.line + 1, _dotted(where), "YAML merge keys (<<) are not supported"
                    )
                )
            key = _scalar(key_node, path) if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, str):
                raise UserError(
                    located(path, key_node.start_mark.line + 1, _dotted(where), "keys must be strings, got %r" % (key,))
                )
            if key in out:
                raise UserError(
                    located(
                        path,
                        key_node.start_mark.line + 1,
                        _dotted(where + (key,)),
                        "duplicate key (first at line %d)" % positions[where + (key,)],
                    )
                )
            positions[where + (key,)] = key_node.start_mark.line + 1
            out[key] = _build(value_node, where + (key,), positions, path)
            positions[where + (key,)] = key_node.start_mark.line + 1  # the key's line, not the value's
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, where + (i,), positions, path) for i, item in enumerate(node.value)]
    return _scalar(node, path)


def _dotted(where: Where) -> Union[str, None]:
    return ".".join(str(p) for p in where) if where else None


def line_of(positions: Positions, where: Iterable[Union[str, int]]) -> int:
    """Line of the deepest known ancestor of `where` (a path of keys and indexes)."""
    path = tuple(where)
    while path and path not in positions:
        path = path[:-1]
    return positions.get(path, 0)


def validation_error(path: Union[str, Path], positions: Positions, exc: ValidationError) -> UserError:
    """A UserError for the first error of a pydantic ValidationError, at its field's line."""
    err = exc.errors()[0]
    where: List[Union[str, int]] = []
    loc = tuple(err["loc"])
    for i, part in enumerate(loc):
        # pydantic names union branches and validators inside loc; keep only real keys (a tagged
        # union's branch tag is written in <>, e.g. the scenario's repeats: <count> or <adaptive>)
        if isinstance(part, str) and part.startswith("<") and part.endswith(">"):
            continue
        if i == len(loc) - 1 or tuple(where) + (part,) in positions:
            where.append(part)
    message = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
    return UserError(located(path, line_of(positions, where), ".".join(map(str, where)) or None, message))
