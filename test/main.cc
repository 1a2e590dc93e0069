// SPDX-License-Identifier: BSD-3-Clause
// googletest entry point shared by the host and guest test programs.
#include <gtest/gtest.h>

int main(int argc, char **argv)
{
    testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
