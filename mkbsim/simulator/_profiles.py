"""Simulated-model profiles: how a simulated agent implements, searches, paces, writes and reads skills.

Shipped as TOML files under ``profiles/`` (one per study model, named neutrally). Every numeric
parameter carries its TOML section, a range (used by calibration as bounds) and what it means.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from mkbsim.errors import UserError

PROFILES_DIR = Path(__file__).with_name("profiles")


def _param(section: str, lo: float, hi: float, doc: str, *, since: float | None = None) -> Any:
    """A numeric parameter. ``since``: the value a profile file written before the parameter existed gets (the
    behaviour the simulator had then), so such files stay usable."""
    return field(metadata={"section": section, "range": (lo, hi), "doc": doc, "since": since})


@dataclass(frozen=True)
class AgentProfile:
    name: str
    study_model: str
    description: str
    # implementation
    skill: float = _param("implementation", -2.0, 6.0, "logit of an implementation try before plan and DSL difficulty")
    cutedsl: float = _param("implementation", -2.0, 2.0, "extra logit in CuTe DSL (familiarity)")
    tirx: float = _param("implementation", -2.0, 2.0, "extra logit in TIRx (familiarity)")
    debugging: float = _param("implementation", 0.0, 2.0, "logit gained on a plan per failure diagnosed on it")
    quality: float = _param("implementation", 0.2, 1.0, "median share of a plan's efficiency ceiling reached")
    spread: float = _param("implementation", 0.05, 0.8, "log-SD of that share from one try to the next", since=0.25)
    local_testing: float = _param("implementation", 0.0, 1.0, "chance a compile error is caught before submitting")
    inline_cuda: float = _param("implementation", 0.0, 1.0, "chance a TIRx build failure turns the attempt to CUDA "
                                "source inside the TIRx module (passes the verifier; not a scored pass)", since=0.0)
    # search
    breadth: float = _param("search", 1.0, 6.0, "plans considered (the fraction is the chance of one more)")
    ambition: float = _param("search", 0.0, 2.0, "weight on speed (log-speedup) against simply passing")
    caution: float = _param("search", 0.0, 5.0, "weight on success chance over payoff when choosing a plan")
    overconfidence: float = _param("search", -1.0, 6.0, "logit added to the agent's own success estimates")
    persistence: float = _param("search", 1.0, 5.0, "failed tries before the agent abandons a plan")
    satisfice: float = _param("search", 0.0, 1.5, "expected log-gain below which the agent stops improving")
    # pacing
    speed: float = _param("pacing", 0.5, 2.5, "time multiplier on implementation work (above 1 = slower)")
    upkeep: float = _param("pacing", 0.0, 1.0, "chance SKILL.md is kept current while working")
    artifact_slip: float = _param("pacing", 0.0, 0.5, "chance the final kernel.py is the last try, not the best")
    eager_fallback: float = _param("pacing", 0.0, 0.5, "chance a failing attempt ends on an eager-only kernel")
    # writing
    evidence: float = _param("writing", 0.0, 1.0, "chance a conclusion is written with its measurement")
    closure: float = _param("writing", 0.0, 1.0, "tendency to rule out plans it failed at or never tried")
    agenda: float = _param("writing", 0.0, 1.0, "tendency to leave untried plans as suggestions for later")
    capping: float = _param("writing", 0.0, 1.0, "tendency to declare the reached speedup good enough")
    reformulation: float = _param("writing", 0.0, 1.0, "chance a passing reformulation is written as verified")
    recipe: float = _param("writing", 0.0, 1.0, "tendency to record DSL API-level recipes")
    diagnosis: float = _param("writing", 0.0, 1.0, "chance a failure is written down with its cause")
    # reading
    follow: float = _param("reading", 0.0, 1.0, "chance each actionable sentence of a read skill is adopted")
    reverify: float = _param("reading", 0.0, 1.0, "chance a closure or unmeasured claim is checked before use")

    def replace(self, changes: dict[str, float]) -> AgentProfile:
        unknown = set(changes) - set(parameter_names())
        if unknown:
            raise UserError(f"unknown profile parameter(s): {', '.join(sorted(unknown))}")
        values: dict[str, Any] = dict(changes)
        return dataclasses.replace(self, **values)

    def parameters(self) -> dict[str, float]:
        return {n: getattr(self, n) for n in parameter_names()}

    def to_toml(self) -> str:
        lines = [
            f'name = "{self.name}"',
            f'study_model = "{self.study_model}"',
            f'description = """{self.description}"""',
        ]
        section = None
        for f in dataclasses.fields(self):
            if "section" not in f.metadata:
                continue
            if f.metadata["section"] != section:
                section = f.metadata["section"]
                lines.append(f"\n[{section}]")
            lines.append(f"{f.name} = {round(getattr(self, f.name), 4)!r}  # {f.metadata['doc']}")
        return "\n".join(lines) + "\n"


@cache
def parameter_names() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(AgentProfile) if "section" in f.metadata)


def parameter_range(name: str) -> tuple[float, float]:
    lo, hi = next(f.metadata["range"] for f in dataclasses.fields(AgentProfile) if f.name == name)
    return float(lo), float(hi)


def parse_profile(text: str, origin: str) -> AgentProfile:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{origin}: not valid TOML: {exc}") from None
    values: dict[str, Any] = {k: data.get(k) for k in ("name", "study_model", "description")}
    missing = [k for k, v in values.items() if not isinstance(v, str)]
    for f in dataclasses.fields(AgentProfile):
        if "section" not in f.metadata:
            continue
        v = data.get(f.metadata["section"], {}).get(f.name, f.metadata["since"])
        if not isinstance(v, int | float) or isinstance(v, bool):
            missing.append(f"{f.metadata['section']}.{f.name}")
            continue
        lo, hi = f.metadata["range"]
        if not lo <= v <= hi:
            raise UserError(f"{origin}: {f.metadata['section']}.{f.name} = {v} is outside [{lo}, {hi}]")
        values[f.name] = float(v)
    if missing:
        raise UserError(f"{origin}: missing or non-numeric {', '.join(missing)}")
    return AgentProfile(**values)


@cache
def shipped_profiles() -> dict[str, AgentProfile]:
    """The six shipped profiles by name (alphabetical)."""
    profiles = [parse_profile(p.read_text(), str(p)) for p in sorted(PROFILES_DIR.glob("*.toml"))]
    return {p.name: p for p in profiles}


def get_profile(name: str) -> AgentProfile:
    """A shipped profile by name, or a profile file (``*.toml``, e.g. written by `mkbsim calibrate --write`)."""
    if name.endswith(".toml"):
        path = Path(name)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise UserError(f"{name}: no such profile file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"{name}: cannot be read: {exc}") from None
        return parse_profile(text, name)
    profiles = shipped_profiles()
    if name not in profiles:
        raise UserError(f"unknown profile {name!r} (shipped: {', '.join(profiles)}; or give a FILE.toml)")
    return profiles[name]


def resolve_profiles(names: list[str] | None) -> tuple[AgentProfile, ...]:
    """The profiles ``names`` give (shipped names or profile files; None or empty: the shipped six), each name
    once: a campaign tells its agents apart by profile name."""
    chosen = [get_profile(n) for n in dict.fromkeys(names or [])] or list(shipped_profiles().values())
    seen: dict[str, str] = {}
    for given, profile in zip(dict.fromkeys(names or []), chosen, strict=False):
        if profile.name in seen:
            raise UserError(f"{given} and {seen[profile.name]} are both named {profile.name!r}; a campaign needs "
                            "distinct profile names (edit `name` in the file)")  # fmt: skip
        seen[profile.name] = given
    return tuple(chosen)
