# SPDX-License-Identifier: BSD-3-Clause
"""tables_perftest.py: the tables of bench.sh's ucx_perftest sections, for
tables.py.

The main table (ucx_perftest pairs, UCT and UCP level, and rdma-core's
perftest as raw verbs: results.csv) and the README's summary of it;
callgrind's instructions per call (callgrind.csv, and the counting of one
callgrind output file, callgrind.sh's row); one registration's cost
(regcost.txt) and UCP put bandwidth with the registration cache on and off
(rcache.csv); the message-size sweep (sweep.csv) and its plots' data and
title. Each function makes a table or a file from rows tables.py read; its
bench_blocks puts them into the 'bench tables', 'bench callgrind' and
'bench summary' blocks. On tables_base.py's helpers.
"""

import os
import re
import statistics

from tables_base import (REFERENCE, fmt, fmt_ratio, num, ordered, ratio,
                         read_csv, read_meta, size_name, table)

# What each test of the main table is (bench.sh's names)
TESTS = {
    "put_lat": "put latency, 8 B short (usec)",
    "put_bw_64k_zcopy": "put bandwidth, 64 KiB zcopy (MB/s)",
    "get_64k_zcopy": "get bandwidth, 64 KiB zcopy (MB/s)",
    "put_mr_8b": "put message rate, 8 B short (msg/s)",
    "put_mr_8b_db16": "put message rate, 8 B short, batch 16 (msg/s)",
    "am_mr_8b": "AM message rate, 8 B short (msg/s)",
    "am_mr_8b_db16": "AM message rate, 8 B short, batch 16 (msg/s)",
    "add_mr": "atomic add message rate (msg/s)",
    "add_mr_db16": "atomic add message rate, batch 16 (msg/s)",
    "put_bw_4k_bcopy": "put bandwidth, 4 KiB bcopy (MB/s)",
    "get_4k_bcopy": "get bandwidth, 4 KiB bcopy (MB/s)",
    "am_lat": "AM latency, 8 B short (usec)",
    "am_bw_4k_bcopy": "AM bandwidth, 4 KiB bcopy (MB/s)",
    "am_bw_8k_zcopy": "AM bandwidth, 8 KiB zcopy (MB/s)",
    "add_lat": "atomic add latency (usec)",
    "fadd": "atomic fetch-add latency (usec)",
    "cswap": "atomic cswap latency (usec)",
    "ucp_put_lat": "UCP put latency, 8 B (usec)",
    "ucp_put_bw_64k": "UCP put bandwidth, 64 KiB (MB/s)",
    "ucp_get_64k": "UCP get bandwidth, 64 KiB (MB/s)",
    "ucp_fadd": "UCP fetch-add latency (usec)",
    "ucp_cswap": "UCP cswap latency (usec)",
    "tag_lat": "UCP tag latency, 8 B (usec)",
    "tag_bw_1m": "UCP tag bandwidth, 1 MiB (MB/s)",
}

# The README's one table: these rows of the main table, where measured
SUMMARY = ["put_lat", "put_bw_64k_zcopy", "get_64k_zcopy", "put_mr_8b",
           "am_lat", "am_bw_4k_bcopy", "fadd", "ucp_put_lat",
           "ucp_put_bw_64k", "ucp_fadd", "ucp_cswap", "tag_lat", "tag_bw_1m"]


def is_raw(transport):
    """rdma-core perftest tools (ib_write_bw, ...): the raw verbs column."""
    return transport.startswith("ib_")


def main_table(rows, runs, only=None):
    """bench.sh's main table: medians per test and transport, ratios of
    each transport to rc_verbs and of syncmem to raw verbs. Every transport
    runs every test, a raw verbs tool only some."""
    tls = [t for t in ordered(rows, "transport") if not is_raw(t)]
    others = [t for t in tls if t != REFERENCE]
    med, text = {}, {}
    for test in ordered(rows, "test"):
        for t in ordered(rows, "transport"):
            vals = [r["value"] for r in rows
                    if r["test"] == test and r["transport"] == t]
            if is_raw(t) and not vals:
                continue
            key = (test, "raw verbs" if is_raw(t) else t)
            med[key], mark = runs.median("main: %s %s" % (test, t), vals,
                                         expect=not is_raw(t))
            text[key] = "-" if med[key] is None else fmt(med[key]) + mark
    header = ["test"] + tls + ["raw verbs"]
    header += ["%s / %s" % (t, REFERENCE) for t in others if REFERENCE in tls]
    header += ["%s / raw verbs" % t for t in others[:1]]
    out = []
    for test in ordered(rows, "test"):
        if only is not None and test not in only:
            continue
        line = [TESTS.get(test, test)]
        line += [text.get((test, t), "-") for t in tls + ["raw verbs"]]
        if REFERENCE in tls:
            line += [fmt_ratio(ratio(med.get((test, t)), med.get((test, REFERENCE))))
                     for t in others]
        line += [fmt_ratio(ratio(med.get((test, t)), med.get((test, "raw verbs"))))
                 for t in others[:1]]
        out.append(line)
    if only is not None:
        order = {TESTS.get(t, t): i for i, t in enumerate(only)}
        out.sort(key=lambda l: order.get(l[0], 0))
    return table(header, out)


def callgrind_tables(rows, runs):
    """Instructions per call of each operation, per transport: all of them
    (the provider and libc below included) and the transport's own library
    alone; each with its ratios to rc_verbs. Two tables. (One run a cell,
    whatever the reps: a row of nan, or of 0 calls, is a run that failed.)"""
    tls = ordered(rows, "transport")
    others = [t for t in tls if t != REFERENCE]
    ref = REFERENCE in tls
    out = []
    for col in ("instructions", "own_instructions"):
        per, text = {}, {}
        for op in ordered(rows, "op"):
            for t in tls:
                vals = [ratio(num(r[col]), num(r["calls"])) for r in rows
                        if r["op"] == op and r["transport"] == t]
                per[op, t], mark = runs.median("callgrind: %s %s" % (op, t),
                                               vals, expect=False)
                text[op, t] = "-" if per[op, t] is None else \
                    "%.0f" % per[op, t] + mark
        header = ["operation"] + tls
        header += ["%s / %s" % (t, REFERENCE) for t in others if ref]
        lines = []
        for op in ordered(rows, "op"):
            line = [op] + [text[op, t] for t in tls]
            if ref:
                line += [fmt_ratio(ratio(per[op, t], per[op, REFERENCE]))
                         for t in others]
            lines.append(line)
        out.append(table(header, lines))
    return out


def callgrind_count(path, function, own):
    """(calls, total, own) of callgrind output PATH: the calls of FUNCTION
    and of its variants (names that start with it), all instructions
    collected (callgrind collected only inside FUNCTION), and those in an
    object whose name contains OWN (the transport's library). Names are
    compressed: "(12) name" defines id 12, a later "(12)" refers to it; ob
    and cob share one id space, fn and cfn another. A cost line is the
    positions ("positions:", line alone by default) then the costs, the
    first one instructions; one right after "calls=" is the inclusive cost
    of that call, not counted again."""
    names = {}

    def name(space, s):
        i = re.sub(r"\).*", "", s[1:] if s.startswith("(") else s)
        if re.search(r"\) ", s):
            names[space, i] = re.sub(r"^\([0-9]+\) ", "", s)
        return names.get((space, i), "")

    calls = total = mine = 0
    npos = 1
    ob = called = ""
    skip = False
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("positions:"):
                npos = len(line.split()) - 1
            elif line.startswith("summary:"):
                total = int(line.split()[1])
            elif line.startswith("ob="):
                ob = name("o", line[3:])
            elif line.startswith("cob="):
                name("o", line[4:])
            elif line.startswith("fn="):
                name("f", line[3:])
            elif line.startswith("cfn="):
                called = name("f", line[4:])
            elif line.startswith("calls="):
                if called.startswith(function):
                    calls += int(re.split(r"[= ]", line)[1])
                skip = True
            elif line[:1] and line[0] in "0123456789+*-":
                if skip:
                    skip = False
                elif own in ob and len(line.split()) > npos:
                    mine += int(line.split()[npos])
    return calls, total, mine



REGCOST_COLUMNS = (("register", "register, cache off (usec)"),
                   ("cache hit", "cache hit (usec)"),
                   ("hit and pack", "hit + mkey_pack (usec)"),
                   ("hit and pack for invalidation",
                    "hit + mkey_pack for invalidation (usec)"),
                   ("invalidating dereg",
                    "... + invalidating dereg (usec)"))


def regcost_table(path, runs):
    """regcost's output: bytes, register_us, cache_hit_us, then (since the
    md packs keys for invalidation) hit_pack_us, hit_inv_us, inv_dereg_us
    a line ('' if it has no such line)."""
    out, ncols = [], 0
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) in (3, 6) and w[0].isdigit():
                ncols = max(ncols, len(w) - 1)
                out.append([size_name(w[0])] + [
                    runs.fmt("regcost: %s %s" % (size_name(w[0]), what), [v],
                             expect=False)
                    for (what, _), v in zip(REGCOST_COLUMNS, w[1:])])
    if not out:
        return ""
    return table(["bytes"] + [h for _, h in REGCOST_COLUMNS[:ncols]],
                 [row + ["-"] * (ncols + 1 - len(row)) for row in out])


def rcache_table(rows, runs):
    out = []
    for size in ordered(rows, "size"):
        m, text = {}, {}
        for rc in ("y", "n"):
            m[rc], mark = runs.median(
                "rcache: %s rcache=%s" % (size_name(size), rc),
                [r["MBps"] for r in rows if r["size"] == size and r["rcache"] == rc])
            text[rc] = "-" if m[rc] is None else fmt(m[rc]) + mark
        out.append([size_name(size), text["y"], text["n"],
                    fmt_ratio(ratio(m["y"], m["n"]))])
    return table(["bytes", "UCP put MB/s, cache on", "cache off", "on / off"], out)


# bench.sh measures the sweep's latency up to this size; it writes nan above
SWEEP_LAT_MAX = 4096


def sweep_table(rows, runs):
    tls = ordered(rows, "transport")
    header = ["bytes"] + ["put MB/s %s" % t for t in tls] + \
        ["put usec %s" % t for t in tls]
    # (a sweep.csv of before the reps has no rep column: one run a cell)
    reps = "rep" in rows[0]
    out = []
    for size in ordered(rows, "size"):
        def cell(t, col):
            vals = [r[col] for r in rows if r["size"] == size and r["transport"] == t]
            unmeasured = col == "put_lat_us" and int(size) > SWEEP_LAT_MAX
            return runs.fmt("sweep: %s %s %s" % (size_name(size), t, col),
                            [] if unmeasured else vals,
                            expect=reps and not unmeasured)
        out.append([size_name(size)] + [cell(t, "put_bw_MBps") for t in tls] +
                   [cell(t, "put_lat_us") for t in tls])
    return table(header, out)


# The plots' files: (sweep.csv column, file prefix for plot-data, image)
PLOTS = [("put_bw_MBps", "bw", "bandwidth.png"), ("put_lat_us", "lat", "latency.png")]


def plot_data(d, outdir):
    """Writes OUTDIR/bw.TRANSPORT and lat.TRANSPORT for gnuplot from
    DIR/sweep.csv: 'size median lowest highest' of the reps' numbers, a
    line per size that has one; [what failed]."""
    rows = read_csv(os.path.join(d, "sweep.csv"))
    if not rows:
        return ["no sweep.csv with rows in %s" % d]
    points = 0
    for col, prefix, _ in PLOTS:
        for t in ordered(rows, "transport"):
            with open(os.path.join(outdir, "%s.%s" % (prefix, t)), "w") as f:
                for size in ordered(rows, "size"):
                    v = [x for x in (num(r[col]) for r in rows
                                     if r["size"] == size and r["transport"] == t)
                         if x is not None]
                    if v:
                        f.write("%s %g %g %g\n" % (size, statistics.median(v),
                                                     min(v), max(v)))
                        points += 1
    return [] if points else ["sweep.csv in %s has no number to plot" % d]


def plot_title(d):
    """The plots' second title line: the run, and what a point is."""
    meta = read_meta(os.path.join(d, "bench.meta"))
    reps = meta.get("reps", "1")
    # (two lines for gnuplot: the '\\n' is its newline)
    return ("run %s, commit %s, kernel %s, UCX %s\\n"
            "each point the median of %s runs, its bar from the lowest to the highest"
            % (meta.get("date", "?"), meta.get("commit", "?"),
               meta.get("kernel", "?"), meta.get("ucx", "?"), reps))
