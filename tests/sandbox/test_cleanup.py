"""What a command left behind is removed however deep it nested it, and never through a link out of the tree."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from mkbsim.sandbox import remove_tree


def _nest(root: Path, depth: int) -> None:
    os.mkdir(root)
    fd = os.open(root, os.O_RDONLY)
    for _ in range(depth):  # by descriptor: the path would outgrow PATH_MAX
        os.mkdir("d", dir_fd=fd)
        deeper = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = deeper
    os.close(os.open("leaf", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    os.close(fd)


def test_a_tree_nested_deeper_than_the_recursion_limit_is_removed(tmp_path: Path) -> None:
    deep = tmp_path / "attempt"
    _nest(deep, 1500)
    with pytest.raises(RecursionError):  # what the parent hit before: the test can fail
        shutil.rmtree(deep)
    remove_tree(deep)
    assert not deep.exists()


def test_links_out_of_the_tree_are_removed_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    tree = tmp_path / "attempt"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "to_dir").symlink_to(outside)
    (tree / "to_file").symlink_to(outside / "keep.txt")
    remove_tree(tree)
    remove_tree(tmp_path / "missing")
    assert not tree.exists() and (outside / "keep.txt").read_text() == "keep"
