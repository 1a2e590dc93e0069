// SPDX-License-Identifier: BSD-3-Clause
// googletest, compiled with this project's compiler and flags.
#include "src/gtest-all.cc"
