/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The three verbs calls of syncmem_md.c that syncmem_cuda.c makes,
 * replaced at link time for test/gpu/cuda_reg, which has no HCA.
 *
 * A dma-buf registration is checked for what an HCA would refuse or get
 * wrong: an fd that is not a dma-buf, a range the dma-buf does not cover,
 * an iova at another offset in its page than the dma-buf offset (the HCA
 * maps whole pages), and less access than the case asked for. Each MR
 * keeps a dup of the fd until it is deregistered, as the kernel keeps its
 * reference to the dma-buf: the GPU memory stays held while the MR lives,
 * even after cuMemFree, which is what the cases about freed buffers see.
 * The peer-memory path (uct_syncmem_mr_reg) must never be taken: the fake
 * MD has no peer memory.
 */
#include "cuda_reg.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


typedef struct reg_stub_mr {
    struct ibv_mr      mr;       /* first: what syncmem_cuda.c holds */
    int                fd;       /* dup of the dma-buf */
    int                access;
    struct reg_stub_mr *next;    /* in reg_stub.live */
} reg_stub_mr_t;

static struct {
    pthread_mutex_t lock;        /* MDs register from several threads */
    reg_stub_mr_t   *live;
    unsigned        num_live;
    unsigned        calls;
    uint32_t        next_key;
} reg_stub = {
    .lock     = PTHREAD_MUTEX_INITIALIZER,
    .next_key = 1
};

int reg_stub_want_access;


/* What an HCA would refuse: 0 (and the case failed) if it would. */
static int reg_stub_check(int fd, uint64_t offset, size_t length,
                          uintptr_t iova)
{
    char path[64], link[128] = "";
    off_t size;

    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    if (readlink(path, link, sizeof(link) - 1) < 0) {
        cuda_reg_fail("reg_dmabuf_mr: fd %d: %m", fd);
        return 0;
    }
    /* the name of a dma-buf's file changed in Linux 5.15 */
    if (strncmp(link, "/dmabuf:", 8) &&
        strncmp(link, "anon_inode:dmabuf", 17)) {
        cuda_reg_fail("reg_dmabuf_mr: fd %d is %s, not a dma-buf", fd, link);
        return 0;
    }

    size = lseek(fd, 0, SEEK_END);
    if (size < 0) {
        cuda_reg_fail("reg_dmabuf_mr: lseek(dma-buf fd %d): %m", fd);
        return 0;
    }
    if ((length == 0) || (offset > (uint64_t)size) ||
        (length > (uint64_t)size - offset)) {
        cuda_reg_fail("reg_dmabuf_mr: the dma-buf is %lld bytes: it does not"
                      " cover offset %" PRIu64 " + length %zu",
                      (long long)size, offset, length);
        return 0;
    }

    if ((iova ^ offset) & (cuda_reg_page - 1)) {
        cuda_reg_fail("reg_dmabuf_mr: iova 0x%lx and dma-buf offset 0x%" PRIx64
                      " are at different offsets in their pages", iova,
                      offset);
        return 0;
    }
    return 1;
}

ucs_status_t uct_syncmem_mr_reg_dmabuf(uct_syncmem_md_t *md, int fd,
                                       uint64_t offset, size_t length,
                                       uintptr_t iova, int access,
                                       ucs_log_level_t level,
                                       struct ibv_mr **mr_p)
{
    int want = reg_stub_want_access;
    reg_stub_mr_t *mr;

    __atomic_add_fetch(&reg_stub.calls, 1, __ATOMIC_RELAXED);
    if (!reg_stub_check(fd, offset, length, iova)) {
        return UCS_ERR_INVALID_PARAM;   /* ibv_reg_dmabuf_mr: EINVAL */
    }
    /* an HCA would register it: only the case is wrong */
    EXPECT((access & want) == want, "reg_dmabuf_mr: access 0x%x for"
           " 0x%lx+%zu lacks 0x%x, which was asked for", access, iova,
           length, want & ~access);

    mr = calloc(1, sizeof(*mr));
    if (mr == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    mr->fd = dup(fd);
    if (mr->fd < 0) {
        cuda_reg_fail("reg_dmabuf_mr: dup(%d): %m", fd);
        free(mr);
        return UCS_ERR_IO_ERROR;
    }
    mr->access    = access;
    mr->mr.addr   = (void*)iova;
    mr->mr.length = length;

    pthread_mutex_lock(&reg_stub.lock);
    mr->mr.lkey   = reg_stub.next_key++;
    mr->mr.rkey   = mr->mr.lkey;
    mr->next      = reg_stub.live;
    reg_stub.live = mr;
    ++reg_stub.num_live;
    pthread_mutex_unlock(&reg_stub.lock);

    *mr_p = &mr->mr;
    return UCS_OK;
}

ucs_status_t uct_syncmem_mr_reg(uct_syncmem_md_t *md, void *address,
                                size_t length, int access,
                                ucs_log_level_t level, struct ibv_mr **mr_p)
{
    cuda_reg_fail("reg_mr(%p, %zu): the peer-memory path, on an MD that"
                  " takes dma-bufs and has no peer memory", address, length);
    return UCS_ERR_UNSUPPORTED;
}

void uct_syncmem_mr_dereg(struct ibv_mr *ibv_mr)
{
    reg_stub_mr_t *mr = ucs_container_of(ibv_mr, reg_stub_mr_t, mr);
    reg_stub_mr_t **p;
    int found;

    pthread_mutex_lock(&reg_stub.lock);
    for (p = &reg_stub.live; (*p != NULL) && (*p != mr); p = &(*p)->next) {
    }
    found = *p != NULL;
    if (found) {
        *p = mr->next;
        --reg_stub.num_live;
    }
    pthread_mutex_unlock(&reg_stub.lock);

    if (!found) {
        cuda_reg_fail("dereg_mr(%p): not a live MR (deregistered twice?)",
                      ibv_mr);
        return;
    }
    close(mr->fd);
    free(mr);
}

unsigned reg_stub_live(void)
{
    return __atomic_load_n(&reg_stub.num_live, __ATOMIC_RELAXED);
}

unsigned reg_stub_calls(void)
{
    return __atomic_load_n(&reg_stub.calls, __ATOMIC_RELAXED);
}

/* The live MR with this lkey, or NULL; with reg_stub.lock held. */
static reg_stub_mr_t *reg_stub_find(uint32_t lkey)
{
    reg_stub_mr_t *mr;

    for (mr = reg_stub.live; (mr != NULL) && (mr->mr.lkey != lkey);
         mr = mr->next) {
    }
    return mr;
}

int reg_stub_is_live(uint32_t lkey)
{
    int live;

    pthread_mutex_lock(&reg_stub.lock);
    live = reg_stub_find(lkey) != NULL;
    pthread_mutex_unlock(&reg_stub.lock);
    return live;
}

int reg_stub_access(const struct ibv_mr *ibv_mr)
{
    reg_stub_mr_t *mr;
    int access;

    pthread_mutex_lock(&reg_stub.lock);
    mr     = reg_stub_find(ibv_mr->lkey);
    access = ((mr != NULL) && (&mr->mr == ibv_mr)) ? mr->access : -1;
    pthread_mutex_unlock(&reg_stub.lock);
    return access;
}
