/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - memory handles and remote keys: what mem_reg gives its caller,
 * what mkey_pack gives a peer, and how a key packed for invalidation is
 * revoked.
 *
 * A handle is the caller's own even when the registration under it is
 * shared (the registration cache, CUDA's): an rkey packed for invalidation
 * belongs to that handle alone, so revoking it leaves every other handle
 * on the same registration working. Such a key is, by what the memory is:
 *   - a registration of the handle's own (RCACHE=n): its MR's key, which
 *     deregistration revokes;
 *   - host memory in the cache: a memory window over the cached MR
 *     (syncmem_mw.c), or where the device has none (or MW=n), a
 *     registration of exactly the handle's range;
 *   - CUDA memory: the CUDA registration made again, for this handle
 *     (windows are not offered over GPU memory).
 */
#include "syncmem_md.h"
#include "syncmem_mw.h"

#include <ucs/algorithm/crc.h>
#include <ucs/arch/atomic.h>
#include <string.h>


/* Keys made for invalidation, and deregistrations that invalidated, by
 * every md (uct_syncmem_md_inv_keys) */
static uint64_t uct_syncmem_memh_inv_keys;
static uint64_t uct_syncmem_memh_invalidations;


/* What uct_mem_h points to: one per mem_reg. */
typedef struct uct_syncmem_memh {
    struct ibv_mr     *mr;       /* first: the lkey of the data path */
    uct_syncmem_mem_t *reg;      /* the registration under it */
    void              *address;  /* what the caller registered */
    size_t            length;
    int               access;    /* IBV_ACCESS_* it asked for */
    int               inv;       /* packed for invalidation: its key is */
    uint32_t          inv_rkey;  /* ...this, and it is */
    uct_syncmem_mw_t  *mw;       /* ...a window of this handle's, */
    struct ibv_mr     *inv_mr;   /* ...or a registration of its own */
} uct_syncmem_memh_t;


/* Whether this UCX has CUDA support of its own: cuda_copy detects CUDA
 * memory, copies it, and UCM's hooks report its frees. */
int uct_syncmem_memh_ucx_has_cuda(void)
{
    static int has_cuda = -1;
    uct_component_h *components;
    unsigned i, num;
    int found = 0;

    if (has_cuda >= 0) {
        return has_cuda;
    }
    if (uct_query_components(&components, &num) == UCS_OK) {
        for (i = 0; i < num; ++i) {
            uct_component_attr_t attr = {
                .field_mask = UCT_COMPONENT_ATTR_FIELD_NAME
            };
            if ((uct_component_query(components[i], &attr) == UCS_OK) &&
                !strcmp(attr.name, "cuda_cpy")) {
                found = 1;
            }
        }
        uct_release_component_list(components);
    }
    has_cuda = found;
    return has_cuda;
}

/* Said once, at the first CUDA registration, when UCP cannot know CUDA
 * memory: it would copy from it with the CPU (and crash), and keep
 * registrations of freed buffers in its own cache. */
static void uct_syncmem_memh_cuda_advice(void)
{
    static int said;

    if (uct_syncmem_memh_ucx_has_cuda() ||
        __atomic_exchange_n(&said, 1, __ATOMIC_RELAXED)) {
        return;
    }
    if (ucs_global_opts.enable_memtype_cache != UCS_NO) {
        ucs_warn("syncmem: registering CUDA memory, but this UCX has no CUDA"
                 " support (no cuda_copy), so UCP takes CUDA buffers for host"
                 " memory: set UCX_MEMTYPE_CACHE=n for syncmem to tell it,"
                 " and UCX_RCACHE_ENABLE=n (see uct_syncmem(7), GPU memory)");
    } else {
        ucs_debug("syncmem: CUDA memory over a UCX without CUDA support:"
                  " UCP's registration cache sees no cudaFree, keep"
                  " UCX_RCACHE_ENABLE=n");
    }
}

static uct_syncmem_memh_t *
uct_syncmem_memh_get(uct_syncmem_md_t *md, uct_syncmem_mem_t *reg,
                     void *address, size_t length, int access)
{
    uct_syncmem_memh_t *memh;

    /* uct_syncmem_memh_lkey() */
    UCS_STATIC_ASSERT(ucs_offsetof(uct_syncmem_memh_t, mr) == 0);
    ucs_spin_lock(&md->memh_lock);
    memh = ucs_mpool_get(&md->memh_mp);
    ucs_spin_unlock(&md->memh_lock);
    if (memh == NULL) {
        return NULL;
    }

    memh->mr       = reg->mr;
    memh->reg      = reg;
    memh->address  = address;
    memh->length   = length;
    memh->access   = access;
    memh->inv      = 0;
    memh->mw       = NULL;
    memh->inv_mr   = NULL;
    return memh;
}

static void uct_syncmem_memh_put(uct_syncmem_md_t *md,
                                 uct_syncmem_memh_t *memh)
{
    ucs_spin_lock(&md->memh_lock);
    ucs_mpool_put(memh);
    ucs_spin_unlock(&md->memh_lock);
}

static ucs_mpool_ops_t uct_syncmem_memh_mp_ops = {
    .chunk_alloc   = ucs_mpool_chunk_malloc,
    .chunk_release = ucs_mpool_chunk_free,
    .obj_init      = NULL,
    .obj_cleanup   = NULL
};

ucs_status_t uct_syncmem_memh_init(uct_syncmem_md_t *md)
{
    ucs_spinlock_init(&md->memh_lock, 0);
    return uct_syncmem_mpool_init(&md->memh_mp, sizeof(uct_syncmem_memh_t),
                                  UCS_SYS_CACHE_LINE_SIZE, 128,
                                  &uct_syncmem_memh_mp_ops, "syncmem_memh");
}

void uct_syncmem_memh_cleanup(uct_syncmem_md_t *md)
{
    ucs_mpool_cleanup(&md->memh_mp, 1);
    ucs_spinlock_destroy(&md->memh_lock);
}

/* The registration under a handle, shared or not. */
static ucs_status_t uct_syncmem_memh_reg(uct_syncmem_md_t *md, void *address,
                                         size_t length, int access,
                                         ucs_log_level_t level,
                                         uct_syncmem_mem_t **reg_p)
{
    uct_syncmem_mem_t *reg;
    ucs_status_t status;

    /* CUDA memory never enters the host cache: in a process that uses
     * CUDA the driver is asked first (NO_ELEM: not CUDA memory); one that
     * has not loaded it asks nothing. CUDA memory is registered with every
     * access. */
    status = uct_syncmem_cuda_reg(md, address, length, level, reg_p);
    if (status == UCS_OK) {
        uct_syncmem_memh_cuda_advice();
    }
    if ((status == UCS_ERR_NO_ELEM) && (md->rcache != NULL)) {
        status = uct_syncmem_rcache_reg(md, address, length, access, level,
                                        reg_p);
    }
    if (status != UCS_ERR_NO_ELEM) {
        return status;
    }

    reg = ucs_malloc(sizeof(*reg), "syncmem_reg");
    if (reg == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    status = uct_syncmem_mr_reg(md, address, length, access, level, &reg->mr);
    if (status != UCS_OK) {
        ucs_free(reg);
        return status;
    }

    reg->flags = 0;
    *reg_p     = reg;
    return UCS_OK;
}

static void uct_syncmem_memh_reg_put(uct_syncmem_md_t *md,
                                     uct_syncmem_mem_t *reg)
{
    if (reg->flags & UCT_SYNCMEM_MEM_FLAG_CACHED) {
        uct_syncmem_rcache_dereg(md, reg);
    } else if (reg->flags & UCT_SYNCMEM_MEM_FLAG_CUDA) {
        uct_syncmem_cuda_dereg(md, reg);
    } else {
        uct_syncmem_mr_dereg(reg->mr);
        ucs_free(reg);
    }
}

ucs_status_t uct_syncmem_memh_mem_reg(uct_md_h tl_md, void *address,
                                      size_t length, UCT_SYNCMEM_MEM_REG_ARGS,
                                      uct_mem_h *memh_p)
{
    unsigned         flags  = UCT_SYNCMEM_MEM_REG_FLAGS;
    uct_syncmem_md_t *md    = ucs_derived_of(tl_md, uct_syncmem_md_t);
    ucs_log_level_t  level  = uct_md_reg_log_lvl(flags);
    int              access = uct_syncmem_mr_access(flags);
    uct_syncmem_memh_t *memh;
    uct_syncmem_mem_t *reg;
    ucs_status_t status;

    if (length == 0) {
        ucs_log(level, "syncmem: cannot register 0 bytes at %p on %s",
                address, md->name);
        return UCS_ERR_INVALID_PARAM;
    }

    status = uct_syncmem_memh_reg(md, address, length, access, level, &reg);
    if (status != UCS_OK) {
        return status;
    }

    memh = uct_syncmem_memh_get(md, reg, address, length, access);
    if (memh == NULL) {
        uct_syncmem_memh_reg_put(md, reg);
        return UCS_ERR_NO_MEMORY;
    }
    *memh_p = memh;
    return UCS_OK;
}

ucs_status_t uct_syncmem_md_mem_reg_dmabuf(uct_md_h tl_md, int fd,
                                           uint64_t offset, size_t length,
                                           void *address, unsigned flags,
                                           uct_mem_h *memh_p)
{
    uct_syncmem_md_t *md = ucs_derived_of(tl_md, uct_syncmem_md_t);
    int access           = uct_syncmem_mr_access(flags);
    uct_syncmem_memh_t *memh;
    uct_syncmem_mem_t *reg;
    ucs_status_t status;

    reg = ucs_malloc(sizeof(*reg), "syncmem_reg");
    if (reg == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    status = uct_syncmem_mr_reg_dmabuf(md, fd, offset, length,
                                       (uintptr_t)address, access,
                                       uct_md_reg_log_lvl(flags), &reg->mr);
    if (status != UCS_OK) {
        ucs_free(reg);
        return status;
    }
    reg->flags = 0;

    memh = uct_syncmem_memh_get(md, reg, address, length, access);
    if (memh == NULL) {
        uct_syncmem_memh_reg_put(md, reg);
        return UCS_ERR_NO_MEMORY;
    }
    *memh_p = memh;
    return UCS_OK;
}

/* A key of this handle's own, which uct_syncmem_memh_revoke() kills. */
static ucs_status_t uct_syncmem_memh_inv_key(uct_syncmem_md_t *md,
                                             uct_syncmem_memh_t *memh)
{
    ucs_status_t status;

    if (memh->inv) {
        return UCS_OK;  /* packed for invalidation before: the same key */
    }

    if (!(memh->reg->flags & (UCT_SYNCMEM_MEM_FLAG_CACHED |
                              UCT_SYNCMEM_MEM_FLAG_CUDA))) {
        memh->inv_rkey = memh->reg->mr->rkey;
    } else if (memh->reg->flags & UCT_SYNCMEM_MEM_FLAG_CUDA) {
        status = uct_syncmem_cuda_reg_again(md, memh->reg, &memh->inv_mr);
        if (status != UCS_OK) {
            return status;
        }
        memh->inv_rkey = memh->inv_mr->rkey;
    } else if ((md->mw != NULL) && (memh->access & IBV_ACCESS_LOCAL_WRITE)) {
        /* the MR allows binding where it is writable (syncmem_mr.c); the
         * window no more than the MR allows (syncmem_rcache.c) */
        status = uct_syncmem_mw_bind(md->mw, memh->reg->mr, memh->address,
                                     memh->length,
                                     (md->dev_attr.atomic_cap ==
                                      IBV_ATOMIC_NONE) ?
                                     (memh->access &
                                      ~IBV_ACCESS_REMOTE_ATOMIC) :
                                     memh->access, &memh->mw);
        if (status != UCS_OK) {
            return status;
        }
        memh->inv_rkey = memh->mw->ibmw->rkey;
    } else {
        status = uct_syncmem_mr_reg(md, memh->address, memh->length,
                                    memh->access, UCS_LOG_LEVEL_ERROR,
                                    &memh->inv_mr);
        if (status != UCS_OK) {
            return status;
        }
        memh->inv_rkey = memh->inv_mr->rkey;
    }

    memh->inv = 1;
    ucs_atomic_add64(&uct_syncmem_memh_inv_keys, 1);
    ucs_trace("syncmem: %s: memh %p (%p, %zu bytes): rkey 0x%x for"
              " invalidation", md->name, memh, memh->address, memh->length,
              memh->inv_rkey);
    return UCS_OK;
}

/* Kills the handle's own key, if it has one. */
static void uct_syncmem_memh_revoke(uct_syncmem_md_t *md,
                                    uct_syncmem_memh_t *memh)
{
    if (memh->mw != NULL) {
        uct_syncmem_mw_unbind(md->mw, memh->mw);
        memh->mw = NULL;
    }
    if (memh->inv_mr != NULL) {
        uct_syncmem_mr_dereg(memh->inv_mr);
        memh->inv_mr = NULL;
    }
}

ucs_status_t uct_syncmem_memh_mem_dereg(uct_md_h tl_md,
                                        const uct_md_mem_dereg_params_t *params)
{
    uct_syncmem_md_t *md = ucs_derived_of(tl_md, uct_syncmem_md_t);
    uct_syncmem_memh_t *memh;
    uct_completion_t *comp;
    unsigned flags;

    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 1);
    memh  = params->memh;
    flags = UCT_MD_MEM_DEREG_FIELD_VALUE(params, flags, FIELD_FLAGS, 0);
    comp  = UCT_MD_MEM_DEREG_FIELD_VALUE(params, comp, FIELD_COMPLETION,
                                         NULL);

    if ((flags & UCT_MD_MEM_DEREG_FLAG_INVALIDATE) && (comp == NULL)) {
        ucs_error("syncmem: %s: mem_dereg with FLAG_INVALIDATE needs a"
                  " completion (memh %p)", md->name, memh);
        return UCS_ERR_INVALID_PARAM;
    }

    /* every window goes before the MR under it, invalidated or not: a
     * bound window keeps the device from deregistering it */
    uct_syncmem_memh_revoke(md, memh);
    uct_syncmem_memh_reg_put(md, memh->reg);
    uct_syncmem_memh_put(md, memh);

    if (flags & UCT_MD_MEM_DEREG_FLAG_INVALIDATE) {
        ucs_atomic_add64(&uct_syncmem_memh_invalidations, 1);
        /* the key packed with FLAG_INVALIDATE is dead now; one packed
         * without it was not asked to be (uct_v2.h) */
        uct_invoke_completion(comp, UCS_OK);
    }
    return UCS_OK;
}

static uint16_t uct_syncmem_rkey_crc(const uct_syncmem_packed_rkey_t *packed)
{
    return ucs_crc16(packed, offsetof(uct_syncmem_packed_rkey_t, crc));
}

ucs_status_t uct_syncmem_memh_mkey_pack(uct_md_h tl_md, uct_mem_h tl_memh,
                                        UCT_SYNCMEM_MKEY_PACK_REGION_ARGS
                                        const uct_md_mkey_pack_params_t *params,
                                        void *rkey_buffer)
{
    uct_syncmem_md_t *md              = ucs_derived_of(tl_md,
                                                       uct_syncmem_md_t);
    uct_syncmem_memh_t *memh          = tl_memh;
    uct_syncmem_packed_rkey_t *packed = rkey_buffer;
    unsigned flags = UCS_PARAM_VALUE(UCT_MD_MKEY_PACK_FIELD, params, flags,
                                     FLAGS, 0);
    ucs_status_t status;

    packed->magic = UCT_SYNCMEM_RKEY_MAGIC;
    if (flags & UCT_SYNCMEM_PACK_INVALIDATE) {
        status = uct_syncmem_memh_inv_key(md, memh);
        if (status != UCS_OK) {
            return status;
        }
        packed->rkey = memh->inv_rkey;
    } else {
        packed->rkey = memh->mr->rkey;
    }
    packed->crc = uct_syncmem_rkey_crc(packed);
    return UCS_OK;
}

ucs_status_t uct_syncmem_memh_rkey_unpack(uct_component_t *component,
                                          const void *rkey_buffer,
                                          UCT_SYNCMEM_RKEY_UNPACK_PARAMS_ARG
                                          uct_rkey_t *rkey_p, void **handle_p)
{
    uct_syncmem_packed_rkey_t packed;

    /* the buffer comes from the network: it may be unaligned */
    memcpy(&packed, rkey_buffer, sizeof(packed));
    if ((packed.magic != UCT_SYNCMEM_RKEY_MAGIC) ||
        (packed.crc != uct_syncmem_rkey_crc(&packed))) {
        ucs_error("syncmem: remote key buffer %p is not a syncmem key (magic"
                  " 0x%x crc 0x%x); was it packed by another transport or"
                  " damaged?", rkey_buffer, packed.magic, packed.crc);
        return UCS_ERR_INVALID_PARAM;
    }

    *rkey_p   = packed.rkey;
    *handle_p = NULL;
    return UCS_OK;
}

uint64_t uct_syncmem_md_inv_keys(void)
{
    return uct_syncmem_memh_inv_keys;
}

uint64_t uct_syncmem_md_invalidations(void)
{
    return uct_syncmem_memh_invalidations;
}

const uct_syncmem_mem_t *uct_syncmem_md_memh_reg(uct_mem_h memh)
{
    return ((const uct_syncmem_memh_t*)memh)->reg;
}
