"""Checked reading of campaign files: every mistake is one line naming the file and the key."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from mkbsim.errors import UserError


class ConfigError(UserError):
    """A campaign file that cannot be used; names the file and the key."""


def read_toml(file: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(file.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such campaign file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None


class Table:
    """Typed, checked access to one TOML table; unknown keys are errors (typos must not pass)."""

    def __init__(self, path: Path, where: str, data: Any, known: tuple[str, ...]) -> None:
        self.path, self.where = path, where
        if not isinstance(data, dict):
            self.fail("", "must be a table")
        self.data: dict[str, Any] = data
        unknown = sorted(set(data) - set(known))
        if unknown:
            self.fail(unknown[0], f"unknown key (known: {', '.join(known)})")

    def fail(self, key: str, message: str) -> None:
        name = f"{self.where}.{key}" if key and self.where else key or self.where
        raise ConfigError(f"{self.path}: {name}: {message}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None, *, required: bool = False) -> Any:
        if key not in self.data:
            if required:
                self.fail(key, "required key is missing")
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        # TOML booleans are ints in Python: never accept one where a number is meant
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            names = " or ".join("number" if k is float else k.__name__ for k in kinds)
            self.fail(key, f"expected {names}, got {type(value).__name__} {value!r:.40}")
        return value

    def positive(self, key: str, default: float, *, integer: bool = False) -> Any:
        value = self.get(key, int if integer else (int, float), default)
        if value <= 0:
            self.fail(key, f"must be positive, got {value}")
        return value

    def strings(self, key: str, default: list[str]) -> list[str]:
        """A list of strings, or one comma-separated string."""
        value = self.get(key, (str, list), default)
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not value or not all(isinstance(v, str) for v in value):
            self.fail(key, "expected a non-empty list of strings")
        return list(value)
