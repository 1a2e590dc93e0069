// SPDX-License-Identifier: BSD-3-Clause
// The version guard: the module registers only inside the UCX release it
// was compiled against (uct_syncmem/syncmem_version.c). A mismatch is
// tested against a real other release in test/guard.test.
#include <gtest/gtest.h>

#include "test/syncmem_run.h"

extern "C" {
#include <uct_syncmem/syncmem_ep.h>
#include <uct_syncmem/syncmem_qp.h>
#include <uct_syncmem/syncmem_hooks.h>
// libuct_syncmem.so (syncmem_version.c)
int uct_syncmem_ucx_version(unsigned *major, unsigned *minor, unsigned *patch);
}

// This test program links libuct but not libucp: the version comes from the
// libucp found beside the loaded libucs.
TEST(version, running_ucx_is_the_build_ucx)
{
    unsigned major = 0, minor = 0, patch = 0;

    ASSERT_TRUE(uct_syncmem_ucx_version(&major, &minor, &patch));
    EXPECT_EQ((unsigned)UCT_VERNO_MAJOR, major);
    EXPECT_EQ((unsigned)UCT_VERNO_MINOR, minor);
    EXPECT_EQ((unsigned)UCT_VERNO_PATCH, patch);
}

TEST(version, registered_in_matching_ucx)
{
    uct_component_h *components;
    unsigned i, count;
    bool found = false;

    ASSERT_EQ(UCS_OK, uct_query_components(&components, &count));
    for (i = 0; i < count; ++i) {
        uct_component_attr_t attr = {};
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        ASSERT_EQ(UCS_OK, uct_component_query(components[i], &attr));
        found = found || !strcmp(attr.name, UCT_SYNCMEM_NAME);
    }
    uct_release_component_list(components);
    EXPECT_TRUE(found);

    // and a UCP program (ucx_info) gets no guard line
    int status;
    std::string out = syncmem_run(UCX_INFO " -d", &status);
    ASSERT_EQ(0, status) << out;
    EXPECT_EQ(std::string::npos, out.find("not registering")) << out;
}
