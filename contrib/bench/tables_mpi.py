# SPDX-License-Identifier: BSD-3-Clause
"""tables_mpi.py: the tables of bench.sh's mpi_scale section, for tables.py.

A module of its own, as each section's tables are; it uses tables_base.py's
helpers (the medians, the marks of runs that gave no number, the stamp
line) and is used only through tables.py ('tables.py mpi_scale DIR', and
the 'bench mpi_scale' block of 'tables.py bench'). It reads DIR/mpi_scale.csv, which bench.sh
writes from contrib/bench/mpi_scale.c's lines:

  transport,np,rep,op,unit,median,max,note

a row per Open MPI job (TRANSPORT: syncmem or rc_verbs, meaning
UCX_TLS=rc_verbs,ud_verbs; NP ranks; REP) and op: MEDIAN and MAX are the
median and the largest across the job's ranks of each rank's number (a
time: the median of its calls, in usec; memory: its VmRSS or VmHWM in
kB); nan and a note (why) where the job could not measure it. And rows
of the job as a whole (COUNTS), MEDIAN and MAX both its number: how much
rxe's counters grew over it (rxe0 and rxe1 summed; unit packets or
count), and syncmem's QPs taken for stalled and reconnects (count).
"""

import os

import tables_base as t

# A whole run of the section: these transports at these rank counts
MPI_SCALE_TRANSPORTS = ["syncmem", "rc_verbs"]
MPI_SCALE_NP = [4, 8, 16]

# What each op is; ops not named here keep their own name, in the order
# mpi_scale.csv has them
OPS = {
    "alltoall_8": "MPI_Alltoall, 8 B a pair",
    "alltoall_1024": "MPI_Alltoall, 1 KiB a pair",
    "alltoall_16384": "MPI_Alltoall, 16 KiB a pair",
    "fetch_and_op": "MPI_Fetch_and_op + MPI_Win_flush",
    "rss_init": "resident after MPI_Init",
    "rss_end": "resident after the tests",
    "hwm_end": "peak resident (VmHWM)",
}


# The job's counts (rows whose MEDIAN and MAX are the job's one number),
# in the order of their columns: (op, its column, how the reps are
# summed up: 'median' the median of the reps and their largest, 'sum'
# their sum). stalled_qps and reconnects are syncmem's only: rc_verbs has
# no rows of them ('n/a').
COUNTS = [
    ("send_err", "send_err (packets)", "median"),
    ("completer_retry_err", "retransmissions", "median"),
    ("retry_exceeded_err", "retries exhausted", "sum"),
    ("retry_rnr_exceeded_err", "RNR retries exhausted", "sum"),
    ("stalled_qps", "QPs taken for stalled", "sum"),
    ("reconnects", "reconnects", "sum"),
]


def extent(rows):
    """'whole run', or 'partial run (what it lacked)': every transport of
    MPI_SCALE_TRANSPORTS at every rank count of MPI_SCALE_NP."""
    tls = {r["transport"] for r in rows}
    nps = {int(r["np"]) for r in rows if r["np"].isdigit()}
    lacks = []
    if any(x not in tls for x in MPI_SCALE_TRANSPORTS):
        lacks.append("no " + ", ".join(x for x in MPI_SCALE_TRANSPORTS if x not in tls))
    if any(n not in nps for n in MPI_SCALE_NP):
        lacks.append("no np = " + ", ".join(str(n) for n in MPI_SCALE_NP if n not in nps))
    return "partial run (%s)" % "; ".join(lacks) if lacks else "whole run"


def op_table(rows, runs, unit):
    """The ops of UNIT (us or kB), each at every rank count: the medians of
    the runs' rank medians and of their largest ranks, per transport, and
    the ratios of the others to rc_verbs (tables_base.paired_ratio)."""
    tls = t.ordered(rows, "transport")
    others = [x for x in tls if x != t.REFERENCE]
    ref = t.REFERENCE in tls
    what = {"us": ("median rank", "slowest rank"), "kB": ("median rank", "largest rank")}
    header = ["operation", "ranks"]
    for col, name in zip(("median", "max"), what.get(unit, ("median", "max"))):
        header += ["%s %s" % (name, x) for x in tls]
        header += ["%s / %s" % (x, t.REFERENCE) for x in others if ref]
    ops = [o for o in t.ordered(rows, "op") if any(r["op"] == o and r["unit"] == unit
                                                  for r in rows)]
    nps = sorted(t.ordered(rows, "np"), key=lambda n: int(n) if n.isdigit() else 0)
    out = []
    for op in ops:
        for n in nps:
            mine = [r for r in rows if r["op"] == op and r["np"] == n]
            if not mine:
                continue
            line = [OPS.get(op, op), n]
            for col in ("median", "max"):
                med = {}
                for x in tls:
                    med[x], mark = runs.median(
                        "mpi_scale: %s np=%s %s %s" % (op, n, x, col),
                        [r[col] for r in mine if r["transport"] == x])
                    line.append("-" if med[x] is None else t.fmt(med[x]) + mark)
                if ref:
                    for x in others:
                        v, mark = t.paired_ratio(mine, x, col, runs)
                        line.append(t.fmt_ratio(v) + ("" if v is None else mark))
            out.append(line)
    return t.table(header, out) if out else ""


def fmt_count(v):
    """A count, or the median of an even number of them: '3', '4.5'."""
    return "%d" % v if v == int(v) else "%.1f" % v


def count_table(rows, runs):
    """The jobs' counts (COUNTS), a row per transport and rank count: of
    each 'median' count the median of the runs and the largest; of each
    'sum' count the sum over the runs (marked (K of N) where only K gave a
    number). A transport with no rows of a count: 'n/a'."""
    cols = [c for c in COUNTS if any(r["op"] == c[0] for r in rows)]
    if not cols:
        return ""
    header = ["transport", "ranks"]
    for op, name, how in cols:
        header += ["%s, median" % name, "%s, max" % name] if how == "median" \
            else ["%s (sum)" % name]
    tls = t.ordered(rows, "transport")
    nps = sorted(t.ordered(rows, "np"), key=lambda n: int(n) if n.isdigit() else 0)
    out = []
    for x in tls:
        for n in nps:
            mine = [r for r in rows if r["transport"] == x and r["np"] == n]
            if not any(r["op"] == c[0] for r in mine for c in cols):
                continue
            line = [x, n]
            for op, name, how in cols:
                vals = [r["median"] for r in mine if r["op"] == op]
                if not vals:
                    line += ["n/a"] * (2 if how == "median" else 1)
                    continue
                med, mark = runs.median("mpi_scale: %s np=%s %s" % (op, n, x), vals)
                got = [v for v in map(t.num, vals) if v is not None]
                if med is None:
                    line += ["-"] * (2 if how == "median" else 1)
                elif how == "median":
                    line += [fmt_count(med) + mark, fmt_count(max(got)) + mark]
                else:
                    line.append(fmt_count(sum(got)) + mark)
            out.append(line)
    return t.table(header, out) if out else ""


def blocks(d, expected=True):
    """({'bench mpi_scale': text}, [what failed]) from DIR/mpi_scale.csv
    (and mpi_scale.info: where the ranks ran). No mpi_scale.csv is an error
    when EXPECTED (bench.meta says the section ran), one with no rows
    always, and so is a cell none of whose runs gave a number; rows of nan
    are listed with their notes."""
    rows, meta, runs, answer = t.section_rows(d, "mpi_scale", expected)
    if rows is None:
        return answer
    where = ""
    info = os.path.join(d, "mpi_scale.info")
    if os.path.exists(info):
        with open(info) as f:
            where = "; ".join(l.strip() for l in f if l.strip())
    text = ("#### MPI over many endpoints: all-to-all, fetch-and-op, memory "
            "per rank\n\n"
            "Open MPI jobs (`pml ucx`, `osc ucx`; `contrib/bench/mpi_scale.c`), "
            "ranks oversubscribed on the guest's 2 vCPUs%s; `syncmem` is "
            "`UCX_TLS=syncmem`, `rc_verbs` `UCX_TLS=rc_verbs,ud_verbs`. Per "
            "rank the median of its calls; median rank and slowest (largest) "
            "rank across the job's ranks, each the median of the runs; "
            "ratios are transport / rc_verbs: the median of the runs' ratios, "
            "each of two jobs run one after the other (the guest's speed "
            "drifts over minutes, between modes about 2x apart).\n\n" % (" (%s)" % where if where else ""))
    times, mem = op_table(rows, runs, "us"), op_table(rows, runs, "kB")
    if times:
        text += "Time per call (usec):\n\n" + times
    if mem:
        text += "\nMemory per rank (kB):\n\n" + mem
    counts = count_table(rows, runs)
    if counts:
        text += ("\nThe wire and syncmem's recoveries per job: how much rxe's "
                 "counters grew over the job (rxe0 and rxe1 summed; `send_err`: "
                 "packets rxe could not hand to the netdev, retransmissions: "
                 "`completer_retry_err`, retries exhausted: `retry_exceeded_err`, "
                 "`retry_rnr_exceeded_err`), and syncmem's QPs taken for stalled "
                 "and reconnects, counted in the job's output "
                 "(`UCX_LOG_LEVEL=diag`; n/a for rc_verbs, which has neither). "
                 "Median and largest of the runs, or their sum:\n\n" + counts)
    # (a job's ops that failed for one reason, on one line)
    bad = {}
    for r in rows:
        if t.num(r.get("median")) is None or t.num(r.get("max")) is None:
            bad.setdefault((r["transport"], r["np"], r.get("rep") or "1",
                            r.get("note") or "no reason given"), []).append(r["op"])
    if bad:
        text += ("\nNot measured (nan in mpi_scale.csv), and why:\n\n" +
                 "".join("- %s, np = %s, rep %s, %s: %s\n" % (x, n, rep, ", ".join(ops), why)
                         for (x, n, rep, why), ops in bad.items()))
    return t.section_block("mpi_scale", meta, runs, extent(rows), text)
