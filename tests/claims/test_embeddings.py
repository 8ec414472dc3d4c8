"""Claim embeddings kept between runs: a sentence is embedded once, its vector read back by later runs (and by
other processes), the model never loaded when every sentence is known."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import mkbsim.claims._link as link_module
from mkbsim.claims import EmbeddingCache, cache_for, linker


class CountingModel:
    """Stands in for MiniLM: a unit vector per sentence from its hash, and a count of what it embedded."""

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def encode(self, sentences: Sequence[str], **_: object) -> np.ndarray:
        self.embedded += sentences
        rows = [np.frombuffer(hashlib.sha256(s.encode()).digest(), dtype=np.uint8)[:16].astype(np.float32) + 1
                for s in sentences]  # fmt: skip
        return np.stack([r / np.linalg.norm(r) for r in rows])


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> CountingModel:
    fake = CountingModel()
    monkeypatch.setattr(link_module, "_minilm_available", lambda: None)
    monkeypatch.setattr(link_module, "_minilm_key", lambda: "counting-model v1")
    monkeypatch.setattr(link_module, "_minilm_model", lambda: fake)
    return fake


SOURCE = ["Fusing the two GEMMs measured 2.1x.", "Split-KV does not pay at this batch size."]
TARGET = ["The fused GEMM pair measured 2.1x.", "A later attempt could try a persistent kernel."]


def test_a_sentence_is_embedded_once_and_read_back_by_the_next_run(tmp_path: Path, model: CountingModel) -> None:
    store = tmp_path / "events.sqlite"
    first = cache_for(store)
    scores = linker("minilm", cache=first).similarity(SOURCE, TARGET)
    first.close()
    assert sorted(model.embedded) == sorted(SOURCE + TARGET)
    assert Path(f"{store}-embeddings").exists()  # beside the store

    model.embedded.clear()
    again = cache_for(store)  # a later run, a new process: only the file carries the vectors
    assert linker("minilm", cache=again).similarity(SOURCE, TARGET) == scores
    assert model.embedded == []
    linker("minilm", cache=again).similarity(SOURCE, ["A sentence nobody embedded yet."])
    assert model.embedded == ["A sentence nobody embedded yet."]


def test_a_warm_cache_never_loads_the_model(tmp_path: Path, model: CountingModel,
                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    cache = cache_for(tmp_path / "s.sqlite")
    linker("minilm", cache=cache).warm(SOURCE + TARGET)

    def no_model() -> None:
        raise AssertionError("the model was loaded although every sentence is cached")

    monkeypatch.setattr(link_module, "_minilm_model", no_model)
    assert linker("minilm", cache=cache_for(tmp_path / "s.sqlite")).link(SOURCE, TARGET) is not None


def test_vectors_of_another_model_are_not_reused(tmp_path: Path, model: CountingModel,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    linker("minilm", cache=cache_for(tmp_path / "s.sqlite")).warm(SOURCE)
    monkeypatch.setattr(link_module, "_minilm_key", lambda: "counting-model v2")
    model.embedded.clear()
    linker("minilm", cache=cache_for(tmp_path / "s.sqlite")).warm(SOURCE)
    assert sorted(model.embedded) == sorted(SOURCE)


def test_a_store_whose_folder_cannot_hold_the_cache_keeps_its_vectors_elsewhere(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")  # a file where the cache's folder would be: nothing can be made under it
    beside = Path(f"{blocked / 'events.sqlite'}-embeddings")
    spare = tmp_path / "cache" / "embeddings.sqlite"
    assert cache_for(blocked / "events.sqlite", [beside, spare]).path == spare
    nowhere = cache_for(blocked / "events.sqlite", [beside])
    assert nowhere.path is None and "memory" in nowhere.where
    nowhere.put("m", {"a": b"1234"})
    assert nowhere.get("m", ["a", "b"]) == {"a": b"1234"}


def test_the_cache_is_shared_by_two_open_handles(tmp_path: Path) -> None:
    one, two = EmbeddingCache(tmp_path / "e.sqlite"), EmbeddingCache(tmp_path / "e.sqlite")
    one.put("m", {"x": b"vector"})
    assert two.get("m", ["x"]) == {"x": b"vector"}
    two.put("m", {"x": b"other"})  # the first write of a sentence wins: vectors never change under a reader
    assert one.get("m", ["x"]) == {"x": b"vector"}
