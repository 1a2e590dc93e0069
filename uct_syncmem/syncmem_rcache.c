/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the registration cache.
 *
 * Registering memory costs tens of microseconds (pinning pages, filling the
 * HCA's translation tables) and applications send from the same buffers
 * again and again, so mem_reg goes through UCS's rcache: regions keyed by
 * address range, merged when they overlap, evicted least-recently-used
 * first past UCX_SYNCMEM_RCACHE_MAX_REGIONS / _MAX_SIZE, and invalidated by
 * UCM's VM_UNMAPPED event. That last part is what makes a cache safe: without
 * it, munmap and a new mmap at the same address would be served the old
 * registration, whose rkey still reaches the old (pinned) pages.
 *
 * ucs_rcache tells regions apart by mmap-style protection only, so a cached
 * registration has one of two access sets: remote read (PROT_READ) or
 * everything (PROT_WRITE). UCX_SYNCMEM_RCACHE=n gives registrations no
 * broader than asked, at the full cost of each.
 */
#include "syncmem_md.h"
#include "syncmem_hooks.h"

#include <ucs/arch/atomic.h>
#include <ucs/sys/math.h>
#include <ucm/api/ucm.h>
#include <sys/mman.h>


typedef struct uct_syncmem_rregion {
    ucs_rcache_region_t super;
    uct_syncmem_mem_t   memh;
} uct_syncmem_rregion_t;


/* Passed through ucs_rcache_get() to the registration callback. */
typedef struct uct_syncmem_rcache_arg {
    const void      *address; /* what the caller registers */
    int             probe;  /* decline a plain miss: the caller will widen */
    ucs_log_level_t level;  /* for registration failures */
} uct_syncmem_rcache_arg_t;


/*
 * Set by the registration callback, read and cleared by
 * uct_syncmem_rcache_get(). ucs_rcache evicts LRU regions right after it
 * registers a new one, inside the same call and thread, so a deregistration
 * while this is set is an eviction; one without it is an invalidation.
 */
static __thread int uct_syncmem_rcache_registered;


static ucs_status_t uct_syncmem_rcache_mem_reg_cb(void *context,
                                                  ucs_rcache_t *rcache,
                                                  void *arg,
                                                  ucs_rcache_region_t *rregion,
                                                  uint16_t flags)
{
    uct_syncmem_md_t *md                = context;
    uct_syncmem_rregion_t *region       = ucs_derived_of(rregion,
                                                         uct_syncmem_rregion_t);
    const uct_syncmem_rcache_arg_t *get = arg;
    int merged = flags & UCS_RCACHE_MEM_REG_HIDE_ERRORS;
    int access;
    ucs_status_t status;

    if (get->probe && !merged) {
        /* The region has the caller's exact bounds, and they cannot change
         * once it is in the page table; answer so that the caller retries
         * with widened ones. Nothing was registered. */
        return UCS_ERR_CANCELED;
    }

    access = IBV_ACCESS_REMOTE_READ;
    if (rregion->prot & PROT_WRITE) {
        access |= IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
        if (md->dev_attr.atomic_cap != IBV_ATOMIC_NONE) {
            access |= IBV_ACCESS_REMOTE_ATOMIC;
        }
    }

    /* a merged region may fail where its parts did not: rcache retries */
    status = uct_syncmem_mr_reg(md, (void*)rregion->super.start,
                                rregion->super.end - rregion->super.start,
                                access, merged ? UCS_LOG_LEVEL_DEBUG :
                                get->level, &region->memh.mr);
    if (status != UCS_OK) {
        return status;
    }

    region->memh.flags = UCT_SYNCMEM_MEM_FLAG_CACHED;
    uct_syncmem_rcache_registered = 1;
    ucs_atomic_add64(&md->rcache_counters.misses, 1);
    return UCS_OK;
}

static void uct_syncmem_rcache_mem_dereg_cb(void *context, ucs_rcache_t *rcache,
                                            ucs_rcache_region_t *rregion)
{
    uct_syncmem_md_t *md          = context;
    uct_syncmem_rregion_t *region = ucs_derived_of(rregion,
                                                   uct_syncmem_rregion_t);

    if (uct_syncmem_rcache_registered) {
        ucs_atomic_add64(&md->rcache_counters.evictions, 1);
    } else if (!md->closing) {
        ucs_atomic_add64(&md->rcache_counters.invalidations, 1);
    }
    uct_syncmem_mr_dereg(region->memh.mr);
}

static void uct_syncmem_rcache_dump_region_cb(void *context,
                                              ucs_rcache_t *rcache,
                                              ucs_rcache_region_t *rregion,
                                              char *buf, size_t max)
{
    uct_syncmem_rregion_t *region = ucs_derived_of(rregion,
                                                   uct_syncmem_rregion_t);

    snprintf(buf, max, "lkey 0x%x rkey 0x%x", region->memh.mr->lkey,
             region->memh.mr->rkey);
}

static ucs_rcache_ops_t uct_syncmem_rcache_ops = {
    .mem_reg     = uct_syncmem_rcache_mem_reg_cb,
    .mem_dereg   = uct_syncmem_rcache_mem_dereg_cb,
    .dump_region = uct_syncmem_rcache_dump_region_cb,
    UCT_SYNCMEM_RCACHE_OPS_COMPAT_FIELDS
};


static ucs_status_t
uct_syncmem_rcache_get(uct_syncmem_md_t *md, uintptr_t start, uintptr_t end,
                       int prot, uct_syncmem_rcache_arg_t *arg,
                       uct_syncmem_rregion_t **region_p)
{
    ucs_rcache_region_t *rregion;
    ucs_status_t status;
    int registered;

    uct_syncmem_rcache_registered = 0;
    status     = ucs_rcache_get(md->rcache, (void*)start, end - start,
                                UCT_SYNCMEM_RCACHE_GET_ALIGN(md->rcache_align)
                                prot, arg, &rregion);
    registered = uct_syncmem_rcache_registered;
    uct_syncmem_rcache_registered = 0;
    if (status != UCS_OK) {
        return status;
    }

    if (!registered) {
        ucs_atomic_add64(&md->rcache_counters.hits, 1);
    }
    *region_p = ucs_derived_of(rregion, uct_syncmem_rregion_t);
    return UCS_OK;
}

/* Whether every page in [start, end) is mapped; mincore() fails with ENOMEM
 * on a hole. Only asked on a miss, so its cost hides behind registration. */
static int uct_syncmem_rcache_is_mapped(uintptr_t start, uintptr_t end)
{
    size_t page = ucs_get_page_size();
    unsigned char vec[512];
    size_t chunk;

    for (; start < end; start += chunk) {
        chunk = ucs_min(end - start, sizeof(vec) * page);
        if (mincore((void*)start, chunk, vec) != 0) {
            return 0;
        }
    }
    return 1;
}

ucs_status_t uct_syncmem_rcache_reg(uct_syncmem_md_t *md, void *address,
                                    size_t length, int access,
                                    ucs_log_level_t level,
                                    uct_syncmem_mem_t **memh_p)
{
    size_t page = ucs_get_page_size();
    uintptr_t start = ucs_align_down_pow2((uintptr_t)address, page);
    uintptr_t end   = ucs_align_up_pow2((uintptr_t)address + length, page);
    int prot        = (access & IBV_ACCESS_LOCAL_WRITE) ?
                      (PROT_READ | PROT_WRITE) : PROT_READ;
    uct_syncmem_rcache_arg_t arg = {
        .address = address,
        .probe   = md->reg_align > page,
        .level   = level
    };
    uintptr_t wide_start, wide_end;
    uct_syncmem_rregion_t *region;
    ucs_status_t status;

    status = uct_syncmem_rcache_get(md, start, end, prot, &arg, &region);
    if (status == UCS_ERR_CANCELED) {
        /* A miss with REG_ALIGN: register the aligned window around the
         * buffer, so that its neighbours hit, but only over mapped memory.
         * If even that fails (a read-only or PROT_NONE page inside), fall
         * back to the buffer's own pages. */
        wide_start = ucs_align_down_pow2(start, md->reg_align);
        wide_end   = ucs_align_up_pow2(end, md->reg_align);
        if (!uct_syncmem_rcache_is_mapped(wide_start, start)) {
            wide_start = start;
        }
        if (!uct_syncmem_rcache_is_mapped(end, wide_end)) {
            wide_end = end;
        }

        arg.probe = 0;
        arg.level = UCS_LOG_LEVEL_DEBUG;
        status    = uct_syncmem_rcache_get(md, wide_start, wide_end, prot,
                                           &arg, &region);
        if ((status != UCS_OK) &&
            ((wide_start != start) || (wide_end != end))) {
            arg.level = level;
            status    = uct_syncmem_rcache_get(md, start, end, prot, &arg,
                                               &region);
        }
    }
    if (status != UCS_OK) {
        return status;
    }

    *memh_p = &region->memh;
    return UCS_OK;
}

void uct_syncmem_rcache_dereg(uct_syncmem_md_t *md, uct_syncmem_mem_t *memh)
{
    ucs_rcache_region_put(md->rcache,
                          &ucs_container_of(memh, uct_syncmem_rregion_t,
                                            memh)->super);
}

ucs_status_t uct_syncmem_rcache_init(uct_syncmem_md_t *md,
                                     const uct_syncmem_md_config_t *config)
{
    size_t page = ucs_get_page_size();
    ucs_rcache_params_t params;
    ucs_status_t status;

    md->reg_align = (config->reg_align == UCS_MEMUNITS_AUTO) ? page :
                    config->reg_align;
    if (!ucs_is_pow2(md->reg_align) || (md->reg_align < page)) {
        ucs_error("syncmem: UCX_SYNCMEM_REG_ALIGN=%zu must be a power of 2"
                  " and at least the page size (%zu)", md->reg_align, page);
        return UCS_ERR_INVALID_PARAM;
    }

    if (config->rcache_mode == UCS_NO) {
        ucs_debug("syncmem: %s: registration cache disabled"
                  " (UCX_SYNCMEM_RCACHE=n)", md->name);
        return UCS_OK;
    }

    md->rcache_align = page;
    uct_syncmem_rcache_set_params(&params, &config->rcache);
    UCT_SYNCMEM_RCACHE_SET_ALIGN(&params, &config->rcache, page)
    params.region_struct_size = sizeof(uct_syncmem_rregion_t);
    params.ucm_events         = UCM_EVENT_VM_UNMAPPED;
    params.context            = md;
    params.ops                = &uct_syncmem_rcache_ops;

    status = ucs_rcache_create(&params, md->name, NULL, &md->rcache);
    if (status == UCS_OK) {
        /* UCP weighs zcopy against bcopy by this: with the cache, repeated
         * registrations of a buffer cost a lookup */
        md->reg_cost = ucs_linear_func_make(
                UCT_SYNCMEM_RCACHE_OVERHEAD(&config->rcache), 0);
        ucs_debug("syncmem: %s: registration cache on, max %lu regions,"
                  " %zu bytes, aligned to %zu", md->name, params.max_regions,
                  params.max_size, md->reg_align);
        return UCS_OK;
    }

    /* Without unmap events a cache could serve stale registrations. */
    md->rcache = NULL;
    if (config->rcache_mode == UCS_YES) {
        ucs_error("syncmem: %s: cannot create the registration cache: %s;"
                  " it needs UCM memory events (check UCX_MEM_EVENTS,"
                  " UCX_MEM_MMAP_HOOK_MODE), or set UCX_SYNCMEM_RCACHE=n",
                  md->name, ucs_status_string(status));
        return status;
    }
    ucs_debug("syncmem: %s: no registration cache (%s), every mem_reg"
              " registers", md->name, ucs_status_string(status));
    return UCS_OK;
}

void uct_syncmem_rcache_cleanup(uct_syncmem_md_t *md)
{
    const uct_syncmem_rcache_counters_t *c = &md->rcache_counters;

    if (md->rcache == NULL) {
        return;
    }

    ucs_debug("syncmem: %s registration cache: %lu hits, %lu misses, %lu"
              " evictions, %lu invalidations", md->name, c->hits, c->misses,
              c->evictions, c->invalidations);
    md->closing = 1;
    ucs_rcache_destroy(md->rcache);
}

ucs_status_t uct_syncmem_md_rcache_counters(uct_md_h tl_md,
                                            uct_syncmem_rcache_counters_t *c)
{
    uct_syncmem_md_t *md = ucs_derived_of(tl_md, uct_syncmem_md_t);

    if (md->rcache == NULL) {
        return UCS_ERR_UNSUPPORTED;
    }
    *c = md->rcache_counters;
    return UCS_OK;
}
