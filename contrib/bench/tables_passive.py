# SPDX-License-Identifier: BSD-3-Clause
"""tables_passive.py: the table of bench.sh's passive section, for
tables.py.

passive.csv (api,op,slice_ms,transport,rep,median_us,p99_us,slowdown,
compute): the origin's latency of atomics while the target computes in
slices (contrib/bench/passive.c, passive_mpi.c, passive_shmem.c), a row
per phase of a pair; tables.py's bench_blocks puts the table into the
'bench tables' block. On tables_base.py's helpers.
"""

from tables_base import REFERENCE, fmt_ratio, median, num, ordered, ratio, table

API = {"ucp": "UCP", "mpi": "MPI", "shmem": "OpenSHMEM"}
OP = {"fadd": "fetch-add", "cswap": "compare-swap", "swap": "swap"}


def passive_table(rows, runs):
    """Origin latency of atomics while the target computes in slices. (A
    pair that failed wrote no row: each transport should have every phase
    the others have, reps times.)"""
    tls = ordered(rows, "transport")
    others = [t for t in tls if t != REFERENCE]
    ref = REFERENCE in tls
    header = ["operation", "target slice"]
    header += ["median %s (usec)" % t for t in tls]
    header += ["/ %s" % REFERENCE for t in others if ref]
    header += ["p99 %s" % t for t in tls]
    header += ["/ %s" % REFERENCE for t in others if ref]
    header += ["slowdown %s" % t for t in tls]
    out = []
    keys = []
    for r in rows:
        k = (r["api"], r["slice_ms"], r["op"])
        if k not in keys:
            keys.append(k)
    for api, sl, op in keys:
        def vals(t, col):
            return [r[col] for r in rows
                    if (r["api"], r["slice_ms"], r["op"], r["transport"])
                    == (api, sl, op, t)]

        def m(t, col):
            return median(num(v) for v in vals(t, col))
        name = "passive: %s %s %s ms" % (api, op, sl)
        line = ["%s %s" % (API.get(api, api), OP.get(op, op)), "%s ms" % sl]
        line += [runs.fmt("%s %s" % (name, t), vals(t, "median_us")) for t in tls]
        if ref:
            line += [fmt_ratio(ratio(m(t, "median_us"), m(REFERENCE, "median_us")), 3)
                     for t in others]
        line += [runs.fmt("%s %s p99" % (name, t), vals(t, "p99_us")) for t in tls]
        if ref:
            line += [fmt_ratio(ratio(m(t, "p99_us"), m(REFERENCE, "p99_us")), 3)
                     for t in others]
        # (empty where the target does not compute, slice 0: no run)
        line += [runs.fmt("%s %s slowdown" % (name, t), vals(t, "slowdown"),
                          expect=sl != "0", form="%.3f") for t in tls]
        out.append(line)
    return table(header, out)

