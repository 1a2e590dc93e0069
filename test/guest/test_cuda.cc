// SPDX-License-Identifier: BSD-3-Clause
// Memory types and dma-buf registration (uct_syncmem/syncmem_cuda.c and the
// dma-buf path of syncmem_md.c) on a machine without a GPU.
//
// The guest kernel (Debian 6.1) has no udmabuf, so the dma-buf comes from
// vgem, the kernel's virtual GEM driver, through DRM PRIME export: a real
// dma-buf, as a GPU driver would export one.
#include "syncmem_rma_test.h"
#include "test/syncmem_run.h"

extern "C" {
#include "uct_syncmem/syncmem_ep.h"
#include "uct_syncmem/syncmem_qp.h"
#include "uct_syncmem/syncmem_hooks.h"
}

#include <atomic>
#include <dlfcn.h>
#include <libdrm/drm.h>
#include <libdrm/drm_mode.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

// A process without the CUDA driver: host memory only, said once at debug
// level.
TEST_F(syncmem_test, host_memory_only_without_cuda)
{
    uct_md_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_md_query(m_md, &attr));
    EXPECT_EQ(UCS_BIT(UCS_MEMORY_TYPE_HOST), attr.cap.reg_mem_types);
    EXPECT_EQ(UCS_BIT(UCS_MEMORY_TYPE_HOST), attr.cap.access_mem_types);
    EXPECT_EQ(0u, attr.cap.detect_mem_types);

    int status;
    std::string out = syncmem_run("env UCX_LOG_LEVEL=debug " UCX_INFO " -d",
                                  &status);
    ASSERT_EQ(0, status) << out;
    const std::string msg = "syncmem: host memory only (";
    size_t pos = out.find(msg);
    ASSERT_NE(std::string::npos, pos) << out;
    EXPECT_EQ(std::string::npos, out.find(msg, pos + 1)) << "said twice";
    // the reason is there: ucx_info never loads the CUDA driver, and the
    // module does not load it for a process that has not
    std::string line = out.substr(pos, out.find('\n', pos) - pos);
    EXPECT_NE(std::string::npos,
              line.find("the process has not loaded and initialised the CUDA"
                        " driver"))
            << line;
    EXPECT_EQ(std::string::npos, out.find("CUDA driver in use")) << out;
}

class syncmem_dmabuf_test : public syncmem_rma_test {
protected:
    void SetUp() override {
        syncmem_rma_test::SetUp();
        m_drm = open_vgem();
        const char *mode = getenv("SYNCMEM_GUEST_MODE");
        if ((m_drm < 0) && (mode != nullptr) && !strcmp(mode, "host")) {
            GTEST_SKIP() << "no vgem device, the dma-buf exporter this test"
                            " uses (modprobe vgem)";
        }
        ASSERT_GE(m_drm, 0) << "no vgem device: contrib/guest/guest-init.sh"
                               " loads the vgem module for this test";
    }

    void TearDown() override {
        if (m_map != nullptr) {
            munmap(m_map, m_size);
        }
        if (m_fd >= 0) {
            close(m_fd);
        }
        if (m_drm >= 0) {
            close(m_drm);
        }
        syncmem_rma_test::TearDown();
    }

    static int open_vgem() {
        char name[64];
        for (int i = 0; i < 16; ++i) {
            snprintf(name, sizeof(name), "/dev/dri/card%d", i);
            int fd = open(name, O_RDWR | O_CLOEXEC);
            if (fd < 0) {
                continue;
            }
            char drv[32] = {};
            drm_version_t v = {};
            v.name     = drv;
            v.name_len = sizeof(drv) - 1;
            if ((ioctl(fd, DRM_IOCTL_VERSION, &v) == 0) &&
                !strcmp(drv, "vgem")) {
                return fd;
            }
            close(fd);
        }
        return -1;
    }

    // A vgem buffer of size bytes, exported as a dma-buf and mapped.
    void export_buffer(size_t size) {
        struct drm_mode_create_dumb create = {};
        create.width  = size / 4;
        create.height = 1;
        create.bpp    = 32;
        ASSERT_EQ(0, ioctl(m_drm, DRM_IOCTL_MODE_CREATE_DUMB, &create))
                << strerror(errno);
        struct drm_prime_handle prime = {};
        prime.handle = create.handle;
        prime.flags  = DRM_CLOEXEC | DRM_RDWR;
        ASSERT_EQ(0, ioctl(m_drm, DRM_IOCTL_PRIME_HANDLE_TO_FD, &prime))
                << strerror(errno);
        m_fd   = prime.fd;
        m_size = create.size;
        m_map  = mmap(NULL, m_size, PROT_READ | PROT_WRITE, MAP_SHARED, m_fd,
                      0);
        ASSERT_NE(MAP_FAILED, m_map) << strerror(errno);
    }

    int    m_drm  = -1;
    int    m_fd   = -1;
    void   *m_map = nullptr;
    size_t m_size = 0;
};

// Either the device takes the dma-buf and data moves through it both ways,
// or it refuses it the way the MD's probe predicted, with UNSUPPORTED and
// the driver's own error (rxe: EOPNOTSUPP, printed); then, with no data
// moved, the test is reported skipped, with that reason.
TEST_F(syncmem_dmabuf_test, register_and_move_data)
{
    export_buffer(64 * 1024);
    memset(m_map, 0x5a, m_size);
    char link[64] = {}, path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", m_fd);
    ASSERT_GT(readlink(path, link, sizeof(link) - 1), 0);
    EXPECT_STREQ("/dmabuf:", link) << "not a dma-buf";

    // what the driver says, without syncmem in between
    uct_syncmem_md_t *md = ucs_derived_of(m_md, uct_syncmem_md_t);
    struct ibv_mr *mr = ibv_reg_dmabuf_mr(md->pd, 0, m_size,
                                          (uintptr_t)m_map, m_fd,
                                          IBV_ACCESS_LOCAL_WRITE |
                                          IBV_ACCESS_REMOTE_WRITE |
                                          IBV_ACCESS_REMOTE_READ);
    int err = errno;
    if (mr != nullptr) {
        ibv_dereg_mr(mr);
    }
    std::cout << "[          ] ibv_reg_dmabuf_mr on " << m_md_name << ": "
              << ((mr != nullptr) ? "accepted" : strerror(err)) << std::endl;
    EXPECT_EQ(md->dmabuf, (mr != nullptr) || (err != EOPNOTSUPP))
            << "the MD's probe disagrees with the driver";

    uct_mem_h memh = nullptr;
    ucs_status_t status = uct_syncmem_md_mem_reg_dmabuf(
            m_md, m_fd, 0, m_size, m_map, UCT_MD_MEM_ACCESS_ALL, &memh);
    if (mr == nullptr) {
        EXPECT_EQ(EOPNOTSUPP, err) << strerror(err);
        EXPECT_EQ(UCS_ERR_UNSUPPORTED, status) << ucs_status_string(status);
        GTEST_SKIP() << m_md_name << " refuses dma-bufs (ibv_reg_dmabuf_mr: "
                     << strerror(err) << ", and syncmem says UNSUPPORTED as"
                     << " its probe predicted): no data moved through one";
    }

    ASSERT_EQ(UCS_OK, status);
    std::vector<uint8_t> packed(64);
    ASSERT_EQ(UCS_OK, uct_md_mkey_pack(m_md, memh, packed.data()));
    uct_rkey_bundle_t rkey;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, packed.data(), &rkey));

    // into the dma-buf, then back out of it
    buffer *src = alloc(4096, 0xa7);
    uct_iov_t iov = { src->data.data(), 4096, src->memh, 0, 1 };
    ASSERT_EQ(UCS_OK, retry([&] {
        return uct_ep_put_zcopy(m_ep, &iov, 1, (uintptr_t)m_map, rkey.rkey,
                                NULL);
    }));
    flush(m_ep);
    EXPECT_EQ(0xa7, ((uint8_t*)m_map)[0]);
    EXPECT_EQ(0xa7, ((uint8_t*)m_map)[4095]);
    EXPECT_EQ(0x5a, ((uint8_t*)m_map)[4096]);

    buffer *dst = alloc(4096, 0);
    uct_iov_t giov = { dst->data.data(), 4096, dst->memh, 0, 1 };
    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    status = retry([&] {
        return uct_ep_get_zcopy(m_ep, &giov, 1, (uintptr_t)m_map + 4096,
                                rkey.rkey, &comp);
    });
    wait_bound bound("the get_zcopy out of the dma-buf");
    while (((status == UCS_INPROGRESS) && (comp.count > 0)) && bound()) {
        progress();
    }
    EXPECT_EQ(0x5a, dst->data[0]);
    uct_rkey_release(m_component, &rkey);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
}

// syncmem's cache of CUDA registrations (syncmem_cuda.c) with a real HCA,
// the CUDA driver replaced by the stand-in (test/uct_syncmem/
// cuda_stand_in.c), whose "device memory" is host memory of the test's:
// the MD registers it through ibv_reg_mr, as with a peer-memory module.
// Each test runs again in a process of its own that loads the stand-in
// (syncmem would use it in every later test of this one). What the cache
// released is counted from its debug lines, which the child does not print.
namespace {

const char *stand_in_driver = SYNCMEM_BUILDDIR "/test/stand-in/libcuda.so.1";
const size_t mib            = 1 << 20;
std::atomic<int> cuda_released;

ucs_log_func_rc_t count_released(const char *file, unsigned line,
                                 const char *function, ucs_log_level_t level,
                                 const ucs_log_component_config_t *comp,
                                 const char *message, va_list ap)
{
    char buf[512];
    va_list copy;

    if (level < UCS_LOG_LEVEL_DEBUG) {
        return UCS_LOG_FUNC_RC_CONTINUE;
    }
    va_copy(copy, ap);
    vsnprintf(buf, sizeof(buf), message, copy);
    va_end(copy);
    if (strstr(buf, "released CUDA memory") != nullptr) {
        ++cuda_released;
    }
    return UCS_LOG_FUNC_RC_STOP;
}

} // namespace

class syncmem_cuda_cache_test : public syncmem_rma_test {
protected:
    // Here: runs this test again in a child with the stand-in and checks
    // it passed; false. There: true, with the stand-in loaded and
    // initialised, 16 MiB of host memory reserved in it, and the MD taking
    // "CUDA memory" through ibv_reg_mr.
    bool in_child() {
        if (getenv("SYNCMEM_TEST_STAND_IN") != nullptr) {
            load();
            return true;
        }
        EXPECT_EQ(0, access(stand_in_driver, R_OK))
                << stand_in_driver << ": not built";
        const testing::TestInfo *t =
                testing::UnitTest::GetInstance()->current_test_info();
        int status;
        std::string out = syncmem_run(
                std::string("env SYNCMEM_TEST_STAND_IN=1 UCX_LOG_LEVEL=debug"
                            " /proc/") + std::to_string(getpid()) +
                "/exe --gtest_filter=" + t->test_suite_name() + "." +
                t->name(), &status);
        EXPECT_EQ(0, status) << out;
        EXPECT_NE(std::string::npos, out.find("[  PASSED  ] 1 test."))
                << out;
        return false;
    }

    void TearDown() override {
        if (m_base != 0) {
            ucs_log_pop_handler();
            munmap(m_map, m_size + 2 * mib);
        }
        syncmem_rma_test::TearDown();
    }

    void load() {
        void *lib = dlopen(stand_in_driver, RTLD_NOW | RTLD_GLOBAL);
        ASSERT_NE(nullptr, lib) << dlerror();
        auto cu_init = (int (*)(unsigned))dlsym(lib, "cuInit");
        auto reserve = (uintptr_t (*)(uintptr_t, size_t, int))dlsym(
                lib, "syncmem_stand_in_reserve_at");
        m_map_piece  = (unsigned long long (*)(uintptr_t, size_t))dlsym(
                lib, "syncmem_stand_in_map");
        m_unmap      = (int (*)(uintptr_t))dlsym(lib,
                                                 "syncmem_stand_in_unmap");
        ASSERT_TRUE(cu_init && reserve && m_map_piece && m_unmap);
        ASSERT_EQ(0, cu_init(0));

        m_map = mmap(NULL, m_size + 2 * mib, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(MAP_FAILED, m_map);
        uintptr_t base = ucs_align_up((uintptr_t)m_map, 2 * mib);
        ASSERT_EQ(base, reserve(base, m_size, 2 /* VMM */));
        m_base = base;
        ucs_log_push_handler(count_released);
        ucs_derived_of(m_md, uct_syncmem_md_t)->peermem = 1;
    }

    // Maps a piece: its buffer id.
    unsigned long long map(size_t at, size_t size) {
        unsigned long long id = m_map_piece(m_base + at, size);
        EXPECT_NE(0u, id) << "mapping " << at << "+" << size;
        return id;
    }

    // hide: an error the test asks for, not logged
    ucs_status_t reg(uct_md_h md, size_t at, size_t length,
                     uct_mem_h *memh_p, bool hide = false) {
        *memh_p = nullptr;
        return uct_md_mem_reg(md, (void*)(m_base + at), length,
                              UCT_MD_MEM_ACCESS_ALL |
                              (hide ? UCT_MD_MEM_FLAG_HIDE_ERRORS : 0),
                              memh_p);
    }

    // The registration under a handle (each mem_reg has a handle of its
    // own; handles of the same memory share it).
    static const uct_syncmem_mem_t *r(uct_mem_h memh) {
        return uct_syncmem_md_memh_reg(memh);
    }

    // Its MR is [base + at, base + at + size), in the CUDA cache.
    void expect_mr(uct_mem_h memh, size_t at, size_t size) {
        ASSERT_NE(nullptr, memh);
        EXPECT_TRUE(r(memh)->flags & UCT_SYNCMEM_MEM_FLAG_CUDA);
        EXPECT_EQ(m_base + at, (uintptr_t)r(memh)->mr->addr);
        EXPECT_EQ(size, r(memh)->mr->length);
    }

    const size_t m_size = 16 * mib;
    void      *m_map    = nullptr;
    uintptr_t m_base    = 0;
    unsigned long long (*m_map_piece)(uintptr_t, size_t) = nullptr;
    int (*m_unmap)(uintptr_t) = nullptr;
};

// VMM memory mapped in 2 MiB pieces: a buffer registers as the pieces that
// hold it (across two, both; data moves across their boundary), a hole is
// refused, and a piece mapped again is a new registration; none of it goes
// through the host cache, and each region goes at its last release.
TEST_F(syncmem_cuda_cache_test, pieces_register_and_a_remap_is_new)
{
    if (!in_child()) {
        return;
    }
    uct_syncmem_md_t *md = ucs_derived_of(m_md, uct_syncmem_md_t);
    const uct_syncmem_rcache_counters_t host = md->rcache_counters;
    uct_mem_h both, first, again, remapped, hole;

    map(0, 2 * mib);
    unsigned long long b = map(2 * mib, 2 * mib);
    ASSERT_EQ(UCS_OK, reg(m_md, 2 * mib - 8, 16, &both));
    expect_mr(both, 0, 4 * mib);
    ASSERT_EQ(UCS_OK, reg(m_md, 100, 8, &first));
    expect_mr(first, 0, 2 * mib);
    EXPECT_NE(r(both), r(first));
    ASSERT_EQ(UCS_OK, reg(m_md, 2 * mib - 8, 16, &again));
    EXPECT_EQ(r(both), r(again)) << "the same pieces: one registration";
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, reg(m_md, 3 * mib, 2 * mib, &hole,
                                        true));

    // a put across the boundary of the two pieces, through their one MR
    std::vector<uint8_t> packed(64);
    ASSERT_EQ(UCS_OK, uct_md_mkey_pack(m_md, both, packed.data()));
    uct_rkey_bundle_t rkey;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, packed.data(), &rkey));
    buffer *src = alloc(64, 0xa7);
    uct_iov_t iov = { src->data.data(), 64, src->memh, 0, 1 };
    uint8_t *dst = (uint8_t*)(m_base + 2 * mib - 32);
    ucs_status_t status = retry([&] {
        return uct_ep_put_zcopy(m_ep, &iov, 1, (uintptr_t)dst, rkey.rkey,
                                NULL);
    });
    ASSERT_TRUE((status == UCS_OK) || (status == UCS_INPROGRESS))
            << ucs_status_string(status);
    flush(m_ep);
    EXPECT_EQ(0xa7, dst[0]);
    EXPECT_EQ(0xa7, dst[63]);
    uct_rkey_release(m_component, &rkey);

    ASSERT_EQ(0, m_unmap(m_base + 2 * mib));
    EXPECT_NE(b, map(2 * mib, 2 * mib));
    ASSERT_EQ(UCS_OK, reg(m_md, 2 * mib + 100, 8, &remapped));
    expect_mr(remapped, 2 * mib, 2 * mib);
    EXPECT_NE(r(both), r(remapped));
    EXPECT_NE(r(both)->mr, r(remapped)->mr);

    EXPECT_EQ(host.hits, md->rcache_counters.hits) << "CUDA memory in the"
                                                      " host cache";
    EXPECT_EQ(host.misses + (md->rcache != nullptr),
              md->rcache_counters.misses)
            << "only the source buffer in the host cache";

    // nothing kept by default: each goes at its last release
    EXPECT_EQ(0, cuda_released.load());
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, both));
    EXPECT_EQ(0, cuda_released.load()) << "released while still in use";
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, again));
    EXPECT_EQ(1, cuda_released.load());
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, first));
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, remapped));
    EXPECT_EQ(3, cuda_released.load());
}

// With CUDA_REG_CACHE set, an unused region is kept for reuse while its
// memory lives; once the memory is gone (unmapped, as freed), it goes at
// the next registration of other CUDA memory.
TEST_F(syncmem_cuda_cache_test, a_kept_region_goes_once_its_memory_does)
{
    if (!in_child()) {
        return;
    }
    uct_md_h kept_md = open_md(m_component, m_md_name,
                               {{"CUDA_REG_CACHE", "16"}});
    ASSERT_NE(nullptr, kept_md);
    ucs_derived_of(kept_md, uct_syncmem_md_t)->peermem = 1;
    uct_mem_h memh, again, other;

    map(0, 2 * mib);
    map(2 * mib, 2 * mib);
    ASSERT_EQ(UCS_OK, reg(kept_md, 100, 8, &memh));
    const uct_syncmem_mem_t *kept = r(memh);
    struct ibv_mr *mr             = kept->mr;
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(kept_md, memh));
    EXPECT_EQ(0, cuda_released.load()) << "not kept";
    ASSERT_EQ(UCS_OK, reg(kept_md, 200, 8, &again));
    EXPECT_EQ(kept, r(again));
    EXPECT_EQ(mr, r(again)->mr);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(kept_md, again));

    ASSERT_EQ(0, m_unmap(m_base));   // the application frees it
    EXPECT_EQ(0, cuda_released.load());
    ASSERT_EQ(UCS_OK, reg(kept_md, 2 * mib, 8, &other));
    EXPECT_EQ(1, cuda_released.load()) << "the freed memory's region kept";
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(kept_md, other));
    EXPECT_EQ(1, cuda_released.load()) << "a live one is kept";
}

// A handle of CUDA memory packed for invalidation (UCP's rendezvous with
// peer error handling) gets a registration of its own, not a window (none
// over GPU memory): revoking it leaves the shared registration's key alive.
TEST_F(syncmem_cuda_cache_test, a_key_for_invalidation_is_its_handles_own)
{
    if (!in_child()) {
        return;
    }
    uct_mem_h victim, sibling;
    map(0, 2 * mib);
    ASSERT_EQ(UCS_OK, reg(m_md, 100, 64, &victim));
    ASSERT_EQ(UCS_OK, reg(m_md, 100, 64, &sibling));
    ASSERT_EQ(r(victim), r(sibling));

    auto put = [&](uct_ep_h ep, uct_rkey_t rkey, uint64_t v) {
        ucs_status_t status = retry([&] {
            return uct_ep_put_short(ep, &v, 8, m_base + 100, rkey);
        });
        if (status != UCS_OK) {
            return status;
        }
        uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
        status = retry([&] { return uct_ep_flush(ep, 0, &comp); });
        if (status == UCS_INPROGRESS) {
            EXPECT_TRUE(wait_for("a flush", [&] { return comp.count == 0; }));
            status = comp.status;
        }
        return status;
    };

    uct_rkey_bundle_t own    = pack_rkey(victim,
                                         UCT_SYNCMEM_PACK_INVALIDATE);
    uct_rkey_bundle_t shared = pack_rkey(sibling, 0);
    EXPECT_NE(own.rkey, shared.rkey);
    EXPECT_EQ(UCS_OK, put(m_ep, own.rkey, 0x1111));
    EXPECT_EQ(0x1111u, *(uint64_t*)(m_base + 100));

    EXPECT_EQ(1, dereg_invalidate(victim));
    EXPECT_EQ(0, cuda_released.load()) << "the sibling's registration went";

    uct_ep_h ep = connect(m_sender, m_receiver);
    ASSERT_NE(nullptr, ep);
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, put(ep, own.rkey, 0x2222));
    EXPECT_EQ(0x1111u, *(uint64_t*)(m_base + 100));
    EXPECT_EQ(UCS_OK, put(m_ep, shared.rkey, 0x3333));
    EXPECT_EQ(0x3333u, *(uint64_t*)(m_base + 100));

    uct_rkey_release(m_component, &own);
    uct_rkey_release(m_component, &shared);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, sibling));
    EXPECT_EQ(1, cuda_released.load());
}
