"""Turn pydantic's validation errors into one short line per problem, named by field path."""

from __future__ import annotations

import re

from pydantic import ValidationError

# keys shown in a path: names (sites, links 'a-b', fields); anything else is file content, never echoed
_SHOWN_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,40}$")
_FIELD_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")
_HIDDEN = "<key>"

# loc entries pydantic inserts for union members / discriminator tags: not part of the user's path
_TYPE_LIKE = re.compile(r"^(float|int|str|bool|none|constrained-\w+|literal\[.*\]|tuple\[.*\]|list\[.*\]|dict\[.*\]|function-\w+\[.*\]|.*\[.*\])$")


def field_path(loc: tuple[object, ...], tags: frozenset[str] = frozenset()) -> str:
    out = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        text = str(part)
        # a discriminator tag follows a list index or dict key and repeats the 'kind'/'name' value
        if text in tags and i > 0 or _TYPE_LIKE.match(text):
            continue
        if not _SHOWN_KEY.match(text):
            text = _HIDDEN
        out += f".{text}" if out else text
    return out or "(top level)"


def _short_value(value: object) -> str | None:
    if isinstance(value, (int, float, bool)) or value is None:
        return repr(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:37] + "...")
    return None


def _message(err: dict, quote_values: bool = True) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    simple = {
        "greater_than": "must be > {gt}",
        "greater_than_equal": "must be >= {ge}",
        "less_than": "must be < {lt}",
        "less_than_equal": "must be <= {le}",
        "missing": "required field is missing",
        "extra_forbidden": "unknown field",
        "float_parsing": "must be a number",
        "float_type": "must be a number",
        "int_parsing": "must be an integer",
        "int_type": "must be an integer",
        "int_from_float": "must be an integer",
        "bool_parsing": "must be true or false",
        "bool_type": "must be true or false",
        "finite_number": "must be a finite number",
        "tuple_type": "must be a list",
        "string_too_long": "must be at most {max_length} characters",
        "too_long": "must have at most {max_length} item(s)",
        "string_type": "must be a string",
        "list_type": "must be a list",
        "dict_type": "must be a mapping",
        "model_type": "must be a mapping",
        "too_short": "must have at least {min_length} item(s)",
        "string_pattern_mismatch": "must match {pattern}",
        "datetime_from_date_parsing": "must be an ISO-8601 date-time",
        "datetime_parsing": "must be an ISO-8601 date-time",
        "datetime_type": "must be an ISO-8601 date-time",
    }
    if kind in simple:
        try:
            msg = simple[kind].format(**ctx)
        except KeyError:
            msg = simple[kind]
    elif kind == "union_tag_invalid":
        msg = f"unknown {ctx.get('discriminator', 'tag').strip(chr(39))} {ctx.get('tag')!r} (expected one of {ctx.get('expected_tags')})"
        return msg
    elif kind == "union_tag_not_found":
        msg = f"needs a {ctx.get('discriminator', 'tag').strip(chr(39))!s} field"
        return msg
    elif kind == "literal_error":
        msg = f"must be one of {ctx.get('expected')}"
    elif kind in ("value_error", "assertion_error"):
        msg = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        return msg
    else:
        msg = str(err["msg"])
    got = _short_value(err.get("input")) if quote_values else None
    if got is not None and kind not in ("missing", "extra_forbidden", "unknown_key"):
        msg += f" (got {got})"
    return msg


def _candidates(tp: object) -> list[type]:
    """The pydantic models a field's type can hold (through Optional, unions, lists and mappings)."""
    import typing

    from pydantic import BaseModel

    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    out: list[type] = []
    for arg in typing.get_args(tp):
        members = getattr(arg, "members", None)  # a RegistryUnion's metadata: its registered models
        out += [m for _, m in members()] if callable(members) else _candidates(arg)
    return out


def _tagged(model: type, tag: str) -> bool:
    """Does ``model`` carry ``tag`` as the value of a one-value Literal field (a union's discriminator)?"""
    import typing

    return any(typing.get_origin(f.annotation) is typing.Literal and typing.get_args(f.annotation) == (tag,)
               for f in model.model_fields.values())


def fields_at(model: type, loc: tuple[object, ...]) -> set[str]:
    """The field names a ``model`` accepts at ``loc`` (union alternatives together; empty if unknown)."""
    models = [model]
    for part in loc:
        if isinstance(part, int) or not models:
            continue  # a list index: the same element models
        text = str(part)
        nxt: list[type] = []
        for m in models:
            f = m.model_fields.get(text)
            if f is not None:
                nxt += _candidates(f.annotation)
        if not nxt and any(text not in m.model_fields for m in models):
            # a union tag selects its member; a mapping key (a site name) keeps the same models
            models = [m for m in models if _tagged(m, text)] or models
            continue
        models = nxt
    return {name for m in models for name in m.model_fields}


def _member(part: object) -> bool:
    """Is this ``loc`` entry a union member's label (``list[...]``, ``literal[...]``)?"""
    return isinstance(part, str) and bool(_TYPE_LIKE.match(part))


def _wrong_shape(err: dict) -> bool:
    """The error says the value is not of this union member's kind at all (a list where a string
    goes), rather than what is wrong inside a value of that kind."""
    if err["type"].endswith("_type"):
        return True
    if err["type"] in ("literal_error", "enum"):  # a string of the wrong name still is a name
        return not isinstance(err.get("input"), str)
    return False


def matching_alternatives(errors: list[dict]) -> list[dict]:
    """Of a union's alternatives (``list[Entry] | Literal['none', ...]``), only the errors of those
    whose kind the value has: where some alternative got inside the value (a list's entry is wrong),
    or rejected a value of its kind (an unknown name), the others' "not a list" / "not one of"
    errors at that field are dropped. A value of no alternative's kind keeps them all."""
    shaped: set[tuple[tuple[object, ...], object]] = set()  # (union site, member) that took the value's kind
    for err in errors:
        loc = tuple(err["loc"])
        for j, part in enumerate(loc):
            if _member(part) and (j < len(loc) - 1 or not _wrong_shape(err)):
                shaped.add((loc[:j], part))
    out = []
    for err in errors:
        loc = tuple(err["loc"])
        if loc and _member(loc[-1]) and _wrong_shape(err):
            if any(site == loc[:-1] and member != loc[-1] for site, member in shaped):
                continue  # another alternative matched the value's kind: this one's mismatch is noise
        out.append(err)
    return out


def problems_from(exc: ValidationError, tags: frozenset[str], prefix: str = "",
                  quote_values: bool = True, model: type | None = None) -> list[tuple[str, str]]:
    """One ``(path, message)`` per field; alternatives of a union on the same path are joined.
    ``quote_values=False``: never show the value found (for files that may not be the user's).
    ``model``: the model validated, so that an unknown field gets a "did you mean"."""
    merged: dict[str, list[str]] = {}
    type_only: dict[str, bool] = {}  # path -> every error there is "wrong type" (a union alternative)
    for err in matching_alternatives(exc.errors(include_url=False)):
        loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden" and loc and not _FIELD_NAME.match(str(loc[-1])):
            # a key that is no field name (``root:*:19000:0:...`` when /etc/shadow is read as YAML): not shown
            err = {**err, "type": "unknown_key", "msg": "unknown keys that are not field names (not shown)"}
            loc = loc[:-1]
        path = field_path(loc, tags)
        if prefix:
            path = f"{prefix}.{path}" if path != "(top level)" else prefix
        msg = _message(err, quote_values)
        if err["type"] == "extra_forbidden" and model is not None and loc:
            from testbed.suggest import did_you_mean

            msg += did_you_mean(str(loc[-1]), fields_at(model, loc[:-1]))
        type_only[path] = type_only.get(path, True) and err["type"].endswith("_type")
        if msg not in merged.setdefault(path, []):
            merged[path].append(msg)
    # ``checkpoint_gb: [1, .inf]`` fails as a number at the field and as a pair at checkpoint_gb[1]:
    # the deeper error is the one that says what is wrong, the other alternative's mismatch is noise
    deeper = [p for p in merged if any(p != q and (q.startswith(p + "[") or q.startswith(p + ".")) for q in merged)]
    for p in deeper:
        if type_only[p]:
            del merged[p]
    return [(path, "; or ".join(msgs)) for path, msgs in merged.items()]
