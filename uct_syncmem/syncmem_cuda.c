/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - GPU (CUDA) memory: registration through dma-buf, and the cache
 * of CUDA registrations.
 *
 * UCX 1.13 registers GPU memory only through a vendor peer-memory kernel
 * module. The upstream way is dma-buf: the CUDA driver exports device
 * memory as a dma-buf fd (cuMemGetHandleForAddressRange), and the HCA maps
 * it (ibv_reg_dmabuf_mr). With a peer-memory module loaded, plain
 * ibv_reg_mr on the device pointer works too, and is the fallback. The
 * driver itself is syncmem_cuda_driver.c's.
 *
 * A registration covers what is mapped around the buffer: the mapped
 * pieces that hold it (syncmem_cuda.h: the extent), a cuMemAlloc
 * allocation, a VMM mapping or several side by side, a pool allocation;
 * with every access the device grants. Regions are found by their pieces
 * (start, size and the driver's buffer id, which no later allocation or
 * mapping gets), asked of the driver at every mem_reg: memory freed, or
 * unmapped and mapped again at the same address, is a new registration,
 * never served the old one.
 *
 * An MR holds its GPU memory, even after the application frees it. So an
 * unused region is deregistered as it is released, unless
 * UCX_SYNCMEM_CUDA_REG_CACHE keeps some: then one whose memory is gone is
 * dropped as it is released or at the next CUDA registration, and the
 * ones kept are bounded in number and exported bytes.
 */
#include "syncmem_md.h"
#include "syncmem_cuda_driver.h"

#include <ucs/datastruct/khash.h>
#include <ucs/datastruct/list.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>


/* One registration of CUDA memory. */
typedef struct uct_syncmem_cuda_region {
    uct_syncmem_mem_t              memh;     /* first: memh <-> region */
    struct uct_syncmem_cuda_region *next;    /* same first piece */
    ucs_list_link_t                list;     /* unused: in cache->lru */
    unsigned                       refcount; /* mem_reg handles out */
    uct_syncmem_cuda_span_t        span;     /* what the MR is */
    unsigned                       num_pieces;
    uct_syncmem_cuda_piece_t       pieces[]; /* what it was made of */
} uct_syncmem_cuda_region_t;

KHASH_MAP_INIT_INT64(uct_syncmem_cuda_regions, uct_syncmem_cuda_region_t*)

struct uct_syncmem_cuda_cache {
    /* held for the tables only: never across a registration */
    pthread_mutex_t                    lock;
    khash_t(uct_syncmem_cuda_regions)  regions;   /* by first piece's id */
    ucs_list_link_t                    lru;       /* unused, oldest first */
    unsigned                           num_unused;
    size_t                             unused_bytes;  /* exported */
    unsigned                           max_unused;
    size_t                             max_unused_bytes;
    int                                access;    /* of every region */
};

static int uct_syncmem_cuda_said;   /* "host memory only" */


ucs_status_t uct_syncmem_cuda_init(uct_syncmem_md_t *md, unsigned max_unused,
                                   size_t max_unused_bytes)
{
    uct_syncmem_cuda_cache_t *cache;

    cache = ucs_calloc(1, sizeof(*cache), "syncmem_cuda_cache");
    if (cache == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    pthread_mutex_init(&cache->lock, NULL);
    kh_init_inplace(uct_syncmem_cuda_regions, &cache->regions);
    ucs_list_head_init(&cache->lru);
    cache->max_unused       = max_unused;
    cache->max_unused_bytes = max_unused_bytes;
    /* every access at once, as UCX's ib md and NCCL register GPU memory:
     * a region serves any later request for its memory */
    cache->access           = IBV_ACCESS_LOCAL_WRITE |
                              IBV_ACCESS_REMOTE_WRITE |
                              IBV_ACCESS_REMOTE_READ;
    if (md->dev_attr.atomic_cap != IBV_ATOMIC_NONE) {
        cache->access |= IBV_ACCESS_REMOTE_ATOMIC;
    }
    md->cuda = cache;

    if (!uct_syncmem_cuda_in_use() &&
        !__atomic_exchange_n(&uct_syncmem_cuda_said, 1, __ATOMIC_RELAXED)) {
        ucs_debug("syncmem: host memory only (%s)",
                  (*uct_syncmem_cuda_why() != '\0') ? uct_syncmem_cuda_why() :
                  "the process has not loaded and initialised the CUDA"
                  " driver; its memory is detected once it has");
    }
    return UCS_OK;
}

int uct_syncmem_cuda_access(const uct_syncmem_md_t *md)
{
    return md->cuda->access;
}

int uct_syncmem_cuda_can_reg(const uct_syncmem_md_t *md)
{
    if ((md->cuda == NULL) || (!md->dmabuf && !md->peermem)) {
        return 0;
    }
    /* before the process loads the driver, the device decides */
    return md->peermem || !uct_syncmem_cuda_in_use() ||
           uct_syncmem_cuda_exports();
}

static int uct_syncmem_cuda_region_is(const uct_syncmem_cuda_region_t *region,
                                      const uct_syncmem_cuda_extent_t *extent)
{
    return (region->num_pieces == extent->num_pieces) &&
           !memcmp(region->pieces, extent->pieces,
                   extent->num_pieces * sizeof(extent->pieces[0]));
}

/* The region made of the extent's pieces, if there is one. */
static uct_syncmem_cuda_region_t *
uct_syncmem_cuda_find(uct_syncmem_cuda_cache_t *cache,
                      const uct_syncmem_cuda_extent_t *extent)
{
    khiter_t it = kh_get(uct_syncmem_cuda_regions, &cache->regions,
                         extent->pieces[0].id);
    uct_syncmem_cuda_region_t *region;

    if (it == kh_end(&cache->regions)) {
        return NULL;
    }
    for (region = kh_value(&cache->regions, it);
         (region != NULL) && !uct_syncmem_cuda_region_is(region, extent);
         region = region->next) {
    }
    return region;
}

static ucs_status_t uct_syncmem_cuda_insert(uct_syncmem_cuda_cache_t *cache,
                                            uct_syncmem_cuda_region_t *region)
{
    khiter_t it;
    int ret;

    it = kh_put(uct_syncmem_cuda_regions, &cache->regions,
                region->pieces[0].id, &ret);
    if (ret < 0) {
        return UCS_ERR_NO_MEMORY;
    }
    region->next = (ret == 0) ? kh_value(&cache->regions, it) : NULL;
    kh_value(&cache->regions, it) = region;
    return UCS_OK;
}

static void uct_syncmem_cuda_remove(uct_syncmem_cuda_cache_t *cache,
                                    uct_syncmem_cuda_region_t *region)
{
    khiter_t it = kh_get(uct_syncmem_cuda_regions, &cache->regions,
                         region->pieces[0].id);
    uct_syncmem_cuda_region_t **p;

    for (p = &kh_value(&cache->regions, it); *p != region; p = &(*p)->next) {
    }
    *p = region->next;
    if (kh_value(&cache->regions, it) == NULL) {
        kh_del(uct_syncmem_cuda_regions, &cache->regions, it);
    }
}

static void uct_syncmem_cuda_region_free(uct_syncmem_md_t *md,
                                         uct_syncmem_cuda_region_t *region)
{
    ucs_debug("syncmem: %s released CUDA memory 0x%lx..0x%lx (%u piece(s),"
              " first buffer id %lu)", md->name, region->span.iova,
              region->span.iova + region->span.length, region->num_pieces,
              region->pieces[0].id);
    uct_syncmem_mr_dereg(region->memh.mr);
    ucs_free(region);
}

/* Out of the unused ones, onto a list of regions to free. */
static void uct_syncmem_cuda_unused_drop(uct_syncmem_cuda_cache_t *cache,
                                         uct_syncmem_cuda_region_t *region,
                                         ucs_list_link_t *doomed)
{
    ucs_list_del(&region->list);
    --cache->num_unused;
    cache->unused_bytes -= region->span.export_length;
    uct_syncmem_cuda_remove(cache, region);
    ucs_list_add_tail(doomed, &region->list);
}

/* Unused regions whose memory is gone (all of them, or only the newest:
 * driver queries each), then the oldest past the bounds, onto doomed:
 * freed after the lock, each MR letting go of its GPU memory. */
static void uct_syncmem_cuda_trim(uct_syncmem_cuda_cache_t *cache, int all,
                                  ucs_list_link_t *doomed)
{
    uct_syncmem_cuda_region_t *region, *tmp;

    ucs_list_for_each_safe(region, tmp, &cache->lru, list) {
        if ((all || (&region->list == cache->lru.prev)) &&
            !uct_syncmem_cuda_pieces_alive(region->pieces,
                                           region->num_pieces)) {
            uct_syncmem_cuda_unused_drop(cache, region, doomed);
        }
    }

    while ((cache->num_unused > cache->max_unused) ||
           (cache->unused_bytes > cache->max_unused_bytes)) {
        region = ucs_list_head(&cache->lru, uct_syncmem_cuda_region_t, list);
        uct_syncmem_cuda_unused_drop(cache, region, doomed);
    }
}

static void uct_syncmem_cuda_free_doomed(uct_syncmem_md_t *md,
                                         ucs_list_link_t *doomed)
{
    uct_syncmem_cuda_region_t *region, *tmp;

    ucs_list_for_each_safe(region, tmp, doomed, list) {
        uct_syncmem_cuda_region_free(md, region);
    }
}

void uct_syncmem_cuda_cleanup(uct_syncmem_md_t *md)
{
    uct_syncmem_cuda_region_t *region, *next;

    if (md->cuda == NULL) {
        return;
    }

    kh_foreach_value(&md->cuda->regions, region, {
        for (; region != NULL; region = next) {
            next = region->next;
            if (region->refcount > 0) {
                ucs_warn("syncmem: %s closed with CUDA registration of"
                         " 0x%lx+%zu still in use", md->name,
                         region->span.iova, region->span.length);
            }
            uct_syncmem_mr_dereg(region->memh.mr);
            ucs_free(region);
        }
    })
    kh_destroy_inplace(uct_syncmem_cuda_regions, &md->cuda->regions);
    pthread_mutex_destroy(&md->cuda->lock);
    ucs_free(md->cuda);
    md->cuda = NULL;
}

/* The MR of a new region: a dma-buf of the export, or with a peer-memory
 * module the device pointer itself. No lock held. */
static ucs_status_t
uct_syncmem_cuda_region_reg(uct_syncmem_md_t *md,
                            const uct_syncmem_cuda_buf_t *buf,
                            const uct_syncmem_cuda_span_t *span,
                            ucs_log_level_t level, struct ibv_mr **mr_p)
{
    int access = md->cuda->access;
    int export = md->dmabuf && uct_syncmem_cuda_exports();
    ucs_status_t status;
    int fd;

    status = uct_syncmem_cuda_prepare(buf, span, export,
                                      md->peermem ? UCS_LOG_LEVEL_DEBUG :
                                      level, &fd);
    if ((status == UCS_OK) && export) {
        status = uct_syncmem_mr_reg_dmabuf(md, fd, span->offset, span->length,
                                           span->iova, access,
                                           md->peermem ? UCS_LOG_LEVEL_DEBUG :
                                           level, mr_p);
        close(fd);  /* the MR keeps its own reference to the dma-buf */
        if (status == UCS_OK) {
            return UCS_OK;
        }
    }
    if (!md->peermem) {
        return (status == UCS_OK) ? UCS_ERR_UNSUPPORTED : status;
    }
    if (export) {
        ucs_debug("syncmem: %s: dma-buf registration of CUDA memory 0x%lx"
                  " failed, trying the peer-memory module", md->name,
                  span->iova);
    }

    /* a peer-memory module resolves device pointers in ibv_reg_mr */
    return uct_syncmem_mr_reg(md, (void*)span->iova, span->length, access,
                              level, mr_p);
}

static ucs_status_t
uct_syncmem_cuda_region_create(uct_syncmem_md_t *md,
                               const uct_syncmem_cuda_buf_t *buf,
                               const uct_syncmem_cuda_extent_t *extent,
                               ucs_log_level_t level,
                               uct_syncmem_cuda_region_t **region_p)
{
    size_t pieces = extent->num_pieces * sizeof(extent->pieces[0]);
    uct_syncmem_cuda_region_t *region;
    ucs_status_t status;

    region = ucs_calloc(1, sizeof(*region) + pieces, "syncmem_cuda_region");
    if (region == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    status = uct_syncmem_cuda_region_reg(md, buf, &extent->span, level,
                                         &region->memh.mr);
    if (status != UCS_OK) {
        ucs_free(region);
        return status;
    }
    region->memh.flags = UCT_SYNCMEM_MEM_FLAG_CUDA;
    region->refcount   = 1;
    region->span       = extent->span;
    region->num_pieces = extent->num_pieces;
    memcpy(region->pieces, extent->pieces, pieces);
    ucs_debug("syncmem: %s registered CUDA memory 0x%lx..0x%lx (%u piece(s),"
              " first buffer id %lu, GPU %d, dma-buf 0x%lx+%zu)", md->name,
              region->span.iova, region->span.iova + region->span.length,
              region->num_pieces, region->pieces[0].id, buf->ordinal,
              region->span.export_base, region->span.export_length);
    *region_p = region;
    return UCS_OK;
}

/* A handle more on region, under the lock. */
static void uct_syncmem_cuda_hold(uct_syncmem_cuda_cache_t *cache,
                                  uct_syncmem_cuda_region_t *region)
{
    if (region->refcount++ == 0) {
        ucs_list_del(&region->list);
        --cache->num_unused;
        cache->unused_bytes -= region->span.export_length;
    }
}

ucs_status_t uct_syncmem_cuda_reg(uct_syncmem_md_t *md, void *address,
                                  size_t length, ucs_log_level_t level,
                                  uct_syncmem_mem_t **memh_p)
{
    uct_syncmem_cuda_cache_t *cache = md->cuda;
    uct_syncmem_cuda_region_t *region, *other;
    uct_syncmem_cuda_extent_t extent;
    uct_syncmem_cuda_buf_t buf;
    ucs_status_t status;
    UCS_LIST_HEAD(doomed);

    if ((cache == NULL) || !uct_syncmem_cuda_query(address, &buf)) {
        return UCS_ERR_NO_ELEM;   /* not CUDA memory: the host path */
    }

    if (!uct_syncmem_cuda_can_reg(md)) {
        ucs_log(level, "syncmem: %p is CUDA memory, which %s cannot register:"
                " %s. Use an HCA and kernel that take dma-bufs (with the"
                " NVIDIA open kernel modules and a driver of CUDA 11.7 or"
                " later) or load nvidia_peermem", address, md->name,
                !md->dmabuf ? "the device does not take dma-bufs and no"
                " peer-memory module is loaded" : "no GPU here exports"
                " dma-bufs and no peer-memory module is loaded");
        return UCS_ERR_UNSUPPORTED;
    }

    status = uct_syncmem_cuda_locate((uintptr_t)address, length, &buf, level,
                                     &extent);
    if (status != UCS_OK) {
        return status;
    }

    pthread_mutex_lock(&cache->lock);
    region = uct_syncmem_cuda_find(cache, &extent);
    if (region != NULL) {
        uct_syncmem_cuda_hold(cache, region);
    } else {
        /* new memory: memory freed may have made room for it */
        uct_syncmem_cuda_trim(cache, 1, &doomed);
    }
    pthread_mutex_unlock(&cache->lock);
    uct_syncmem_cuda_free_doomed(md, &doomed);

    if (region == NULL) {
        /* exporting and registering gigabytes takes long: unlocked, and
         * another thread may register the same memory meanwhile */
        status = uct_syncmem_cuda_region_create(md, &buf, &extent, level,
                                                &region);
        if (status != UCS_OK) {
            return status;
        }
        pthread_mutex_lock(&cache->lock);
        other = uct_syncmem_cuda_find(cache, &extent);
        if (other != NULL) {
            uct_syncmem_cuda_hold(cache, other);
        } else {
            status = uct_syncmem_cuda_insert(cache, region);
        }
        pthread_mutex_unlock(&cache->lock);
        if ((other != NULL) || (status != UCS_OK)) {
            uct_syncmem_cuda_region_free(md, region);
            region = other;
        }
        if (status != UCS_OK) {
            return status;
        }
    }

    *memh_p = &region->memh;
    return UCS_OK;
}

void uct_syncmem_cuda_dereg(uct_syncmem_md_t *md, uct_syncmem_mem_t *memh)
{
    uct_syncmem_cuda_cache_t *cache   = md->cuda;
    uct_syncmem_cuda_region_t *region = ucs_container_of(memh,
                                                         uct_syncmem_cuda_region_t,
                                                         memh);
    UCS_LIST_HEAD(doomed);

    pthread_mutex_lock(&cache->lock);
    if (--region->refcount == 0) {
        ucs_list_add_tail(&cache->lru, &region->list);
        ++cache->num_unused;
        cache->unused_bytes += region->span.export_length;
        uct_syncmem_cuda_trim(cache, 0, &doomed);
    }
    pthread_mutex_unlock(&cache->lock);
    uct_syncmem_cuda_free_doomed(md, &doomed);
}

/* The memory under memh registered again, for a remote key of one handle
 * alone (syncmem_memh.c): windows are not offered over GPU memory. */
ucs_status_t uct_syncmem_cuda_reg_again(uct_syncmem_md_t *md,
                                        const uct_syncmem_mem_t *memh,
                                        struct ibv_mr **mr_p)
{
    const uct_syncmem_cuda_region_t *region =
            ucs_container_of(memh, uct_syncmem_cuda_region_t, memh);
    uct_syncmem_cuda_buf_t buf;

    if (!uct_syncmem_cuda_query((void*)region->span.iova, &buf)) {
        ucs_error("syncmem: %s: CUDA memory 0x%lx is no longer there to"
                  " register for a key of its own", md->name,
                  region->span.iova);
        return UCS_ERR_INVALID_ADDR;
    }
    return uct_syncmem_cuda_region_reg(md, &buf, &region->span,
                                       UCS_LOG_LEVEL_ERROR, mr_p);
}

ucs_status_t uct_syncmem_cuda_mem_info(const void *address,
                                       uct_syncmem_cuda_info_t *info)
{
    uct_syncmem_cuda_extent_t extent;
    uct_syncmem_cuda_buf_t buf;

    if (!uct_syncmem_cuda_query(address, &buf)) {
        return UCS_ERR_NO_ELEM;
    }
    /* what is mapped there, not the reservation around it */
    if (uct_syncmem_cuda_locate((uintptr_t)address, 1, &buf,
                                UCS_LOG_LEVEL_DEBUG, &extent) == UCS_OK) {
        info->base = extent.pieces[0].start;
        info->size = extent.pieces[0].size;
    } else {
        info->base = (uintptr_t)address;
        info->size = 0;
    }
    info->ordinal = buf.ordinal;
    info->sys_dev = uct_syncmem_cuda_sys_dev(buf.ordinal);
    return UCS_OK;
}

ucs_status_t uct_syncmem_cuda_detect(uct_md_h tl_md, const void *address,
                                     size_t length,
                                     ucs_memory_type_t *mem_type_p)
{
    *mem_type_p = uct_syncmem_cuda_owns(address) ? UCS_MEMORY_TYPE_CUDA :
                  UCS_MEMORY_TYPE_HOST;
    return UCS_OK;
}
