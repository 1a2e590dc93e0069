// SPDX-License-Identifier: BSD-3-Clause
// Component and memory domain behaviour that needs no device.
#include <gtest/gtest.h>

#include "test/syncmem_run.h"

extern "C" {
#include <uct_syncmem/syncmem_ep.h>
#include <uct_syncmem/syncmem_qp.h>
#include <uct_syncmem/syncmem_hooks.h>
}

#include <infiniband/verbs.h>
#include <cstring>

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
        EXPECT_NE(std::string::npos, out.find("contrib/guest/guest.sh", pos));
        EXPECT_EQ(std::string::npos, out.find(msg, pos + 1)) << "said twice";
    } else {
        EXPECT_EQ(std::string::npos, pos) << out;
    }
}

// What the MD answers to UCP, field by field, for the release being built
// against (keyed as compat.h keys it). The query needs no device: it reads
// what md_open found, which a test can set. Every field starts poisoned, so
// a field the query leaves alone (1.14-1.16 have no base defaults) shows.
namespace {

class md_attr : public ::testing::Test {
protected:
    static constexpr uint64_t guid = 0x0123456789abcdefull;
    static constexpr uint64_t max_mr_size = 1ull << 40;

    void SetUp() override {
        memset(&m_md, 0, sizeof(m_md));
        m_md.super.component     = &uct_syncmem_component;
        m_md.dev_attr.max_mr_size = max_mr_size;
        m_md.dev_attr.sys_image_guid = guid;
        m_md.reg_cost            = ucs_linear_func_make(16e-6, 0.06e-9);
    }

    uct_syncmem_md_attr_t query() {
        uct_syncmem_md_attr_t attr;
        memset(&attr, 0xa5, sizeof(attr));
        EXPECT_EQ(UCS_OK, uct_syncmem_md_query(&m_md.super, &attr));
        return attr;
    }

    uct_syncmem_md_t m_md;
};

constexpr uint64_t md_attr::guid;
constexpr uint64_t md_attr::max_mr_size;

} // namespace

TEST_F(md_attr, host_only)
{
    uct_syncmem_md_attr_t attr = query();
    auto *cap = UCT_SYNCMEM_MD_ATTR_CAP(&attr);

    EXPECT_EQ(uint64_t(UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_MEMH |
                       UCT_MD_FLAG_NEED_RKEY | UCT_SYNCMEM_MD_INVALIDATE),
              uint64_t(cap->flags));
    EXPECT_EQ(UCS_BIT(UCS_MEMORY_TYPE_HOST), cap->reg_mem_types);
    EXPECT_EQ(0u, cap->alloc_mem_types);
    EXPECT_EQ(0u, cap->detect_mem_types);
    EXPECT_EQ(UCS_BIT(UCS_MEMORY_TYPE_HOST), cap->access_mem_types);
    EXPECT_EQ(ULONG_MAX, cap->max_alloc); // as ib's: no ALLOC flag
    EXPECT_EQ(max_mr_size, cap->max_reg);
    EXPECT_EQ(sizeof(uct_syncmem_packed_rkey_t), attr.rkey_packed_size);
    EXPECT_EQ(m_md.reg_cost.c, attr.reg_cost.c);
    EXPECT_EQ(m_md.reg_cost.m, attr.reg_cost.m);
    for (size_t i = 0; i < sizeof(attr.local_cpus); ++i) {
        ASSERT_EQ(0xff, ((const uint8_t*)&attr.local_cpus)[i]) << i;
    }

#if UCT_SYNCMEM_UCX_SINCE(1, 14)
    // UCP's registration cache may keep what we register (1.22 asserts it)
    EXPECT_EQ(UCS_MASK(UCS_MEMORY_TYPE_LAST), attr.cache_mem_types);
    EXPECT_EQ(0u, attr.dmabuf_mem_types);
    EXPECT_EQ(0u, attr.exported_mkey_packed_size);

    char global_id[UCT_MD_GLOBAL_ID_MAX] = {};
    uint64_t id_guid = guid;
    memcpy(global_id, UCT_SYNCMEM_NAME, strlen(UCT_SYNCMEM_NAME));
    memcpy(global_id + strlen(UCT_SYNCMEM_NAME), &id_guid, sizeof(id_guid));
    EXPECT_EQ(0, memcmp(global_id, attr.global_id, sizeof(global_id)));
#endif
#if UCT_SYNCMEM_UCX_SINCE(1, 15)
    EXPECT_EQ(0u, attr.reg_nonblock_mem_types);
#endif
#if UCT_SYNCMEM_UCX_SINCE(1, 16)
    EXPECT_EQ(1u, attr.reg_alignment);
#endif
#if UCT_SYNCMEM_UCX_SINCE(1, 18)
    EXPECT_EQ(0u, attr.gva_mem_types);
#endif
#if UCT_SYNCMEM_UCX_SINCE(1, 22)
    EXPECT_EQ(int(UCS_MEM_FLAG_REGISTRABLE), int(attr.required_mem_flags));
#endif
}

// With a peer-memory module, CUDA memory is registrable before the process
// loads the CUDA driver (it has none until then). Detection is only offered
// where it is asked and nothing better answers: never while the driver is
// not loaded (this process), nor with UCS's memory-type cache on. Every type
// registered is cacheable (1.14+), or UCP 1.18 and 1.22's zero-copy paths
// abort on an assertion.
TEST_F(md_attr, cuda)
{
    m_md.cuda    = (uct_syncmem_cuda_cache_t*)&m_md;  // only tested for NULL
    m_md.peermem = 1;
    ASSERT_FALSE(uct_syncmem_cuda_in_use()) << "the test process loads no"
                                               " CUDA driver";

    uct_syncmem_md_attr_t attr = query();
    auto *cap = UCT_SYNCMEM_MD_ATTR_CAP(&attr);

    EXPECT_EQ(UCS_BIT(UCS_MEMORY_TYPE_HOST) | UCS_BIT(UCS_MEMORY_TYPE_CUDA),
              cap->reg_mem_types);
    EXPECT_EQ(0u, cap->detect_mem_types);
    EXPECT_EQ(UCS_BIT(UCS_MEMORY_TYPE_HOST), cap->access_mem_types);
#if UCT_SYNCMEM_UCX_SINCE(1, 14)
    EXPECT_EQ(cap->reg_mem_types, attr.cache_mem_types & cap->reg_mem_types);
    EXPECT_EQ(0u, attr.dmabuf_mem_types);
#endif
#if UCT_SYNCMEM_UCX_SINCE(1, 15)
    EXPECT_EQ(0u, attr.reg_nonblock_mem_types);
#endif

    // a device that takes no dma-bufs, without peer memory: host only
    m_md.peermem = 0;
    m_md.dmabuf  = 0;
    attr = query();
    EXPECT_EQ(UCS_BIT(UCS_MEMORY_TYPE_HOST),
              UCT_SYNCMEM_MD_ATTR_CAP(&attr)->reg_mem_types);
    // one that does: CUDA memory registrable once a GPU exports it
    m_md.dmabuf  = 1;
    attr = query();
    EXPECT_EQ(UCS_BIT(UCS_MEMORY_TYPE_HOST) | UCS_BIT(UCS_MEMORY_TYPE_CUDA),
              UCT_SYNCMEM_MD_ATTR_CAP(&attr)->reg_mem_types);
}

// mem_query answers CUDA memory only; anything else is not ours to answer,
// and UCP takes it for host memory.
TEST_F(md_attr, mem_query_host_memory_is_not_ours)
{
    static char buf[64];
    uct_syncmem_mem_attr_t mem_attr;

    memset(&mem_attr, 0, sizeof(mem_attr));
    mem_attr.field_mask = UCT_SYNCMEM_MEM_ATTR_FIELD(MEM_TYPE) |
                          UCT_SYNCMEM_MEM_ATTR_FIELD(BASE_ADDRESS) |
                          UCT_SYNCMEM_MEM_ATTR_FIELD(ALLOC_LENGTH) |
                          UCT_SYNCMEM_MEM_ATTR_FIELD(SYS_DEV);
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              uct_syncmem_md_mem_query(&m_md.super, buf, sizeof(buf),
                                       &mem_attr));
}

// A CUDA registration is cached by buffer id and served to every later
// request for that buffer, whatever access it asks: so it is made with
// every access mem_reg can be asked for (remote atomics where the device
// has them), never with the first request's.
TEST(cuda_access, covers_every_request)
{
    const unsigned all = UCT_MD_MEM_ACCESS_REMOTE_PUT |
                         UCT_MD_MEM_ACCESS_REMOTE_GET |
                         UCT_MD_MEM_ACCESS_REMOTE_ATOMIC |
                         UCT_MD_MEM_ACCESS_LOCAL_READ |
                         UCT_MD_MEM_ACCESS_LOCAL_WRITE;

    for (auto atomic_cap : {IBV_ATOMIC_HCA, IBV_ATOMIC_NONE}) {
        uct_syncmem_md_t md;
        memset(&md, 0, sizeof(md));
        md.dev_attr.atomic_cap = atomic_cap;
        ASSERT_EQ(UCS_OK, uct_syncmem_cuda_init(&md, 16, 1ul << 30));
        int granted = uct_syncmem_cuda_access(&md);

        // every subset of the flags, local read first as the case
        for (unsigned flags = 0; flags <= all; ++flags) {
            if (flags & ~all) {
                continue;
            }
            int asked = uct_syncmem_mr_access(flags);
            if (atomic_cap == IBV_ATOMIC_NONE) {
                asked &= ~IBV_ACCESS_REMOTE_ATOMIC;  // the device has none
            }
            EXPECT_EQ(asked, asked & granted)
                    << "flags 0x" << std::hex << flags << " asked 0x" << asked
                    << " granted 0x" << granted;
        }
        EXPECT_EQ(atomic_cap != IBV_ATOMIC_NONE,
                  !!(granted & IBV_ACCESS_REMOTE_ATOMIC));
        uct_syncmem_cuda_cleanup(&md);
        EXPECT_EQ(nullptr, md.cuda);
    }
}
