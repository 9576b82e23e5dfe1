"""FHIRPath Patch (FHIR R4, http://hl7.org/fhir/R4/fhirpatch.html): a `Parameters`
resource whose `operation` parameters add, insert, delete, replace or move elements
found by a FHIRPath expression. Pure: the patched copy, or the `AppError` to answer.

A patch must change JSON in place, so a path must say *where* an element lives, not just
what it is: paths are chains of member steps (`Patient.name`, `Observation.value` for a
choice element), indexers (`[0]`, an integer) and the filters `where(criteria)`,
`first()`, `last()`, `tail()`, `skip(n)`, `take(n)`, `single()` and `ofType(Type)`.
Each step is walked here over locations (parent object, key, position); only the
`where` criteria are FHIRPath proper, evaluated by fhirpathpy on each candidate. Other
expressions (unions, `resolve()`, arithmetic) are refused with a 422 naming the path.

fhirpathpy accepts much that is not FHIRPath (`name = = 'x'`, trailing garbage) and
finds unknown functions only when it reaches them, so every path is first parsed
strictly with the ANTLR grammar that ships inside it (anchored at the end of input,
every error raised) and its function names checked: an invalid path is a 400 naming
it, never a path that silently matches nothing.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from app.errors import AppError, BadRequest, Issue, Unprocessable
from app.fhir.validation import Element, elements_of
from app.kit.fhirpath import FHIRPathParser, FhirPathSyntaxError, Parsed, evaluate, parse

__all__ = ["OPERATION_TYPES", "apply_fhirpath_patch", "is_fhirpath_patch"]

OPERATION_TYPES: Final = ("add", "insert", "delete", "replace", "move")
_MAX_PATH: Final = 2000
_MAX_OPERATIONS: Final = 1000
_ROOT: Final = "$"


def _error(kind: type[AppError], message: str, where: str) -> AppError:
    return kind(message, [Issue(message, expression=where)])


def is_fhirpath_patch(document: Any) -> bool:
    return isinstance(document, dict) and document.get("resourceType") == "Parameters"


# --- the path ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Step:
    kind: str  # "member", "index", "where", "first", "last", "tail", "skip", "take",
    # "single", "ofType", "this"
    name: str = ""  # the member, or the type of ofType
    number: int = 0  # the index, or the argument of skip/take
    criteria: str = ""  # where's expression, as written


@dataclass(frozen=True, slots=True)
class _Path:
    text: str
    steps: tuple[_Step, ...]


def _identifier(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == "`" else text


def _integer(expr: Any) -> int | None:
    text = expr.getText()
    if text.lstrip("-").isdigit():
        return int(text)
    return None


class _Unsupported(Exception):
    pass


def _is(node: Any, cls: Any) -> bool:
    # Not isinstance: that would narrow the parse tree's nodes to ANTLR's untyped classes.
    return isinstance(node, cls)


def _steps(expr: Any, source: Parsed) -> list[_Step]:
    if _is(expr, FHIRPathParser.TermExpressionContext):
        term = expr.term()
        if _is(term, FHIRPathParser.InvocationTermContext):
            return [_invocation(term.invocation(), source)]
        raise _Unsupported(f"'{expr.getText()}' is not an element")
    if _is(expr, FHIRPathParser.InvocationExpressionContext):
        return [*_steps(expr.expression(), source), _invocation(expr.invocation(), source)]
    if _is(expr, FHIRPathParser.IndexerExpressionContext):
        index = _integer(expr.expression(1))
        if index is None or index < 0:
            raise _Unsupported("an index must be a whole number, like [0]")
        return [*_steps(expr.expression(0), source), _Step("index", number=index)]
    raise _Unsupported(
        "only chains of elements, [n] and where(), first(), last(), tail(), skip(), "
        "take(), single(), ofType() can be patched"
    )


def _invocation(inv: Any, source: Parsed) -> _Step:
    if _is(inv, FHIRPathParser.MemberInvocationContext):
        return _Step("member", _identifier(inv.identifier().getText()))
    if _is(inv, FHIRPathParser.ThisInvocationContext):
        return _Step("this")
    if not _is(inv, FHIRPathParser.FunctionInvocationContext):
        raise _Unsupported(f"'{inv.getText()}' is not an element")
    function = inv.functn()
    name = function.identifier().getText()
    params = function.paramList()
    args = list(params.expression()) if params is not None else []
    if name in ("first", "last", "tail", "single") and not args:
        return _Step(name)
    if name in ("skip", "take") and len(args) == 1:
        number = _integer(args[0])
        if number is None or number < 0:
            raise _Unsupported(f"{name}() needs a whole number")
        return _Step(name, number=number)
    if name == "where" and len(args) == 1:
        arg = args[0]
        return _Step("where", criteria=source.text(arg))
    if name == "ofType" and len(args) == 1:
        return _Step("ofType", _identifier(args[0].getText()).rpartition(".")[2])
    raise _Unsupported(f"{name}() cannot be used in a patch path")


@lru_cache(maxsize=1024)
def _parse_path(text: str) -> _Path | str:
    """The path's steps, or what is wrong with it."""
    if not text.strip():
        return "the path is empty"
    if len(text) > _MAX_PATH:
        return f"the path is longer than {_MAX_PATH} characters"
    try:
        parsed = parse(text)
    except FhirPathSyntaxError as problem:
        return f"not valid FHIRPath ({problem})"
    except RecursionError:
        return "the path is nested too deeply"
    if parsed.problems:
        return f"not valid FHIRPath ({parsed.problems[0]})"
    try:
        return _Path(text, tuple(_steps(parsed.tree.expression(), parsed)))
    except _Unsupported as exc:
        return f"cannot be patched: {exc}"
    except RecursionError:
        return "the path is nested too deeply"


# --- locations --------------------------------------------------------------------------


@dataclass(slots=True)
class _Loc:
    """Where a value lives: `parent[key]`, or `parent[key][index]` in a list."""

    parent: dict[str, Any]
    key: str
    index: int | None
    element: Element | None  # None for the resource itself, or where the type is unknown
    path: str  # its FHIRPath type path, e.g. Patient.name (for where's criteria)

    @property
    def value(self) -> Any:
        value = self.parent[self.key]
        return value if self.index is None else value[self.index]

    @property
    def owner(self) -> Any:
        """What `elements_of` needs for this value's children."""
        value = self.value
        if isinstance(value, dict) and isinstance(value.get("resourceType"), str):
            return value["resourceType"]
        return None if self.element is None else self.element.owner


class _PathError(Exception):
    """A path that cannot be walked on this resource (422)."""


def _children(loc: _Loc) -> dict[str, Element] | None:
    return elements_of(loc.owner)


def _keys_for(node: dict[str, Any], name: str, elements: dict[str, Element] | None) -> list[str]:
    """The JSON keys holding FHIRPath element `name` in `node` (a choice element's one
    present member: `value` -> `valueQuantity`)."""
    if elements is not None:
        return [
            k
            for k, e in elements.items()
            if k in node and (k == name or (e.choice and e.name == name))
        ]
    if name in node:
        return [name]
    return [k for k in node if k.startswith(name) and k[len(name) : len(name) + 1].isupper()]


def _type_path(loc: _Loc, element: Element | None, key: str) -> str:
    if element is not None and element.owner is not None and not element.choice:
        return f"{loc.path}.{element.name}"
    if element is not None and element.fhir_type:
        return element.fhir_type
    return f"{loc.path}.{key}"


def _member(locs: list[_Loc], name: str) -> list[_Loc]:
    out: list[_Loc] = []
    for loc in locs:
        node = loc.value
        if not isinstance(node, dict):
            continue
        elements = _children(loc)
        for key in _keys_for(node, name, elements):
            element = None if elements is None else elements.get(key)
            path = _type_path(loc, element, key)
            value = node[key]
            if isinstance(value, list):
                out.extend(_Loc(node, key, i, element, path) for i in range(len(value)))
            elif value is not None:
                out.append(_Loc(node, key, None, element, path))
    return out


def _matches(loc: _Loc, criteria: str, resource: dict[str, Any]) -> bool:
    try:
        found = evaluate(
            loc.value,
            {"expression": criteria, "base": loc.path},
            {"resource": resource, "rootResource": resource},
        )
    except Exception as exc:  # fhirpathpy raises bare Exceptions (and worse) on bad input
        raise _PathError(f"where({criteria}) could not be evaluated: {exc}") from None
    if found in ([], [False]):
        return False
    if found == [True]:
        return True
    raise _PathError(f"where({criteria}) is not true or false (it gave {found!r:.80})")


def _of_type(loc: _Loc, type_name: str) -> bool:
    value = loc.value
    if isinstance(value, dict) and "resourceType" in value:
        return bool(value["resourceType"] == type_name)
    element = loc.element
    if element is not None and element.choice:
        suffix = loc.key[len(element.name) :]
        return suffix.lower() == type_name.lower()
    if element is not None:
        return element.fhir_type.lower() == type_name.lower()
    return False


def _walk(
    resource: dict[str, Any], path: _Path
) -> tuple[list[_Loc], list[_Loc] | None, _Step | None]:
    """The locations the path finds; and, when its last step names an element, the
    locations that step was taken from and the step (where an absent element would go)."""
    root = _Loc({_ROOT: resource}, _ROOT, None, None, str(resource.get("resourceType")))
    locs = [root]
    steps = list(path.steps)
    first = steps[0] if steps else None
    if first is not None and first.kind == "member" and first.name == resource["resourceType"]:
        steps = steps[1:]  # `Patient.name` on a Patient: the type names the root
    parents: list[_Loc] | None = None
    last: _Step | None = None
    for step in steps:
        parents, last = None, None
        if step.kind == "member":
            parents, last = locs, step
            locs = _member(locs, step.name)
        elif step.kind == "index":
            locs = locs[step.number : step.number + 1]
        elif step.kind == "first":
            locs = locs[:1]
        elif step.kind == "last":
            locs = locs[-1:]
        elif step.kind == "tail":
            locs = locs[1:]
        elif step.kind == "skip":
            locs = locs[step.number :]
        elif step.kind == "take":
            locs = locs[: step.number]
        elif step.kind == "single":
            if len(locs) > 1:
                raise _PathError(f"single() found {len(locs)} elements")
        elif step.kind == "where":
            locs = [loc for loc in locs if _matches(loc, step.criteria, resource)]
        elif step.kind == "ofType":
            locs = [loc for loc in locs if _of_type(loc, step.name)]
    return locs, parents, last


# --- values -----------------------------------------------------------------------------


def _value_of(part: dict[str, Any], element: Element | None, where: str) -> Any:
    """An operation's `value`: its value[x], or a complex value given as parts."""
    keys = [k for k in part if k.startswith("value") and k[5:6].isupper()]
    children = part.get("part")
    if len(keys) == 1 and children is None:
        return copy.deepcopy(part[keys[0]])
    if not keys and isinstance(children, list) and children:
        return _from_parts(children, None if element is None else element.owner, where)
    raise _error(
        BadRequest, f"{where}: a value needs exactly one value[x] or a list of parts", where
    )


def _from_parts(parts: list[Any], owner: Any, where: str) -> dict[str, Any]:
    elements = elements_of(owner)
    out: dict[str, Any] = {}
    for i, sub in enumerate(parts):
        at = f"{where}.part[{i}]"
        name = sub.get("name") if isinstance(sub, dict) else None
        if not isinstance(name, str) or not name:
            raise _error(BadRequest, f"{at} needs a name", at)
        element = _element_named(elements, name)
        key = element.key if element is not None and not element.choice else name
        value = _value_of(sub, element, at)
        if element is not None and element.choice:
            key = _choice_key(sub, element) or name
        repeats = element.is_list if element is not None else key in out
        if repeats:
            existing = out.setdefault(key, [])
            if not isinstance(existing, list):
                out[key] = existing = [existing]
            existing.append(value)
        elif key in out:
            raise _error(Unprocessable, f"{at}: '{name}' does not repeat but is given twice", at)
        else:
            out[key] = value
    return out


def _element_named(elements: dict[str, Element] | None, name: str) -> Element | None:
    if elements is None:
        return None
    direct = elements.get(name)
    if direct is not None:
        return direct
    return next((e for e in elements.values() if e.choice and e.name == name), None)


def _choice_key(part: dict[str, Any], element: Element) -> str | None:
    """The JSON key of a choice element from its value's type: `valueQuantity` for a
    `value` part with a valueQuantity."""
    for k in part:
        if k.startswith("value") and k[5:6].isupper():
            return element.name + k[5:]
    return None


# --- operations -------------------------------------------------------------------------


@dataclass(slots=True)
class _Operation:
    index: int
    type: str
    path: str
    name: str | None
    part: dict[str, Any] | None  # the "value" part
    position: int | None  # index
    source: int | None
    destination: int | None

    @property
    def where(self) -> str:
        return f"Parameters.parameter[{self.index}]"

    def fail(self, message: str, status: int = 422) -> AppError:
        text = f"operation {self.index} ({self.type} at '{self.path}'): {message}"
        issue = Issue(
            text, expression=self.where, code="processing" if status == 422 else "invalid"
        )
        return (Unprocessable if status == 422 else BadRequest)(text, [issue])


def _text(parts: dict[str, dict[str, Any]], where: str, name: str, kind: str) -> str | None:
    part = parts.get(name)
    if part is None:
        return None
    value = part.get(kind)
    if not isinstance(value, str):
        raise _error(BadRequest, f"{where}: part '{name}' needs a {kind}", where)
    return value


def _number(parts: dict[str, dict[str, Any]], where: str, name: str) -> int | None:
    part = parts.get(name)
    if part is None:
        return None
    value = part.get("valueInteger")
    if type(value) is not int:
        raise _error(BadRequest, f"{where}: part '{name}' needs a valueInteger", where)
    return value


def _operations(document: dict[str, Any]) -> list[_Operation]:
    params = document.get("parameter")
    if not isinstance(params, list) or not params:
        raise _error(
            BadRequest,
            "a FHIRPath Patch needs at least one 'operation' parameter",
            "Parameters.parameter",
        )
    if len(params) > _MAX_OPERATIONS:
        raise BadRequest(f"a FHIRPath Patch may hold at most {_MAX_OPERATIONS} operations")
    out: list[_Operation] = []
    for i, param in enumerate(params):
        where = f"Parameters.parameter[{i}]"
        if not isinstance(param, dict) or param.get("name") != "operation":
            raise _error(
                BadRequest,
                f"{where}: a FHIRPath Patch holds only parameters named 'operation'",
                where,
            )
        parts: dict[str, dict[str, Any]] = {}
        given = param.get("part")
        if not isinstance(given, list):
            raise _error(BadRequest, f"{where}: an operation needs a list of parts", where)
        for j, part in enumerate(given):
            name = part.get("name") if isinstance(part, dict) else None
            if not isinstance(name, str) or name in parts:
                raise _error(
                    BadRequest,
                    f"{where}.part[{j}]: each part needs a name, given once",
                    f"{where}.part[{j}]",
                )
            parts[name] = part

        kind = _text(parts, where, "type", "valueCode")
        if kind not in OPERATION_TYPES:
            raise _error(
                BadRequest,
                f"{where}: type must be one of {', '.join(OPERATION_TYPES)}, not {kind!r}",
                where,
            )
        path = _text(parts, where, "path", "valueString")
        if path is None:
            raise _error(BadRequest, f"{where}: a {kind} needs a path", where)
        op = _Operation(
            i,
            kind,
            path,
            _text(parts, where, "name", "valueString"),
            parts.get("value"),
            _number(parts, where, "index"),
            _number(parts, where, "source"),
            _number(parts, where, "destination"),
        )
        needs = {
            "add": ("name", "value"),
            "insert": ("index", "value"),
            "replace": ("value",),
            "move": ("source", "destination"),
            "delete": (),
        }[kind]
        missing = [n for n in needs if n not in parts]
        if missing:
            raise op.fail(f"needs {' and '.join(missing)}", 400)
        out.append(op)
    return out


def _resolve(
    resource: dict[str, Any], op: _Operation
) -> tuple[list[_Loc], list[_Loc] | None, _Step | None]:
    parsed = _parse_path(op.path)
    if isinstance(parsed, str):
        raise op.fail(parsed, 400)
    try:
        return _walk(resource, parsed)
    except _PathError as exc:
        raise op.fail(str(exc)) from None


def _one(op: _Operation, locs: list[_Loc], what: str) -> _Loc:
    if len(locs) != 1:
        found = "nothing" if not locs else f"{len(locs)} elements"
        raise op.fail(f"the path must find exactly one {what}; it found {found}")
    return locs[0]


def _list_at(
    op: _Operation, resource: dict[str, Any]
) -> tuple[dict[str, Any], str, Element | None]:
    """insert and move: the path names a repeating element of one parent."""
    _, parents, last = _resolve(resource, op)
    if parents is None or last is None:
        raise op.fail("the path must end with the name of a repeating element")
    parent = _one(op, [p for p in parents if isinstance(p.value, dict)], "parent element")
    node = parent.value
    elements = _children(parent)
    keys = _keys_for(node, last.name, elements)
    element = _element_named(elements, last.name)
    key = keys[0] if keys else element.key if element is not None else last.name
    if element is not None and not element.is_list:
        raise op.fail(f"'{last.name}' does not repeat")
    if key in node and not isinstance(node[key], list):
        raise op.fail(f"'{last.name}' is not a list")
    return node, key, element


def _mirror(node: dict[str, Any], key: str, change: Any) -> None:
    """Keep a primitive list's `_key` extensions aligned with it."""
    shadow = node.get(f"_{key}")
    if isinstance(shadow, list):
        change(shadow)
        if not shadow or all(v is None for v in shadow):
            del node[f"_{key}"]


def _add(resource: dict[str, Any], op: _Operation) -> None:
    locs, _, _ = _resolve(resource, op)
    target = _one(op, locs, "element to add to")
    node = target.value
    if not isinstance(node, dict):
        raise op.fail("the path finds a primitive value; add needs an element to add to")
    assert op.name is not None and op.part is not None
    element = _element_named(_children(target), op.name)
    value = _value_of(op.part, element, f"{op.where}.part[value]")
    key = op.name
    if element is not None:
        key = (_choice_key(op.part, element) or op.name) if element.choice else element.key
    elif elements_of(target.owner) is not None:
        raise op.fail(f"'{op.name}' is not an element of {target.path}")
    existing = node.get(key)
    if isinstance(existing, list):
        existing.append(value)
        _mirror(node, key, lambda s: s.append(None))
    elif existing is not None:
        raise op.fail(f"'{op.name}' is already there and does not repeat (use replace)")
    elif (
        element is not None
        and element.choice
        and any(k in node for k in _keys_for(node, element.name, _children(target)))
    ):
        raise op.fail(f"'{element.name}[x]' is already there (use replace)")
    else:
        node[key] = [value] if element is not None and element.is_list else value


def _insert(resource: dict[str, Any], op: _Operation) -> None:
    node, key, element = _list_at(op, resource)
    items = node.get(key) or []
    assert op.position is not None and op.part is not None
    if not 0 <= op.position <= len(items):
        raise op.fail(f"index {op.position} is outside 0..{len(items)}")
    items.insert(op.position, _value_of(op.part, element, f"{op.where}.part[value]"))
    node[key] = items
    position = op.position
    _mirror(node, key, lambda s: s.insert(position, None))


def _move(resource: dict[str, Any], op: _Operation) -> None:
    node, key, _ = _list_at(op, resource)
    items = node.get(key) or []
    assert op.source is not None and op.destination is not None
    for label, value in (("source", op.source), ("destination", op.destination)):
        if not 0 <= value < len(items):
            raise op.fail(f"{label} {value} is outside 0..{len(items) - 1}")
    source, destination = op.source, op.destination
    items.insert(destination, items.pop(source))

    def shift(s: list[Any]) -> None:
        if len(s) > max(source, destination):
            s.insert(destination, s.pop(source))

    _mirror(node, key, shift)


def _replace(resource: dict[str, Any], op: _Operation) -> None:
    locs, _, _ = _resolve(resource, op)
    target = _one(op, locs, "element to replace")
    if target.key == _ROOT:
        raise op.fail("the resource itself cannot be replaced (use PUT)")
    assert op.part is not None
    value = _value_of(op.part, target.element, f"{op.where}.part[value]")
    if target.index is not None:
        target.parent[target.key][target.index] = value
        return
    key = target.key
    element = target.element
    if element is not None and element.choice:
        new_key = _choice_key(op.part, element)
        if new_key is not None and new_key != key:  # valueString -> valueQuantity
            del target.parent[key]
            key = new_key
    target.parent[key] = value


def _delete(resource: dict[str, Any], op: _Operation) -> None:
    locs, _, _ = _resolve(resource, op)
    if not locs:
        return  # deleting nothing is no error, says the spec
    target = _one(op, locs, "element to delete")
    if target.key == _ROOT:
        raise op.fail("the resource itself cannot be deleted here (use DELETE)")
    node, key = target.parent, target.key
    if target.index is None:
        del node[key]
        node.pop(f"_{key}", None)
        return
    index = target.index
    del node[key][index]
    _mirror(node, key, lambda s: s.pop(index) if index < len(s) else None)
    if not node[key]:
        del node[key]


_APPLY = {"add": _add, "insert": _insert, "delete": _delete, "replace": _replace, "move": _move}


def apply_fhirpath_patch(original: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    """The resource the patch leaves (a copy; the original is untouched), its operations
    applied in order. 400 for a malformed patch or path, 422 for one that does not fit
    this resource (a replace finding nothing or several elements, an index out of range),
    each naming the operation's index and path."""
    operations = _operations(document)
    resource = copy.deepcopy(original)
    for op in operations:
        _APPLY[op.type](resource, op)
    return resource
