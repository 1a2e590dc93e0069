# SPDX-License-Identifier: BSD-3-Clause
"""tables_tag_bw.py: the table of bench.sh's ucp_tag_bw section, for
tables.py.

A module of its own, as each section's tables are; it uses tables_base.py's
helpers and is used only through tables.py ('tables.py ucp_tag_bw DIR',
and the 'bench ucp_tag_bw' block of 'tables.py bench'). It reads
DIR/ucp_tag_bw.csv, which bench.sh writes from contrib/bench/ucp_tag_bw.c's
lines:

  transport,size,mode,rep,MBps,note

a row per run: TRANSPORT syncmem (UCX_TLS=syncmem) or rc_verbs
(UCX_TLS=rc_verbs,ud_verbs), SIZE bytes a message, MODE the endpoints'
error handling (none or peer), MBps the sender's bandwidth (10^6 bytes a
second); nan and a note (why) where the run failed.
"""

from tables_base import (REFERENCE, fmt, fmt_ratio, num, ordered, ratio,
                         section_block, section_rows, size_name, table)

# A whole run of the section: these transports, modes and sizes
TAG_BW_TRANSPORTS = ["syncmem", "rc_verbs"]
TAG_BW_MODES = ["none", "peer"]
TAG_BW_SIZES = [1048576, 16777216]


def extent(rows):
    """'whole run', or 'partial run (what it lacked)': every transport of
    TAG_BW_TRANSPORTS in every mode of TAG_BW_MODES at every size of
    TAG_BW_SIZES."""
    have = {(r["transport"], r["mode"], r["size"]) for r in rows}
    lacks = ["%s %s %s" % (t, m, size_name(s)) for s in TAG_BW_SIZES
             for m in TAG_BW_MODES for t in TAG_BW_TRANSPORTS
             if (t, m, str(s)) not in have]
    return "partial run (no %s)" % ", ".join(lacks) if lacks else "whole run"


def bw_table(rows, runs):
    """A line per size and mode: the medians of each transport's runs (MB/s)
    and the ratios of the others to rc_verbs."""
    tls = ordered(rows, "transport")
    others = [t for t in tls if t != REFERENCE]
    ref = REFERENCE in tls
    header = ["message", "error handling"] + ["%s (MB/s)" % t for t in tls]
    header += ["%s / %s" % (t, REFERENCE) for t in others if ref]
    sizes = sorted(ordered(rows, "size"), key=lambda s: int(s) if s.isdigit() else 0)
    out = []
    for size in sizes:
        for mode in ordered(rows, "mode"):
            mine = [r for r in rows if r["size"] == size and r["mode"] == mode]
            if not mine:
                continue
            med, line = {}, [size_name(size), mode]
            for t in tls:
                med[t], mark = runs.median(
                    "ucp_tag_bw: %s %s %s" % (size_name(size), mode, t),
                    [r["MBps"] for r in mine if r["transport"] == t])
                line.append("-" if med[t] is None else fmt(med[t]) + mark)
            if ref:
                line += [fmt_ratio(ratio(med[t], med[REFERENCE])) for t in others]
            out.append(line)
    return table(header, out)


def blocks(d, expected=True):
    """({'bench ucp_tag_bw': text}, [what failed]) from DIR/ucp_tag_bw.csv.
    No ucp_tag_bw.csv is an error when EXPECTED (bench.meta says the
    section ran), one with no rows always, and so is a cell none of whose
    runs gave a number; rows of nan are listed with their notes."""
    rows, meta, runs, answer = section_rows(d, "ucp_tag_bw", expected)
    if rows is None:
        return answer
    text = ("#### UCP tag bandwidth, with and without peer error handling\n\n"
            "Two processes on the guest's device (`contrib/bench/ucp_tag_bw.c`): "
            "the sender keeps 4 tagged messages in flight, the receiver "
            "checks every byte; the endpoints' error handling mode is `none` "
            "or `peer` (`UCP_ERR_HANDLING_MODE_PEER`). `syncmem` is "
            "`UCX_TLS=syncmem`, `rc_verbs` `UCX_TLS=rc_verbs,ud_verbs`. "
            "Medians of the runs in MB/s (10^6 bytes a second, higher is "
            "better); ratios are transport / rc_verbs.\n\n" + bw_table(rows, runs))
    bad = [r for r in rows if num(r.get("MBps")) is None]
    if bad:
        text += ("\nNot measured (nan in ucp_tag_bw.csv), and why:\n\n" +
                 "".join("- %s, %s, %s, rep %s: %s\n"
                         % (r["transport"], size_name(r["size"]), r["mode"],
                            r.get("rep") or "1", r.get("note") or "no reason given")
                         for r in bad))
    return section_block("ucp_tag_bw", meta, runs, extent(rows), text)
