"""Configs: dataclasses with help text, loaded from YAML, overridden by key=value.

    cfg = load_config(TrainConfig, "configs/train/x.yaml", ["loss.tau=0.2", "lr=1e-4"])

Every problem (unknown key, wrong type, bad choice, malformed override) is
collected and raised at once in a `ConfigError`, unknown keys with a
"did you mean" suggestion, keys a config class lists in its `RENAMED` class attribute
(old key -> new dotted key) with their new name. Nested dataclasses are addressed with dots.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

import yaml

from cuset.errors import CusetError


class ConfigError(CusetError, ValueError):
    def __init__(self, errors: list[str], source: str = "config"):
        self.errors = errors
        super().__init__(f"{len(errors)} error(s) in {source}:\n" + "\n".join(f"  - {e}" for e in errors))


def option(default: Any = dataclasses.MISSING, help: str = "", *, choices: tuple | None = None, default_factory: Any = dataclasses.MISSING):
    """A dataclass field with help text (shown by `cuset ... --help-config`)."""
    meta = {"help": help}
    if choices is not None:
        meta["choices"] = tuple(choices)
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(value: Any, tp: Any, where: str, errors: list[str]) -> Any:
    """Check/convert `value` to type `tp`; append to `errors` and return None on failure."""
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            trial: list[str] = []
            out = _coerce(value, arg, where, trial)
            if not trial:
                return out
        errors.append(f"{where}: expected {' or '.join(_type_name(a) for a in args)}, got {value!r}")
        return None
    if origin is Literal:
        if value in get_args(tp):
            return value
        errors.append(f"{where}: must be one of {', '.join(map(repr, get_args(tp)))}, got {value!r}")
        return None
    if dataclasses.is_dataclass(tp):
        if isinstance(value, bool) and "enabled" in {f.name for f in dataclasses.fields(tp)}:
            value = {"enabled": value}  # `section: true` switches on a section that has an `enabled` field
        if not isinstance(value, dict):
            errors.append(f"{where}: expected a mapping of {tp.__name__} fields, got {value!r}")
            return None
        return _build(tp, value, where + ".", errors)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            errors.append(f"{where}: expected a list, got {value!r}")
            return None
        args = get_args(tp)
        item_tp = args[0] if args else Any
        items = [_coerce(v, item_tp, f"{where}[{i}]", errors) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            errors.append(f"{where}: expected a mapping, got {value!r}")
            return None
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        errors.append(f"{where}: expected true/false, got {value!r}")
        return None
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        errors.append(f"{where}: expected an integer, got {value!r}")
        return None
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads "3e-5" (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        errors.append(f"{where}: expected a number, got {value!r}")
        return None
    if tp is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        errors.append(f"{where}: expected a string, got {value!r}")
        return None
    if tp is Path:
        if isinstance(value, (str, Path)):
            return Path(value)
        errors.append(f"{where}: expected a path, got {value!r}")
        return None
    return value


def _build(cls: type, data: dict, prefix: str, errors: list[str]):
    n_start = len(errors)
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        renamed = getattr(cls, "RENAMED", {})
        if key not in fields and key in renamed:
            errors.append(f"{prefix}{key} was renamed {prefix}{renamed[key]}")
            continue
        if key not in fields:
            close = difflib.get_close_matches(str(key), [*fields, *renamed], n=1, cutoff=0.6)
            hint = (f" (did you mean '{prefix}{renamed.get(close[0], close[0])}'?)" if close
                    else f" (known keys: {', '.join(fields)})")
            errors.append(f"{prefix}{key}: unknown key{hint}")
            continue
        f = fields[key]
        n_before = len(errors)
        out = _coerce(value, hints[key], prefix + key, errors)
        choices = f.metadata.get("choices")
        if len(errors) == n_before and choices is not None and out not in choices:
            close = difflib.get_close_matches(str(out), [str(c) for c in choices], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            errors.append(f"{prefix}{key}: must be one of {', '.join(map(repr, choices))}, got {out!r}{hint}")
        if len(errors) == n_before:
            kwargs[key] = out
    missing = [name for name, f in fields.items() if name not in kwargs and name not in data
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    errors.extend(f"{prefix}{name}: required, not set" for name in missing)
    if missing:
        return None
    # The value checks (__post_init__) run even when a key above was refused (it takes its
    # default), so `workers=-1 backend=tpu` reports both problems, not the second alone.
    try:
        built = cls(**kwargs)
    except (TypeError, ValueError) as e:
        errors.append(f"{prefix.rstrip('.') or cls.__name__}: {e}")
        return None
    return built if len(errors) == n_start else None


def parse_overrides(overrides: list[str], errors: list[str]) -> dict:
    """Turn ["a.b=1", "c=[1, 2]"] into a nested dict; values parse as YAML scalars."""
    nested: dict = {}
    for item in overrides:
        if "=" not in item:
            errors.append(f"override {item!r}: expected key=value")
            continue
        key, raw = item.split("=", 1)
        key = key.strip().lstrip("-")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        node = nested
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                errors.append(f"override {item!r}: {part} is not a section")
                break
        else:
            node[parts[-1]] = value
    return nested


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), bool):
            out[k] = {"enabled": out[k]}  # `section: true` in YAML, then `section.key=value` on the command line
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def read_yaml(path: str | Path) -> dict:
    path = Path(path)
    if not path.exists():
        raise ConfigError([f"{path}: no such file"], str(path))
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError([f"{where}: invalid YAML: {getattr(e, 'problem', e)}"], str(path)) from None
    if not isinstance(data, dict):
        raise ConfigError([f"{path}: top level must be a mapping of keys"], str(path))
    return data


def load_config(cls: type, path: str | Path | None = None, overrides: list[str] | None = None, base: dict | None = None):
    """Build a `cls` instance from defaults <- base dict <- YAML file <- key=value overrides."""
    errors: list[str] = []
    data = dict(base or {})
    if path is not None:
        data = _merge(data, read_yaml(path))
    data = _merge(data, parse_overrides(list(overrides or []), errors))
    cfg = _build(cls, data, "", errors)
    if errors:
        raise ConfigError(errors, str(path) if path else cls.__name__)
    return cfg


def to_dict(cfg) -> dict:
    """A plain, YAML/JSON-serialisable dict of a config (paths as strings)."""
    def conv(v):
        if dataclasses.is_dataclass(v):
            return {f.name: conv(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, (list, tuple)):
            return [conv(x) for x in v]
        if isinstance(v, Path):
            return str(v)
        return v
    return conv(cfg)


def type_name(tp: Any) -> str:
    """A type as a reader writes it: `int`, `float | None`, `list[str]`, `'a' | 'b'`."""
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join("None" if a is type(None) else type_name(a) for a in get_args(tp))
    if origin is Literal:
        return " | ".join(map(repr, get_args(tp)))
    if origin is not None:
        args = get_args(tp)
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_name(a) for a in args)}]" if args else name
    return _type_name(tp)


def describe(cls: type, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(key, type, default, help) rows for every option, nested ones with dotted keys; a key with
    `choices` shows them as its type."""
    rows = []
    hints = get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            rows.extend(describe(tp, f"{prefix}{f.name}."))
            continue
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = repr(f.default_factory())
        else:
            default = "(required)"
        choices = f.metadata.get("choices")
        kind = " | ".join(map(repr, choices)) if choices is not None else type_name(tp)
        rows.append((prefix + f.name, kind, default, f.metadata.get("help", "")))
    return rows
