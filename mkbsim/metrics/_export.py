"""``--export DIR``: projection tables and every report section as CSV and Parquet, for notebooks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mkbsim.metrics._render import SECTIONS, flat_rows
from mkbsim.metrics._sections import Row


def export(
    tables: Mapping[str, tuple[Sequence[str], Sequence[Sequence[Any]]]], report: Row, directory: Path
) -> list[Path]:
    """Write ``<table>.csv``/``.parquet`` per table (name → (columns, rows)) and ``report_<section>.csv``/
    ``.parquet`` per report section."""
    import pandas as pd

    directory.mkdir(parents=True, exist_ok=True)
    frames = {name: pd.DataFrame.from_records(list(rows), columns=list(cols)) for name, (cols, rows) in tables.items()}
    for section in SECTIONS:
        frames[f"report_{section}"] = pd.DataFrame(flat_rows(report[section]))
    written = []
    for name, frame in frames.items():
        csv_path, parquet_path = directory / f"{name}.csv", directory / f"{name}.parquet"
        frame.to_csv(csv_path, index=False)
        frame.to_parquet(parquet_path, engine="pyarrow", index=False)
        written += [csv_path, parquet_path]
    return written
