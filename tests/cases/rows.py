"""Helpers the chapters' synthetic cases share."""


def set_rows(rows, where, **change):
    """Update, in place, every row of ``rows`` whose fields match ``where``."""
    for r in rows:
        if all(r.get(k) == v for k, v in where.items()):
            r.update(change)
