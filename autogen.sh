#!/bin/sh
# Generate configure and Makefile.in (needs autoconf, automake, libtool).
# SPDX-License-Identifier: BSD-3-Clause
set -e
cd "$(dirname "$0")"
mkdir -p config/aux
autoreconf -fi
