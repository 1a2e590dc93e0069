// Component and memory domain behaviour that needs no device.
#include <gtest/gtest.h>

#include "test/syncmem_run.h"

#include <infiniband/verbs.h>

// Without an RDMA device the user is told what to do, once; with one, the
// message must not appear.
TEST(md, no_rdma_device_message)
{
    int num_devs = 0;
    struct ibv_device **devs = ibv_get_device_list(&num_devs);
    if (devs != nullptr) {
        ibv_free_device_list(devs);
    }

    int status;
    std::string out = syncmem_run(UCX_INFO " -d", &status);
    ASSERT_EQ(0, status) << out;

    const std::string msg = "syncmem: no RDMA device found";
    size_t pos = out.find(msg);
    if (num_devs == 0) {
        ASSERT_NE(std::string::npos, pos) << out;
        EXPECT_NE(std::string::npos, out.find("contrib/guest.sh", pos));
        EXPECT_EQ(std::string::npos, out.find(msg, pos + 1)) << "said twice";
    } else {
        EXPECT_EQ(std::string::npos, pos) << out;
    }
}
