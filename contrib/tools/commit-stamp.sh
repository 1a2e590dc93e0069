#!/bin/sh
#
# commit-stamp.sh: the commit a measurement is of, for the stamp of the
# tables the benches generate: the short hash, with -dirty when the tree
# differs from it in anything but those tables themselves (doc/benchmarks.md,
# doc/plots/, README.md), which a run of several sections rewrites as it
# goes; "unknown" outside a git tree.
#
#   contrib/tools/commit-stamp.sh
#
# SPDX-License-Identifier: BSD-3-Clause
top=$(cd "$(dirname "$0")/../.." && pwd)
git() { command git -C "$top" --no-optional-locks "$@"; }
hash=$(git rev-parse --short=7 HEAD 2>/dev/null) || { echo unknown; exit 0; }
if [ -n "$(git status --porcelain --untracked-files=no -- . \
             ':!doc/benchmarks.md' ':!doc/plots' ':!README.md' 2>/dev/null)" ]; then
    hash=$hash-dirty
fi
echo "$hash"
