// googletest, compiled with this project's compiler and flags.
#include "src/gtest-all.cc"
