/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - verbs memory regions: the calls every registration path makes
 * (the MD's own, the registration cache's, the CUDA one's), with the
 * message that says what to check when the device refuses.
 */
#include "syncmem_md.h"

#include <errno.h>
#include <string.h>

/* Verbs access for what the caller asked for, and no more. Verbs wants
 * local write with remote write or atomics. No access bits at all means
 * every access, as with UCX's own verbs MD. */
int uct_syncmem_mr_access(unsigned flags)
{
    int access = 0;

    if (!(flags & UCT_MD_MEM_ACCESS_ALL)) {
        flags |= UCT_MD_MEM_ACCESS_ALL;
    }
    if (flags & UCT_MD_MEM_ACCESS_LOCAL_WRITE) {
        access |= IBV_ACCESS_LOCAL_WRITE;
    }
    if (flags & UCT_MD_MEM_ACCESS_REMOTE_PUT) {
        access |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    }
    if (flags & UCT_MD_MEM_ACCESS_REMOTE_GET) {
        access |= IBV_ACCESS_REMOTE_READ;
    }
    if (flags & UCT_MD_MEM_ACCESS_REMOTE_ATOMIC) {
        access |= IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE;
    }
    return access;
}

ucs_status_t uct_syncmem_mr_reg(uct_syncmem_md_t *md, void *address,
                                size_t length, int access,
                                ucs_log_level_t level, struct ibv_mr **mr_p)
{
    struct ibv_mr *mr;

    /* the kernel pins memory for write where windows may bind (its
     * ib_access_writable()): read-only memory could not be registered */
    if (access & IBV_ACCESS_LOCAL_WRITE) {
        access |= md->mr_access;
    }
    mr = ibv_reg_mr(md->pd, address, length, access);
    if (mr != NULL) {
        *mr_p = mr;
        return UCS_OK;
    }

    switch (errno) {
    case EFAULT:
        ucs_log(level, "syncmem: ibv_reg_mr(%p, %zu, access 0x%x) on %s:"
                " memory is not mapped%s", address, length, access, md->name,
                (access & IBV_ACCESS_LOCAL_WRITE) ?
                " or not writable (asked for write access)" : "");
        return UCS_ERR_INVALID_ADDR;
    case ENOMEM:
    case EAGAIN:
        ucs_log(level, "syncmem: ibv_reg_mr(%p, %zu) on %s: out of memory;"
                " check 'ulimit -l' (locked memory)", address, length,
                md->name);
        return UCS_ERR_NO_MEMORY;
    default:
        ucs_log(level, "syncmem: ibv_reg_mr(%p, %zu, access 0x%x) on %s"
                " failed: %m", address, length, access, md->name);
        return UCS_ERR_IO_ERROR;
    }
}

ucs_status_t uct_syncmem_mr_reg_dmabuf(uct_syncmem_md_t *md, int fd,
                                       uint64_t offset, size_t length,
                                       uintptr_t iova, int access,
                                       ucs_log_level_t level,
                                       struct ibv_mr **mr_p)
{
    ucs_status_t status;
    struct ibv_mr *mr;

    mr = ibv_reg_dmabuf_mr(md->pd, offset, length, iova, fd, access);
    if (mr != NULL) {
        *mr_p = mr;
        return UCS_OK;
    }

    if ((errno == EOPNOTSUPP) || (errno == ENOSYS)) {
        ucs_log(level, "syncmem: ibv_reg_dmabuf_mr(fd %d, %zu bytes) on %s:"
                " %m; this device (its kernel driver or rdma-core provider)"
                " does not take dma-bufs", fd, length, md->name);
        return UCS_ERR_UNSUPPORTED;
    }
    status = (errno == ENOMEM) ? UCS_ERR_NO_MEMORY : UCS_ERR_IO_ERROR;
    ucs_log(level, "syncmem: ibv_reg_dmabuf_mr(fd %d, offset %lu, %zu bytes,"
            " access 0x%x) on %s failed: %m", fd, offset, length, access,
            md->name);
    return status;
}

void uct_syncmem_mr_dereg(struct ibv_mr *mr)
{
    void *address = mr->addr;
    int ret;

    ret = ibv_dereg_mr(mr);
    if (ret) {
        /* nothing to give back to: the caller's handle is gone either way */
        ucs_warn("syncmem: ibv_dereg_mr(%p) failed: %s", address,
                 strerror(ret));
    }
}
