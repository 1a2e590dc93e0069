#!/bin/sh
#
# gen-manpage.sh: fill the SETTINGS section of the man page from the
# module's configuration table, as the UCX it was built for prints it.
#
#   contrib/tools/gen-manpage.sh SYNCMEM-RUN < doc/uct_syncmem.7.in > uct_syncmem.7
#
# Runs 'SYNCMEM-RUN ucx_info -c -f' (the module loaded into ucx_info) and
# turns every UCX_SYNCMEM_* block (its documentation, syntax and default)
# into a man page entry in place of the line @SETTINGS@: syncmem's own
# settings first (RC_TIMEOUT and RC_RETRY_COUNT among them, which inherit
# UCX's UCX_RC_*), then those every UCX transport has (the others ucx_info
# says inherit a global UCX_* setting). So the man page lists exactly what
# the table holds and cannot drift from it. The environment is cleared of
# UCX_* settings first, so that ucx_info prints the defaults (a
# UCX_SYNCMEM_* line in the build machine's /etc/ucx/ucx.conf would still
# show; UCX 1.13 has no way to skip that file). Fails if
# ucx_info lists no UCX_SYNCMEM_* setting (the module did not load).
#
# SPDX-License-Identifier: BSD-3-Clause
set -e
case "$1" in -h|--help) sed -n '3,18s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
run=${1:?usage: gen-manpage.sh SYNCMEM-RUN < TEMPLATE > MANPAGE}

tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.own" "$tmp.common"' EXIT
# (env -i: no UCX_* from the caller; PATH for the tools, LD_LIBRARY_PATH
# for a UCX in its own prefix, ASAN_OPTIONS for a module built with ASan)
env -i PATH="$PATH" ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH="$LD_LIBRARY_PATH"} \
    ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} \
    "$run" ucx_info -c -f > "$tmp" 2>&1 || {
    echo "gen-manpage.sh: '$run ucx_info -c -f' failed:" >&2
    cat "$tmp" >&2; exit 1; }

# Each block: "#" lines (documentation, then "syntax:" and "inherits:"),
# then NAME=VALUE. Troff: a leading "." or "'" is escaped, "\" becomes "\e",
# indented lines (a list) are kept as they are (no fill).
awk -v own="$tmp.own" -v common="$tmp.common" '
function esc(s) {
    gsub(/\\/, "\\e", s)
    gsub(/-/, "\\-", s)
    if (s ~ /^[.\047]/) s = "\\&" s
    return s
}
/^#/ {
    l = $0; sub(/^# ?/, "", l)
    if (l ~ /^syntax: */)   { sub(/^syntax: */, "", l); syntax = l; next }
    if (l ~ /^inherits: */) { sub(/^inherits: */, "", l); inherits = l; next }
    doc[n++] = l; next
}
/^UCX_SYNCMEM_[A-Z0-9_]*=/ {
    name = $0; sub(/=.*/, "", name)
    value = substr($0, length(name) + 2)
    # (RC_TIMEOUT and RC_RETRY_COUNT inherit the rc transports settings,
    # UCX_RC_*: they are syncmem settings, not what every transport has)
    out = (inherits == "" || inherits ~ /^UCX_RC_/) ? own : common
    printf ".TP\n.B %s=%s\n", name, esc(value) > out
    started = 0; nofill = 0
    for (i = 0; i < n; ++i) {
        if (doc[i] == "" && !started) continue
        started = 1
        if (doc[i] ~ /^ / && !nofill)  { print ".nf" > out; nofill = 1 }
        if (doc[i] !~ /^ / && nofill) { print ".fi" > out; nofill = 0 }
        if (doc[i] != "") print esc(doc[i]) > out
    }
    if (nofill) print ".fi" > out
    print ".br\nSyntax: " esc(syntax) "." > out
    if (inherits != "")
        print "Unset, it takes the value of \\fB" inherits "\\fR." > out
    ++count
}
!/^#/ { n = 0; syntax = ""; inherits = "" }
END { if (count == 0) exit 1 }
' "$tmp" || {
    echo "gen-manpage.sh: '$run ucx_info -c -f' lists no UCX_SYNCMEM_* setting: the module did not load into ucx_info" >&2
    exit 1; }

while IFS= read -r line; do
    if [ "$line" = "@SETTINGS@" ]; then
        echo ".SS Settings of syncmem"
        cat "$tmp.own"
        echo ".SS Settings every UCX transport and memory domain has"
        echo "Each of these, unset, takes the global UCX setting of the same name."
        cat "$tmp.common"
    else
        printf '%s\n' "$line"
    fi
done
