"""When an SQLite export's rows are decoded from its pages (:mod:`nsysmoe.io.pages`) rather than
read through SQL, and the SQL words a plain column name cannot be. Kept apart from the decoder
so that a read that never decodes pages (a small file, a Parquet export) never imports numba."""

from __future__ import annotations

import os
from pathlib import Path

#: files smaller than this are read through SQL: it reads them in less time than the decoder
#: takes to load (numba's import and first call, ~0.5 s)
PAGES_FROM_BYTES = 64 << 20
#: SQLite's keywords (sqlite.org/lang_keywords.html): unquoted, one is not read as a column
KEYWORDS = frozenset("""ABORT ACTION ADD AFTER ALL ALTER ALWAYS ANALYZE AND AS ASC ATTACH
AUTOINCREMENT BEFORE BEGIN BETWEEN BY CASCADE CASE CAST CHECK COLLATE COLUMN COMMIT CONFLICT
CONSTRAINT CREATE CROSS CURRENT CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP DATABASE DEFAULT
DEFERRABLE DEFERRED DELETE DESC DETACH DISTINCT DO DROP EACH ELSE END ESCAPE EXCEPT EXCLUDE
EXCLUSIVE EXISTS EXPLAIN FAIL FILTER FIRST FOLLOWING FOR FOREIGN FROM FULL GENERATED GLOB GROUP
GROUPS HAVING IF IGNORE IMMEDIATE IN INDEX INDEXED INITIALLY INNER INSERT INSTEAD INTERSECT INTO
IS ISNULL JOIN KEY LAST LEFT LIKE LIMIT MATCH MATERIALIZED NATURAL NO NOT NOTHING NOTNULL NULL
NULLS OF OFFSET ON OR ORDER OTHERS OUTER OVER PARTITION PLAN PRAGMA PRECEDING PRIMARY QUERY RAISE
RANGE RECURSIVE REFERENCES REGEXP REINDEX RELEASE RENAME REPLACE RESTRICT RETURNING RIGHT
ROLLBACK ROW ROWS SAVEPOINT SELECT SET TABLE TEMP TEMPORARY THEN TIES TO TRANSACTION TRIGGER
UNBOUNDED UNION UNIQUE UPDATE USING VACUUM VALUES VIEW VIRTUAL WHEN WHERE WINDOW WITH
WITHOUT""".split())


def pages_enabled(path: Path) -> bool:
    """Whether reads of ``path`` try the pages first: for a file of :data:`PAGES_FROM_BYTES`
    or more (below, SQL reads it before the decoder has loaded); ``NSYSMOE_READER=sql`` reads
    every file through SQL (the reference the decoder is tested and timed against),
    ``NSYSMOE_READER=pages`` every file from its pages."""
    how = os.environ.get("NSYSMOE_READER", "").lower()
    if not hasattr(os, "preadv"):  # pragma: no cover - Windows: SQL reads everything
        return False
    if how in ("sql", "pages"):
        return how == "pages"
    try:
        return path.stat().st_size >= PAGES_FROM_BYTES
    except OSError:
        return False


__all__ = ["KEYWORDS", "PAGES_FROM_BYTES", "pages_enabled"]
