# SPDX-License-Identifier: BSD-3-Clause
"""tables_base.py: what tables.py and its section modules (tables_*.py)
all use.

Numbers from CSV cells (medians, ratios, sizes, their format; Runs:
which cells none of their runs measured), the readers of a results
directory's files, markdown tables, and the lines that say where and how
the numbers were measured. Python 3, standard library only.
"""

import csv
import math
import os
import statistics

# The transport every ratio is taken against
REFERENCE = "rc_verbs"


# --- numbers ----------------------------------------------------------------


def num(s):
    """A float from a CSV cell, None for '', 'nan', '-' and the like."""
    try:
        v = float(s)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def median(values):
    """Median of the numbers among VALUES (None left out); None if none."""
    v = [x for x in values if x is not None]
    return statistics.median(v) if v else None


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def paired_ratio(mine, x, col, runs):
    """(ratio, mark): the median over the reps of X's number in COL over
    the reference's in the same rep (MINE: the rows of one table cell,
    every transport), and ' (K of N)' where only K of the N reps have
    both. The benches run the transports' jobs of a rep back to back, and
    the guest's speed drifts over minutes (its jobs fall in modes about 2x
    apart), so a ratio within a rep is steadier than one of the medians."""
    def by_rep(tl):
        return {r.get("rep") or "1": num(r[col]) for r in mine
                if r["transport"] == tl}
    a, b = by_rep(x), by_rep(REFERENCE)
    reps = set(a) | set(b)
    got = [v for v in (ratio(a.get(k), b.get(k)) for k in reps) if v is not None]
    if not got:
        return None, ""
    n = max(len(reps), runs.reps or 0)
    return median(got), " (%d of %d)" % (len(got), n) if len(got) < n else ""


def size_name(n):
    """A size in bytes as written in the tables: '64 KiB', '1 MiB', '8 B'."""
    n = int(n)
    for unit, s in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= s and n % s == 0:
            return "%d %s" % (n // s, unit)
    return "%d B" % n


def fmt(v):
    """A measured value: 3 significant digits (integers above 100), no
    exponent."""
    if v is None:
        return "-"
    a = abs(v)
    if a >= 100:
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    if a >= 1:
        return "%.2f" % v
    return "%.3g" % v


def fmt_ratio(v, digits=2):
    """A ratio: 2 decimals; those far below 1 with 3 significant digits."""
    if v is None:
        return "-"
    if v < 0.1 or digits == 3:
        return "%.3g" % v
    return "%.*f" % (digits, v)


class Runs:
    """The runs behind the cells of one set of tables: which cells none of
    their runs measured (the exit status), whether any has fewer numbers
    than runs (the head line says what a mark means)."""

    def __init__(self, reps=None):
        self.reps = reps        # the runs a cell should have; None: its rows
        self.failed = {}        # cell name: why
        self.partial = False

    def median(self, name, values, expect=True):
        """(median, mark) of VALUES, CSV cells or numbers: 'nan' (or None)
        a run that gave no number, '' no run. EXPECT: the cell should have
        self.reps runs even where it has fewer rows (a run that failed and
        wrote none). The mark is '' or " (K of N)"; a cell of N runs and no
        number is recorded as failed."""
        runs = [v for v in values if not (isinstance(v, str) and v.strip() == "")]
        got = [x for x in map(num, runs) if x is not None]
        n = max(len(runs), (self.reps or 0) if expect else 0)
        if n and not got:
            self.failed[name] = "%d run%s, none gave a number" % (n, "s" * (n > 1))
        if not got:
            return None, ""
        if len(got) < n:
            self.partial = True
            return statistics.median(got), " (%d of %d)" % (len(got), n)
        return statistics.median(got), ""

    def fmt(self, name, values, expect=True, form=None):
        """The cell's text: its median formatted (fmt, or FORM) and mark."""
        m, mark = self.median(name, values, expect)
        if m is None:
            return "-"
        return (form % m if form else fmt(m)) + mark


# --- input ------------------------------------------------------------------


def read_csv(path):
    if not os.path.exists(path):
        return None
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_meta(path):
    meta = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                k, sep, v = line.rstrip("\n").partition("=")
                if sep:
                    meta[k.strip()] = v.strip()
    return meta


def read_notes(path):
    """faults.notes: {(transport, scenario): note}; {} if there is none."""
    notes = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                w = line.rstrip("\n").split("\t", 2)
                if len(w) == 3:
                    notes[w[0], w[1]] = w[2]
    return notes


def ordered(rows, key):
    """The values of KEY in ROWS, in order of first appearance."""
    seen = []
    for r in rows:
        if r[key] not in seen:
            seen.append(r[key])
    return seen


def table(header, rows):
    """A markdown table."""
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join(" --- " for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out) + "\n"


def stamp(meta, what):
    """The line that says where the numbers come from."""
    parts = ["Generated by `%s`" % what]
    if meta.get("date"):
        parts.append("measured %s" % meta["date"])
    parts.append("kernel %s" % meta.get("kernel", "unknown"))
    parts.append("UCX %s" % meta.get("ucx", "unknown"))
    if meta.get("commit"):
        parts.append("commit %s" % meta["commit"])
    extra = [meta[k] for k in ("run", "note") if meta.get(k)]
    return "_" + ", ".join(parts + extra) + "._\n"


# --- a block's head line ----------------------------------------------------


def run_summary(extent, reps, runs):
    """A block's 'run' line: what ran, how many reps, what the marks mean."""
    run = [extent]
    if reps:
        run.append("one run" if reps == "1" else "medians of %s runs" % reps)
    if runs.partial:
        run.append("a cell marked (K of N): the median of the K of its N runs "
                   "that gave a number")
    if runs.failed:
        run.append("%d cell%s where no run gave a number ('-')"
                   % (len(runs.failed), "s" * (len(runs.failed) > 1)))
    return "; ".join(run)


# --- a section with a block of its own --------------------------------------


def section_rows(d, name, expected):
    """The start of a section whose tables are a block of their own ('bench
    NAME', from DIR/NAME.csv): (rows, bench.meta, a Runs of its reps,
    None); where there are no rows (None, None, None, the section's
    answer): its block not this run's (no NAME.csv, and not EXPECTED:
    bench.meta does not say the section ran), else an error (no NAME.csv,
    or one with no rows)."""
    rows = read_csv(os.path.join(d, name + ".csv"))
    if not rows:
        if rows is None and not expected:
            return None, None, None, ({"bench " + name: None}, [])
        why = ("no %s.csv in %s" % (name, d) if rows is None
               else "%s.csv has no rows" % name)
        return None, None, None, ({}, ["%s: %s" % (name, why)])
    meta = read_meta(os.path.join(d, "bench.meta"))
    reps = meta.get("reps", "")
    return rows, meta, Runs(int(reps) if reps.isdigit() else None), None


def section_block(name, meta, runs, extent, text):
    """The end of such a section: ({'bench NAME': the stamp line (with the
    run: EXTENT, the reps, what the marks mean) and TEXT}, [the cells none
    of whose runs gave a number])."""
    meta["run"] = run_summary(extent, meta.get("reps", ""), runs)
    return ({"bench " + name: stamp(meta, "contrib/bench.sh") + "\n" + text},
            ["%s: %s" % kv for kv in runs.failed.items()])
