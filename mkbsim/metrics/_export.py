"""``--export DIR``: every projection table and every report section as CSV and Parquet, for notebooks."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from mkbsim.metrics._render import SECTIONS, flat_rows
from mkbsim.metrics._sections import Row


def export(conn: sqlite3.Connection, tables: Iterable[str], report: Row, directory: Path) -> list[Path]:
    """Write ``<table>.csv``/``.parquet`` per projection table and ``report_<section>.csv``/``.parquet``."""
    import pandas as pd

    directory.mkdir(parents=True, exist_ok=True)
    frames = {table: pd.read_sql_query(f"SELECT * FROM {table}", conn) for table in tables}
    for section in SECTIONS:
        frames[f"report_{section}"] = pd.DataFrame(flat_rows(report[section]))
    written = []
    for name, frame in frames.items():
        csv_path, parquet_path = directory / f"{name}.csv", directory / f"{name}.parquet"
        frame.to_csv(csv_path, index=False)
        frame.to_parquet(parquet_path, engine="pyarrow", index=False)
        written += [csv_path, parquet_path]
    return written
