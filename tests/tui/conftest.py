"""Fixtures for the TUI tests: the explicit fixture store (built once, copied per test) and the app."""

from __future__ import annotations

import asyncio
import inspect
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from tui_store_kit import build_store, drop_closures, fixture_now

from tui.app import MkbsimApp
from tui.data.filters import FilterCatalog

STORE_NAME = "fixture.sqlite"


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run ``async def`` tests in a fresh event loop (Textual's pilot is async; no async plugin needed)."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    arguments = {name: pyfuncitem.funcargs[name] for name in inspect.signature(pyfuncitem.obj).parameters}
    asyncio.run(pyfuncitem.obj(**arguments))
    return True


TEST_FILTERS = FilterCatalog({"drop_unsupported_closure": drop_closures})


@pytest.fixture(scope="session")
def template_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tui-template") / STORE_NAME
    build_store(path)
    return path


@pytest.fixture
def store(template_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of the fixture store, opened by a relative path (the nav bar shows it as given)."""
    shutil.copy(template_store, tmp_path / STORE_NAME)
    monkeypatch.chdir(tmp_path)
    return Path(STORE_NAME)


@pytest.fixture
def make_app(store: Path) -> Callable[..., MkbsimApp]:
    now = fixture_now(store)

    def make(path: Path | None = None, *, filters: FilterCatalog = TEST_FILTERS) -> MkbsimApp:
        return MkbsimApp(path or store, clock=lambda: now, filters=filters, poll_s=0.05, lift_every_s=0.0)

    return make
