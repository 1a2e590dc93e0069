# SPDX-License-Identifier: BSD-3-Clause
"""tables_scale.py: the tables of bench.sh's scale section, for tables.py.

It is used only through tables.py ('tables.py scale DIR', the 'bench
scale' block of 'tables.py bench', 'tables.py scale-plot-data DIR OUTDIR')
and uses tables_base.py's helpers. It reads DIR/scale.csv, the rows of
contrib/bench/scale.c (scale -H writes its header):

  transport,n,rep,rss_kb_per_ep,...,note

a row per TRANSPORT (syncmem, syncmem_norc: UCX_SYNCMEM_RECONNECT=n,
rc_verbs), N endpoints and REP; nan and a note (why) where scale.c could
not measure that N; and DIR/scale.info, what the devices allow.
"""

import os
import statistics

from tables_base import (REFERENCE, fmt, fmt_ratio, median, num, ordered,
                         paired_ratio, read_csv, section_block, section_rows,
                         table)

# A whole run of the scale section (contrib/bench/scale.c's rows in
# scale.csv): these transports at these endpoint counts
SCALE_TRANSPORTS = ["syncmem", "syncmem_norc", "rc_verbs"]
SCALE_N = [1, 16, 64, 256, 1024]
# scale.csv's columns, what each table is
SCALE_METRICS = [
    ("rss_kb_per_ep", "Resident memory per endpoint, once all are connected (kB)"),
    ("rss_traffic_kb_per_ep", "Resident memory per endpoint, after the latency "
     "and rate phases (kB)"),
    ("heap_kb_per_ep", "Allocated memory per endpoint (kB; malloc, resident or not)"),
    ("rss_idle_kb_per_ep", "Resident memory per endpoint, after 3 s without "
     "traffic (kB)"),
    ("heap_idle_kb_per_ep", "Allocated memory per endpoint, after 3 s without "
     "traffic (kB)"),
    ("connect_ms", "Time to connect all N: from the first endpoint created to "
     "the first put completed on each (ms)"),
    ("lat_med_us", "Put latency, median (usec; put_short of 8 B and a flush, "
     "each endpoint in turn)"),
    ("lat_p99_us", "Put latency, p99 (usec)"),
    ("rate_ops", "Message rate (put_short of 8 B per second, round-robin over "
     "all N)"),
]
SCALE_PLOT = "scale.png"


def extent(rows):
    """'whole run', or 'partial run (what it lacked)': every transport of
    SCALE_TRANSPORTS at every N of SCALE_N."""
    tls = {r["transport"] for r in rows}
    ns = {int(r["n"]) for r in rows if r["n"].isdigit()}
    lacks = ["no %s" % ", ".join(t for t in SCALE_TRANSPORTS if t not in tls)]
    lacks += ["no N = %s" % ", ".join(str(n) for n in SCALE_N if n not in ns)]
    lacks = [l for l in lacks if not l.endswith("= ") and l != "no "]
    return "partial run (%s)" % "; ".join(lacks) if lacks else "whole run"


def tables(rows, runs):
    """A table per metric: N down, transports across, their medians (a
    cell none of whose runs gave a number is '-', and fails), and the
    ratios to rc_verbs: the median of the reps' own (paired_ratio; a rep
    runs the transports' processes of one N back to back)."""
    tls = ordered(rows, "transport")
    others = [t for t in tls if t != REFERENCE]
    ref = REFERENCE in tls
    header = ["N"] + tls + ["%s / %s" % (t, REFERENCE) for t in others if ref]
    ns = sorted(ordered(rows, "n"), key=lambda n: int(n) if n.isdigit() else 0)
    out = []
    for col, title in SCALE_METRICS:
        lines = []
        for n in ns:
            med, line = {}, [n]
            for t in tls:
                med[t], mark = runs.median(
                    "scale: %s N=%s %s" % (col, n, t),
                    [r[col] for r in rows if r["n"] == n and r["transport"] == t])
                line.append("-" if med[t] is None else fmt(med[t]) + mark)
            if ref:
                mine = [r for r in rows if r["n"] == n]
                for t in others:
                    v, mark = paired_ratio(mine, t, col, runs)
                    line.append(fmt_ratio(v) + ("" if v is None else mark))
            lines.append(line)
        out.append("%s:\n\n%s" % (title, table(header, lines)))
    return "\n".join(out)


def blocks(d, expected=True):
    """({'bench scale': text}, [what failed]) from DIR/scale.csv (with
    bench.meta's run and scale.info's lines: what the devices allow). No
    scale.csv is an error when EXPECTED, one with no rows always; so is a
    cell none of whose runs gave a number. Rows with a nan are listed with
    their notes (why)."""
    rows, meta, runs, answer = section_rows(d, "scale", expected)
    if rows is None:
        return answer
    text = ("#### Endpoints per worker: memory, connection time, latency "
            "and rate\n\n"
            "One worker's iface connects N endpoints to a peer iface (on the "
            "same port in bench.sh's guest; `contrib/bench/scale.c`, each N in "
            "a process of its own); the peer is in the same process, so memory "
            "is that of both ends of each connection. `syncmem_norc`: "
            "`UCX_SYNCMEM_RECONNECT=n`. Medians; ratios are transport / "
            "rc_verbs: the median of the runs' ratios, each of processes run "
            "one after the other, each pinned to one vCPU (unpinned, a "
            "process's latency falls in one of two modes about 1.5x apart, by "
            "where the scheduler puts it).\n\n" + tables(rows, runs) +
            "\n![memory per endpoint against N](plots/%s)\n" % SCALE_PLOT)
    bad = [r for r in rows if any(num(r.get(c)) is None for c, _ in SCALE_METRICS)]
    if bad:
        text += ("\nNot measured (nan in scale.csv), and why:\n\n" +
                 "".join("- %s, N = %s, rep %s: %s\n"
                         % (r["transport"], r["n"], r.get("rep") or "1",
                            r.get("note") or "no reason given") for r in bad))
    info = os.path.join(d, "scale.info")
    if os.path.exists(info):
        with open(info) as f:
            lines = [l.strip().lstrip("# ") for l in f if l.strip()]
        if lines:
            text += ("\nWhat the devices allow (`ibv_query_device`): %s.\n"
                     % "; ".join(lines))
    return section_block("scale", meta, runs, extent(rows), text)


def plot_data(d, outdir):
    """Writes OUTDIR/scale-data.TRANSPORT for gnuplot from DIR/scale.csv:
    'N median lowest highest' of the resident kB per endpoint, then the
    median malloc'd kB (NaN: none), a line per N that has a median above 0
    (the plot's scale is logarithmic); ([transports], [what failed])."""
    rows = read_csv(os.path.join(d, "scale.csv"))
    if not rows:
        return [], ["no scale.csv with rows in %s" % d]
    tls = []
    for t in ordered(rows, "transport"):
        lines = []
        for n in sorted(ordered(rows, "n"), key=lambda n: int(n) if n.isdigit() else 0):
            mine = [r for r in rows if r["n"] == n and r["transport"] == t]
            rss = [x for x in (num(r["rss_kb_per_ep"]) for r in mine) if x is not None]
            heap = median(num(r["heap_kb_per_ep"]) for r in mine)
            if rss and statistics.median(rss) > 0:
                lines.append("%s %g %g %g %s\n" % (
                    n, statistics.median(rss), min(rss), max(rss),
                    "%g" % heap if heap is not None and heap > 0 else "NaN"))
        if lines:
            with open(os.path.join(outdir, "scale-data.%s" % t), "w") as f:
                f.writelines(lines)
            tls.append(t)
    return tls, [] if tls else ["scale.csv in %s has no number to plot" % d]

