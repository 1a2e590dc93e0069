// SPDX-License-Identifier: BSD-3-Clause
// What syncmem_cuda_driver.c asks the CUDA driver and makes of its answers,
// against the stand-in driver (cuda_stand_in.c), which answers as the
// driver API's documentation says for cuMemAlloc memory, VMM reservations
// mapped in pieces, pool memory, and mappings unmapped and mapped again:
// the extent of a buffer is what is mapped around it, not its reservation;
// SYNC_MEMOPS is set by pointer or once per context; an old driver still
// detects CUDA memory. Each test runs in a child process that loads and
// initialises the stand-in, as an application loads libcuda; the real
// driver's turn is test/gpu/cuda_reg.c.
#include <gtest/gtest.h>

extern "C" {
#include "uct_syncmem/syncmem_md.h"
#include "uct_syncmem/syncmem_cuda_driver.h"
}

#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

const char *stand_in     = SYNCMEM_BUILDDIR "/test/stand-in/libcuda.so.1";
const char *stand_in_old = SYNCMEM_BUILDDIR "/test/stand-in-old/libcuda.so.1";
const size_t mib         = 1 << 20;

enum { ALLOC = 1, VMM, POOL };   // cuda_stand_in.c's kinds

// The stand-in as the tests drive it.
struct driver {
    void *lib;

    template <typename T> T *sym(const char *name) {
        void *p = dlsym(lib, name);
        EXPECT_NE(nullptr, p) << name;
        return (T*)p;
    }
    uintptr_t reserve(size_t size, int kind) {
        return sym<uintptr_t(size_t, int)>("syncmem_stand_in_reserve")(size,
                                                                      kind);
    }
    unsigned long long map(uintptr_t start, size_t size) {
        return sym<unsigned long long(uintptr_t, size_t)>(
                "syncmem_stand_in_map")(start, size);
    }
    int unmap(uintptr_t start) {
        return sym<int(uintptr_t)>("syncmem_stand_in_unmap")(start);
    }
    uintptr_t alloc(size_t size) {
        return sym<uintptr_t(size_t)>("syncmem_stand_in_alloc")(size);
    }
    int &counter(const char *name) { return *sym<int>(name); }
};

std::atomic<int> sync_warnings;

ucs_log_func_rc_t count_warnings(const char *file, unsigned line,
                                 const char *function, ucs_log_level_t level,
                                 const ucs_log_component_config_t *comp,
                                 const char *message, va_list ap)
{
    char buf[512];
    va_list copy;

    if (level == UCS_LOG_LEVEL_WARN) {
        va_copy(copy, ap);
        vsnprintf(buf, sizeof(buf), message, copy);
        va_end(copy);
        if (strstr(buf, "SYNC_MEMOPS") != nullptr) {
            ++sync_warnings;
        }
    }
    return UCS_LOG_FUNC_RC_CONTINUE;
}

// Runs body in a child that has loaded the driver at path and initialised
// it; the child's failures are printed there and fail the test here.
void with_driver(const char *path, std::function<void(driver&)> body)
{
    ASSERT_EQ(0, access(path, R_OK)) << path << ": not built";
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        driver d;
        d.lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
        if ((d.lib == nullptr) ||
            (d.sym<int(unsigned)>("cuInit")(0) != 0) ||
            !uct_syncmem_cuda_in_use()) {
            printf("the stand-in did not load and initialise\n");
            _exit(2);
        }
        ucs_log_push_handler(count_warnings);
        body(d);
        ucs_log_pop_handler();
        fflush(stdout);
        _exit(testing::Test::HasFailure() ? 1 : 0);
    }
    int status = -1;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));   // the child never waits
    ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
    EXPECT_EQ(0, WEXITSTATUS(status)) << "failed in the child (above)";
}

// The extent of address+length, as mem_reg finds it.
ucs_status_t locate(uintptr_t address, size_t length,
                    uct_syncmem_cuda_extent_t *extent,
                    uct_syncmem_cuda_buf_t *buf_p = nullptr)
{
    uct_syncmem_cuda_buf_t buf;

    if (!uct_syncmem_cuda_query((void*)address, &buf)) {
        return UCS_ERR_NO_ELEM;
    }
    if (buf_p != nullptr) {
        *buf_p = buf;
    }
    return uct_syncmem_cuda_locate(address, length, &buf,
                                   UCS_LOG_LEVEL_DEBUG, extent);
}

void expect_piece(const uct_syncmem_cuda_piece_t &p, uintptr_t start,
                  size_t size, unsigned long long id)
{
    EXPECT_EQ(start, p.start);
    EXPECT_EQ(size, p.size);
    EXPECT_EQ(id, p.id);
}

} // namespace

TEST(cuda_driver, host_memory_is_not_cuda_memory)
{
    with_driver(stand_in, [](driver &d) {
        static char host[4096];
        uct_syncmem_cuda_buf_t buf = {};
        uct_syncmem_cuda_info_t info;

        EXPECT_FALSE(uct_syncmem_cuda_query(host, &buf));
        EXPECT_FALSE(uct_syncmem_cuda_owns(host));
        EXPECT_EQ(UCS_ERR_NO_ELEM, uct_syncmem_cuda_mem_info(host, &info));
        EXPECT_TRUE(uct_syncmem_cuda_exports());
    });
}

// cuMemAlloc memory: the driver's range is the allocation, and the
// allocation is what registers, from any part of it.
TEST(cuda_driver, an_allocation_is_its_own_piece)
{
    with_driver(stand_in, [](driver &d) {
        const size_t size = mib + 100;
        uintptr_t a       = d.alloc(size);
        uct_syncmem_cuda_extent_t extent;
        uct_syncmem_cuda_info_t info;
        uct_syncmem_cuda_buf_t buf = {};

        ASSERT_NE(0u, a);
        ASSERT_EQ(UCS_OK, locate(a + 100, 8, &extent, &buf));
        EXPECT_TRUE(buf.allocation);
        ASSERT_EQ(1u, extent.num_pieces);
        EXPECT_EQ(a, extent.pieces[0].start);
        EXPECT_EQ(size, extent.pieces[0].size);
        EXPECT_EQ(a, extent.span.iova);
        EXPECT_EQ(size, extent.span.length);
        EXPECT_EQ(mib + 4096, extent.span.export_length);
        EXPECT_TRUE(uct_syncmem_cuda_pieces_alive(extent.pieces, 1));

        ASSERT_EQ(UCS_OK, uct_syncmem_cuda_mem_info((void*)(a + 5000),
                                                    &info));
        EXPECT_EQ(a, info.base);
        EXPECT_EQ(size, info.size);
        EXPECT_EQ(0, info.ordinal);

        // past its end is another allocation's, or nobody's
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, locate(a + size - 4, 8, &extent));
    });
}

// VMM memory as PyTorch's expandable segments map it: 2 MiB pieces into a
// large reservation. The extent is the pieces that hold the buffer.
TEST(cuda_driver, vmm_memory_is_its_mapped_pieces_not_the_reservation)
{
    with_driver(stand_in, [](driver &d) {
        uintptr_t r = d.reserve(64 * mib, VMM);
        unsigned long long a = d.map(r, 2 * mib);
        unsigned long long b = d.map(r + 2 * mib, 2 * mib);
        unsigned long long c = d.map(r + 4 * mib, 2 * mib);
        unsigned long long e = d.map(r + 62 * mib, 2 * mib);
        uct_syncmem_cuda_extent_t extent;
        uct_syncmem_cuda_info_t info;
        uct_syncmem_cuda_buf_t buf = {};

        ASSERT_TRUE((r != 0) && a && b && c && e);

        // inside one piece: that piece, not the 64 MiB reserved
        ASSERT_EQ(UCS_OK, locate(r + 2 * mib + 100, 1000, &extent, &buf));
        EXPECT_FALSE(buf.allocation);
        EXPECT_EQ(r, buf.range_start);
        EXPECT_EQ(64 * mib, buf.range_size);
        ASSERT_EQ(1u, extent.num_pieces);
        expect_piece(extent.pieces[0], r + 2 * mib, 2 * mib, b);
        EXPECT_EQ(r + 2 * mib, extent.span.export_base);
        EXPECT_EQ(2 * mib, extent.span.export_length);
        EXPECT_EQ(r + 2 * mib, extent.span.iova);
        ASSERT_EQ(UCS_OK, uct_syncmem_cuda_mem_info((void*)(r + 3 * mib),
                                                    &info));
        EXPECT_EQ(r + 2 * mib, info.base);
        EXPECT_EQ(2 * mib, info.size);

        // 16 bytes across two pieces: both
        ASSERT_EQ(UCS_OK, locate(r + 2 * mib - 8, 16, &extent));
        ASSERT_EQ(2u, extent.num_pieces);
        expect_piece(extent.pieces[0], r, 2 * mib, a);
        expect_piece(extent.pieces[1], r + 2 * mib, 2 * mib, b);
        EXPECT_EQ(r, extent.span.export_base);
        EXPECT_EQ(4 * mib, extent.span.export_length);
        EXPECT_EQ(4 * mib, extent.span.length);

        // across three
        ASSERT_EQ(UCS_OK, locate(r + mib, 4 * mib, &extent));
        ASSERT_EQ(3u, extent.num_pieces);
        expect_piece(extent.pieces[2], r + 4 * mib, 2 * mib, c);
        EXPECT_EQ(6 * mib, extent.span.length);

        // into the unmapped hole after the third, and from inside it
        EXPECT_EQ(UCS_ERR_INVALID_ADDR, locate(r + 5 * mib, 2 * mib,
                                               &extent));
        EXPECT_TRUE(uct_syncmem_cuda_owns((void*)(r + 7 * mib)))
                << "reserved, unmapped: not host memory either";
        EXPECT_EQ(UCS_ERR_INVALID_ADDR, locate(r + 7 * mib, 8, &extent));

        // out of the reservation: refused though the last piece is mapped
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, locate(r + 63 * mib, 2 * mib,
                                                &extent));
    });
}

// Unmapped and mapped again at the same address: a new buffer id, so a new
// registration; the old pieces are no longer alive.
TEST(cuda_driver, a_piece_mapped_again_is_new)
{
    with_driver(stand_in, [](driver &d) {
        uintptr_t r = d.reserve(16 * mib, VMM);
        unsigned long long a = d.map(r, 2 * mib);
        unsigned long long b = d.map(r + 2 * mib, 2 * mib);
        uct_syncmem_cuda_extent_t before, after;

        ASSERT_TRUE((r != 0) && a && b);
        ASSERT_EQ(UCS_OK, locate(r + 2 * mib - 8, 16, &before));
        ASSERT_EQ(2u, before.num_pieces);
        EXPECT_TRUE(uct_syncmem_cuda_pieces_alive(before.pieces, 2));

        ASSERT_EQ(0, d.unmap(r + 2 * mib));
        EXPECT_FALSE(uct_syncmem_cuda_pieces_alive(before.pieces, 2));
        EXPECT_EQ(UCS_ERR_INVALID_ADDR, locate(r + 2 * mib - 8, 16, &after));

        unsigned long long b2 = d.map(r + 2 * mib, 2 * mib);
        ASSERT_NE(0u, b2);
        EXPECT_NE(b, b2);
        EXPECT_FALSE(uct_syncmem_cuda_pieces_alive(before.pieces, 2));
        ASSERT_EQ(UCS_OK, locate(r + 2 * mib - 8, 16, &after));
        ASSERT_EQ(2u, after.num_pieces);
        expect_piece(after.pieces[1], r + 2 * mib, 2 * mib, b2);
        EXPECT_TRUE(uct_syncmem_cuda_pieces_alive(after.pieces, 2));
        // the first piece alone did not change
        EXPECT_TRUE(uct_syncmem_cuda_pieces_alive(before.pieces, 1));

        // mapped again larger: the piece is the new mapping
        ASSERT_EQ(0, d.unmap(r + 2 * mib));
        unsigned long long b3 = d.map(r + 2 * mib, 6 * mib);
        ASSERT_NE(0u, b3);
        ASSERT_EQ(UCS_OK, locate(r + 3 * mib, 8, &after));
        expect_piece(after.pieces[0], r + 2 * mib, 6 * mib, b3);
    });
}

// Pool memory (cuMemAllocAsync): the allocation, not the pool, even where
// the driver's range is the pool's reservation.
TEST(cuda_driver, pool_memory_is_its_allocation)
{
    with_driver(stand_in, [](driver &d) {
        uintptr_t pool = d.reserve(32 * mib, POOL);
        unsigned long long big   = d.map(pool, mib);
        unsigned long long small = d.map(pool + mib, 100);
        unsigned long long odd   = d.map(pool + mib + 512, 3000);
        uct_syncmem_cuda_extent_t extent;
        uct_syncmem_cuda_info_t info;

        ASSERT_TRUE((pool != 0) && big && small && odd);
        ASSERT_EQ(UCS_OK, locate(pool + mib + 522, 100, &extent));
        ASSERT_EQ(1u, extent.num_pieces);
        expect_piece(extent.pieces[0], pool + mib + 512, 3000, odd);
        EXPECT_EQ(pool + mib, extent.span.export_base);
        EXPECT_EQ(4096u, extent.span.export_length);
        EXPECT_EQ(512u, extent.span.offset);
        EXPECT_EQ(pool + mib + 512, extent.span.iova);
        EXPECT_EQ(3000u, extent.span.length);

        ASSERT_EQ(UCS_OK, uct_syncmem_cuda_mem_info((void*)(pool + 100),
                                                    &info));
        EXPECT_EQ(pool, info.base);
        EXPECT_EQ(mib, info.size);

        // from one allocation into the free space after it
        EXPECT_EQ(UCS_ERR_INVALID_ADDR, locate(pool + mib + 50, 100,
                                               &extent));
    });
}

// SYNC_MEMOPS: on the pointer for cuMemAlloc memory; for VMM and pool
// memory, which refuse it, on the context, once, keeping its other flags;
// the primary context retained once.
TEST(cuda_driver, sync_memops_by_pointer_or_once_per_context)
{
    with_driver(stand_in, [](driver &d) {
        uintptr_t a = d.alloc(mib);
        uintptr_t r = d.reserve(16 * mib, VMM);
        uintptr_t pool = d.reserve(16 * mib, POOL);
        ASSERT_TRUE(a && r && pool && d.map(r, 2 * mib) &&
                    d.map(r + 2 * mib, 2 * mib) && d.map(pool, 4096));
        int &attr = d.counter("syncmem_stand_in_attr_syncs");
        int &set  = d.counter("syncmem_stand_in_set_flags");
        int &exp  = d.counter("syncmem_stand_in_exports");
        unsigned &flags = *d.sym<unsigned>("syncmem_stand_in_ctx_flags");
        uct_syncmem_cuda_extent_t extent;
        uct_syncmem_cuda_buf_t buf = {};
        int fd;

        ASSERT_EQ(UCS_OK, locate(a, 8, &extent, &buf));
        ASSERT_EQ(UCS_OK, uct_syncmem_cuda_prepare(&buf, &extent.span, 1,
                                                   UCS_LOG_LEVEL_ERROR, &fd));
        EXPECT_GE(fd, 0);
        close(fd);
        EXPECT_EQ(1, attr);
        EXPECT_EQ(0, set);
        EXPECT_EQ(1, exp);

        for (uintptr_t at : {r, r + 2 * mib, pool}) {
            ASSERT_EQ(UCS_OK, locate(at, 8, &extent, &buf));
            ASSERT_EQ(UCS_OK, uct_syncmem_cuda_prepare(&buf, &extent.span, 0,
                                                       UCS_LOG_LEVEL_ERROR,
                                                       &fd));
            EXPECT_EQ(-1, fd);
            EXPECT_EQ(1, set) << "cuCtxSetFlags called again";
        }
        EXPECT_EQ(0x1u | 0x80u, flags) << "the context's flags";
        EXPECT_EQ(1, d.counter("syncmem_stand_in_retains"));
        EXPECT_EQ(0, sync_warnings.load());
    });
}

TEST(cuda_driver, one_warning_where_sync_memops_cannot_be_set)
{
    with_driver(stand_in, [](driver &d) {
        uintptr_t r = d.reserve(16 * mib, VMM);
        ASSERT_TRUE(r && d.map(r, 2 * mib) && d.map(r + 2 * mib, 2 * mib));
        d.counter("syncmem_stand_in_refuse_flags") = 1;
        uct_syncmem_cuda_extent_t extent;
        uct_syncmem_cuda_buf_t buf = {};
        int fd;

        for (uintptr_t at : {r, r + 2 * mib, r}) {
            ASSERT_EQ(UCS_OK, locate(at, 8, &extent, &buf));
            EXPECT_EQ(UCS_OK, uct_syncmem_cuda_prepare(&buf, &extent.span, 1,
                                                       UCS_LOG_LEVEL_ERROR,
                                                       &fd));
            close(fd);
        }
        EXPECT_EQ(1, sync_warnings.load());
        EXPECT_EQ(0, d.counter("syncmem_stand_in_set_flags"));
    });
}

// A driver older than CUDA 11.7 (no cuMemGetHandleForAddressRange) and
// 12.1 (no cuCtxSetFlags): CUDA memory is still detected and located, so
// that a peer-memory module can register it; nothing is exported.
TEST(cuda_driver, an_old_driver_detects_and_leaves_registration_to_peermem)
{
    with_driver(stand_in_old, [](driver &d) {
        uintptr_t a = d.alloc(mib);
        uintptr_t r = d.reserve(16 * mib, VMM);
        ASSERT_TRUE(a && r && d.map(r, 2 * mib));
        uct_syncmem_cuda_extent_t extent;
        uct_syncmem_cuda_buf_t buf = {};
        uct_syncmem_md_t md = {};
        int fd;

        EXPECT_FALSE(uct_syncmem_cuda_exports());
        ASSERT_EQ(UCS_OK, uct_syncmem_cuda_init(&md, 0, 0));
        md.dmabuf = 1;
        EXPECT_FALSE(uct_syncmem_cuda_can_reg(&md)) << "dma-buf only";
        md.peermem = 1;
        EXPECT_TRUE(uct_syncmem_cuda_can_reg(&md)) << "with peer memory";
        uct_syncmem_cuda_cleanup(&md);

        ASSERT_EQ(UCS_OK, locate(a, 8, &extent, &buf));
        EXPECT_EQ(UCS_ERR_UNSUPPORTED,
                  uct_syncmem_cuda_prepare(&buf, &extent.span, 1,
                                           UCS_LOG_LEVEL_DEBUG, &fd));
        EXPECT_EQ(-1, fd);
        EXPECT_EQ(1, d.counter("syncmem_stand_in_attr_syncs"));
        EXPECT_EQ(0, sync_warnings.load());

        ASSERT_EQ(UCS_OK, locate(r + 8, 8, &extent, &buf));
        EXPECT_EQ(UCS_OK, uct_syncmem_cuda_prepare(&buf, &extent.span, 0,
                                                   UCS_LOG_LEVEL_ERROR,
                                                   &fd));
        EXPECT_EQ(1, sync_warnings.load()) << "no SYNC_MEMOPS for VMM";
    });
}

// An MR holds its GPU memory after the application frees it, and a UCX
// with CUDA reports the free before the driver frees: so no unused CUDA
// registration is kept unless UCX_SYNCMEM_CUDA_REG_CACHE asks for it, and
// freed memory returns as soon as UCP lets go of it. (The release itself
// is test/gpu/cuda_reg's "free-after-release", on a GPU.)
TEST(cuda_cache, keeps_no_unused_registration_by_default)
{
    uct_md_config_t *config;

    ASSERT_EQ(UCS_OK, uct_md_config_read(&uct_syncmem_component, NULL, NULL,
                                         &config));
    EXPECT_EQ(0u, ucs_derived_of(config, uct_syncmem_md_config_t)
                          ->cuda_reg_cache);
    uct_config_release(config);
}
