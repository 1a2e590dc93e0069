# SPDX-License-Identifier: BSD-3-Clause
"""tables_gups.py: the random-update table of bench.sh's gups section,
for tables.py.

A file of its own, as tables.py is long; it uses tables_base.py's helpers
and is used only through tables.py ('tables.py gups DIR', and the 'bench
gups' block of 'tables.py bench'). It reads DIR/gups.csv, which bench.sh
writes from the lines of contrib/bench/passive.c ('passive gups') and
passive_shmem.c ('passive_shmem gups'; the bench: contrib/bench/gups.h):

  api,op,target,transport,setting,rep,window,rate,slowdown

a row per phase of a pair: API ucp or shmem; OP xor_post or xor_fetch;
TARGET idle (waiting in the library) or busy (computing, entering it every
10 ms); TRANSPORT syncmem or rc_verbs (UCX_TLS=rc_verbs,ud_verbs);
SETTING default (UCP picks the atomics), cpu (UCX_ATOMIC_MODE=cpu) or, for
syncmem, noguess (UCX_SYNCMEM_AMO_GUESS_WORDS=0: its emulation when its
guesses miss); WINDOW the
updates in flight; RATE updates per second; SLOWDOWN (busy only, else
empty) the target's time for its slices with the updates over that
without; nan where the pair did not measure them.
"""

import os

import tables_base as t

# A whole run: these APIs, and transports with these settings
GUPS_APIS = ["ucp", "shmem"]
GUPS_SETTINGS = {"syncmem": ["default", "cpu", "noguess"],
                 "rc_verbs": ["default", "cpu"]}
SETTING = {"cpu": "cpu", "noguess": "guess 0"}

API = {"ucp": "UCP", "shmem": "OpenSHMEM"}
OP = {"xor_post": "XOR", "xor_fetch": "fetch-XOR"}


def column(tl, setting):
    """A column's name: the transport, and the setting where not default."""
    return tl if setting == "default" else "%s, %s" % (tl, SETTING.get(setting, setting))


def extent(rows):
    """'whole run', or 'partial run (what it lacked)'."""
    have = {(r["api"], r["transport"], r["setting"]) for r in rows}
    lacks = ["%s %s" % (API.get(a, a), column(x, m))
             for a in GUPS_APIS for x, settings in GUPS_SETTINGS.items()
             for m in settings if (a, x, m) not in have]
    return "partial run (no %s)" % ", ".join(lacks) if lacks else "whole run"


def gups_table(rows, runs):
    """Updates per second of each (transport, setting), each row an API's
    operation on an idle or busy target; ratios to rc_verbs with UCP's
    default; a busy target's slowdown."""
    cols = [(x, m) for x in t.ordered(rows, "transport")
            for m in t.ordered(rows, "setting")
            if any(r["transport"] == x and r["setting"] == m for r in rows)]
    ref = (t.REFERENCE, "default")
    others = [c for c in cols if c != ref]
    header = ["operation", "target", "in flight"]
    header += ["%s (updates/s)" % column(*c) for c in cols]
    if ref in cols:
        header += ["%s / %s" % (column(*c), t.REFERENCE) for c in others]
    header += ["slowdown %s" % column(*c) for c in cols]
    out = []
    keys = []
    for r in rows:
        k = (r["api"], r["op"], r["target"])
        if k not in keys:
            keys.append(k)
    for api, op, target in keys:
        mine = [r for r in rows if (r["api"], r["op"], r["target"]) == (api, op, target)]
        windows = sorted({r["window"] for r in mine if r["window"]})
        line = ["%s %s" % (API.get(api, api), OP.get(op, op)), target,
                "/".join(windows) or "-"]
        med = {}
        for c in cols:
            med[c], mark = runs.median(
                "gups: %s %s %s %s" % (api, op, target, column(*c)),
                [r["rate"] for r in mine if (r["transport"], r["setting"]) == c])
            line.append("-" if med[c] is None else t.fmt(med[c]) + mark)
        if ref in cols:
            line += [t.fmt_ratio(t.ratio(med[c], med[ref])) for c in others]
        # (empty for an idle target: no run measures it)
        line += [runs.fmt("gups: %s %s %s %s slowdown" % (api, op, target, column(*c)),
                          [r.get("slowdown", "") for r in mine
                           if (r["transport"], r["setting"]) == c],
                          expect=target == "busy", form="%.2f")
                 for c in cols]
        out.append(line)
    return t.table(header, out)


def blocks(d, expected=True):
    """({'bench gups': text}, [what failed]) from DIR/gups.csv. No gups.csv
    is an error when EXPECTED (bench.meta says the section ran),
    one with no rows always, and so is a cell none of whose runs gave a
    number."""
    rows = t.read_csv(os.path.join(d, "gups.csv"))
    if not rows:
        if rows is None and not expected:
            return {"bench gups": None}, []
        return {}, ["gups: %s" % ("no gups.csv in %s" % d if rows is None
                                  else "gups.csv has no rows")]
    meta = t.read_meta(os.path.join(d, "bench.meta"))
    reps = meta.get("reps", "")
    runs = t.Runs(int(reps) if reps.isdigit() else None)
    text = ("#### Random updates: GUPS-shaped XOR to a remote table\n\n"
            "`contrib/bench/gups.h`: 64-bit XOR to random words of the "
            "target's 8 KiB table (every word non-zero at the start), posted "
            "(then a flush) or fetched, 1024 in flight at once where the API "
            "allows it (OpenSHMEM's fetching atomics block); the "
            "target waits in the library (idle) or computes, entering it "
            "every 10 ms (busy). Updates per second (higher is better), each "
            "the median of the runs; `cpu`: with `UCX_ATOMIC_MODE=cpu` (UCP "
            "does the atomics with active messages and the target's CPU); "
            "`guess 0`: syncmem with `UCX_SYNCMEM_AMO_GUESS_WORDS=0`, its "
            "emulation when its guesses miss (a word last written by "
            "another, a table larger than the guesses'), two round trips an "
            "update; ratios to `rc_verbs` (`UCX_TLS=rc_verbs,ud_verbs`, where "
            "UCP emulates them with active messages by default); slowdown: "
            "the busy target's time "
            "for its slices with the updates over that without (lower is "
            "better).\n\n" + gups_table(rows, runs))
    meta["run"] = t.run_summary(extent(rows), reps, runs)
    return ({"bench gups": t.stamp(meta, "contrib/bench.sh") + "\n" + text},
            ["%s: %s" % kv for kv in runs.failed.items()])
