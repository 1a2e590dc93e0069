#!/bin/sh
# Generate configure and Makefile.in (needs autoconf, automake, libtool).
set -e
cd "$(dirname "$0")"
mkdir -p config/aux
autoreconf -fi
