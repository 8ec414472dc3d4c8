"""The campaign lifecycle has one home: ``CampaignStarted`` and ``CampaignFinished`` are made in one module (the
campaign recorder), and no class name means two things in the code base."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("mkbsim", "tui", "skill_filters")


def _modules(*packages: str) -> dict[str, ast.Module]:
    return {str(path.relative_to(ROOT)): ast.parse(path.read_text(), str(path))
            for package in packages for path in sorted((ROOT / package).rglob("*.py"))}  # fmt: skip


def _makers(name: str) -> set[str]:
    """Modules that call ``name(...)`` (as a bare name or an attribute)."""
    found = set()
    for module, tree in _modules("mkbsim").items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                if called == name:
                    found.add(module)
    return found


def test_campaign_events_have_one_emitter() -> None:
    assert _makers("CampaignStarted") == {"mkbsim/campaigns/_recorder.py"}
    assert _makers("CampaignFinished") == {"mkbsim/campaigns/_recorder.py"}


def test_no_class_name_is_defined_twice() -> None:
    defined: dict[str, list[str]] = defaultdict(list)
    for module, tree in _modules(*PACKAGES).items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                defined[node.name].append(module)
    assert {name: where for name, where in defined.items() if len(where) > 1} == {}
