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
