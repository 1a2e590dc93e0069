/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - GPU (CUDA) memory: detection and registration through dma-buf.
 *
 * UCX 1.13 registers GPU memory only through a vendor peer-memory kernel
 * module. The upstream way is dma-buf: the CUDA driver exports a device
 * allocation as a dma-buf fd (cuMemGetHandleForAddressRange), and the HCA
 * maps it (ibv_reg_dmabuf_mr). With a peer-memory module loaded, plain
 * ibv_reg_mr on the device pointer works too, and is the fallback.
 *
 * The driver is used only once the process has loaded it and initialised
 * it itself: a process that never loaded libcuda has no CUDA memory, and
 * one that has not called cuInit() has none either. syncmem never calls
 * cuInit(): a process that links libcuda (CuPy, -lcuda) and forks before it
 * uses CUDA must get children that can use it, and CUDA_VISIBLE_DEVICES
 * must be read when the application initialises CUDA, not when an MD
 * opens. Before cuInit() every driver call but a few answers
 * CUDA_ERROR_NOT_INITIALIZED without initialising anything, so asking is
 * safe. Until the process has loaded libcuda nothing here costs a driver
 * call, nor a search for one; until it has initialised it, one
 * cuDeviceGetCount() a question.
 *
 * Registrations cover a whole CUDA allocation (syncmem_cuda.h: the span)
 * with every access the device grants, and are cached by the driver's
 * buffer id, which is unique per allocation for the life of the process: a
 * buffer freed and allocated again at the same address gets a new id, so
 * it can never be served the old registration. UCX without CUDA has no
 * event for cuMemFree, and a registration holds its GPU memory; so an
 * unused registration whose address no longer has its buffer id is
 * dropped at the next CUDA mem_reg or mem_dereg, and the unused ones kept
 * are bounded in number and bytes (UCX_SYNCMEM_CUDA_REG_CACHE*).
 */
#ifndef _GNU_SOURCE
#  define _GNU_SOURCE  /* dl_iterate_phdr */
#endif
#include "syncmem_md.h"
#include "syncmem_cuda.h"

#include <ucs/datastruct/khash.h>
#include <ucs/sys/math.h>
#include <ucs/sys/topo/base/topo.h>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>


/* One registered CUDA allocation. */
typedef struct uct_syncmem_cuda_region {
    uct_syncmem_mem_t memh;       /* first: memh <-> region */
    uint64_t          buffer_id;
    uintptr_t         start;      /* the allocation, which the MR covers */
    size_t            size;
    unsigned          refcount;   /* mem_reg handles out */
    ucs_list_link_t   unused;     /* in cache->lru while refcount == 0 */
} uct_syncmem_cuda_region_t;

KHASH_MAP_INIT_INT64(uct_syncmem_cuda_regions, uct_syncmem_cuda_region_t*)

/* Allocations registered lately: lets mem_reg send CUDA memory straight
 * here instead of through the host cache; only a hint (the driver decides),
 * so it is read without the lock. */
#define UCT_SYNCMEM_CUDA_HINTS 8

struct uct_syncmem_cuda_cache {
    /* registering takes tens of microseconds: threads wait, not spin */
    pthread_mutex_t                    lock;
    khash_t(uct_syncmem_cuda_regions)  regions;   /* by buffer id */
    ucs_list_link_t                    lru;       /* unused, oldest first */
    unsigned                           num_unused;
    size_t                             unused_bytes;
    unsigned                           max_unused;
    size_t                             max_unused_bytes;
    int                                access;    /* of every region */
    struct {
        uintptr_t start, end;
    }                                  hints[UCT_SYNCMEM_CUDA_HINTS];
    unsigned                           next_hint;
};

/* GPUs whose PCI function UCP is told (mem_query's sys_dev) */
#define UCT_SYNCMEM_CUDA_MAX_GPUS 64

/* What the driver says of a pointer that is CUDA device memory. */
typedef struct uct_syncmem_cuda_buf {
    uint64_t                 buffer_id;
    uintptr_t                start;     /* of its allocation */
    size_t                   size;
    uct_syncmem_cu_context_t ctx;       /* NULL for VMM and pool memory */
    int                      ordinal;   /* its GPU */
} uct_syncmem_cuda_buf_t;


/* The driver API, loaded once per process. */
static struct {
    int  state;            /* UCT_SYNCMEM_CUDA_* */
    char why[160];         /* why not loaded, when not */
    uct_syncmem_cu_result_t (*get_error_string)(uct_syncmem_cu_result_t res,
                                                const char **str);
    uct_syncmem_cu_result_t (*pointer_get_attributes)(unsigned num,
                                                      int *attributes,
                                                      void **data,
                                                      uct_syncmem_cu_ptr_t ptr);
    uct_syncmem_cu_result_t (*pointer_set_attribute)(const void *value,
                                                     int attribute,
                                                     uct_syncmem_cu_ptr_t ptr);
    uct_syncmem_cu_result_t (*mem_get_handle)(void *handle,
                                              uct_syncmem_cu_ptr_t ptr,
                                              size_t size, int type,
                                              unsigned long long flags);
    uct_syncmem_cu_result_t (*device_get_count)(int *count);
    uct_syncmem_cu_result_t (*device_get)(uct_syncmem_cu_device_t *dev,
                                          int ordinal);
    uct_syncmem_cu_result_t (*device_get_attribute)(int *value, int attribute,
                                                    uct_syncmem_cu_device_t dev);
    uct_syncmem_cu_result_t (*primary_ctx_retain)(uct_syncmem_cu_context_t *ctx,
                                                  uct_syncmem_cu_device_t dev);
    uct_syncmem_cu_result_t (*primary_ctx_release)(uct_syncmem_cu_device_t dev);
    uct_syncmem_cu_result_t (*ctx_push)(uct_syncmem_cu_context_t ctx);
    uct_syncmem_cu_result_t (*ctx_pop)(uct_syncmem_cu_context_t *ctx);
    uct_syncmem_cu_result_t (*device_get_pci_bus_id)(char *bus_id, int len,
                                                     uct_syncmem_cu_device_t dev);
    int  dmabuf;           /* a GPU can export dma-bufs */
    int  num_gpus;
    ucs_sys_device_t sys_dev[UCT_SYNCMEM_CUDA_MAX_GPUS]; /* by ordinal */
} uct_syncmem_cuda;

enum {
    UCT_SYNCMEM_CUDA_UNSEEN,    /* the process has not loaded libcuda */
    UCT_SYNCMEM_CUDA_UNINIT,    /* loaded, not initialised by the process */
    UCT_SYNCMEM_CUDA_LOADED,    /* initialised: in use */
    UCT_SYNCMEM_CUDA_FAILED     /* loaded by the process, unusable to us */
};

static pthread_once_t uct_syncmem_cuda_once = PTHREAD_ONCE_INIT;
/* UNINIT -> LOADED or FAILED: the devices are read once */
static pthread_mutex_t uct_syncmem_cuda_start_lock = PTHREAD_MUTEX_INITIALIZER;
static int uct_syncmem_cuda_said;   /* "host memory only" */


static const char *uct_syncmem_cu_error(uct_syncmem_cu_result_t res)
{
    const char *str = NULL;

    if ((uct_syncmem_cuda.get_error_string == NULL) ||
        (uct_syncmem_cuda.get_error_string(res, &str) !=
         UCT_SYNCMEM_CU_SUCCESS) || (str == NULL)) {
        return "unknown CUDA error";
    }
    return str;
}

/* Versioned names: cuda.h maps the plain ones to these by macros. */
static void *uct_syncmem_cuda_sym(void *lib, const char *name)
{
    void *sym = dlsym(lib, name);

    if (sym == NULL) {
        snprintf(uct_syncmem_cuda.why, sizeof(uct_syncmem_cuda.why),
                 "the CUDA driver has no %s (older than CUDA 11.7?)", name);
    }
    return sym;
}

/* The GPU's PCI function as UCS's topology knows it, so that UCP can pair
 * its memory with the nearest NIC. */
static ucs_sys_device_t
uct_syncmem_cuda_gpu_sys_dev(uct_syncmem_cu_device_t dev)
{
    ucs_sys_device_t sys_dev;
    char bus_id[32];

    if ((uct_syncmem_cuda.device_get_pci_bus_id(bus_id, sizeof(bus_id), dev) !=
         UCT_SYNCMEM_CU_SUCCESS) ||
        (ucs_topo_find_device_by_bdf_name(bus_id, &sys_dev) != UCS_OK)) {
        return UCS_SYS_DEVICE_ID_UNKNOWN;
    }
    return sys_dev;
}

/* The driver's entry points, once; no driver call yet. */
static void uct_syncmem_cuda_load(void)
{
    void *lib;

    /* never closed: handles and registrations may outlive any MD */
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(uct_syncmem_cuda.why, sizeof(uct_syncmem_cuda.why),
                 "no CUDA driver: %s", dlerror());
        goto failed;
    }

#define UCT_SYNCMEM_CUDA_SYM(_field, _name) \
    ((uct_syncmem_cuda._field = uct_syncmem_cuda_sym(lib, _name)) != NULL)
    if (!UCT_SYNCMEM_CUDA_SYM(get_error_string, "cuGetErrorString") ||
        !UCT_SYNCMEM_CUDA_SYM(pointer_get_attributes,
                              "cuPointerGetAttributes") ||
        !UCT_SYNCMEM_CUDA_SYM(pointer_set_attribute, "cuPointerSetAttribute") ||
        !UCT_SYNCMEM_CUDA_SYM(mem_get_handle,
                              "cuMemGetHandleForAddressRange") ||
        !UCT_SYNCMEM_CUDA_SYM(device_get_count, "cuDeviceGetCount") ||
        !UCT_SYNCMEM_CUDA_SYM(device_get, "cuDeviceGet") ||
        !UCT_SYNCMEM_CUDA_SYM(device_get_attribute, "cuDeviceGetAttribute") ||
        !UCT_SYNCMEM_CUDA_SYM(primary_ctx_retain, "cuDevicePrimaryCtxRetain") ||
        !UCT_SYNCMEM_CUDA_SYM(primary_ctx_release,
                              "cuDevicePrimaryCtxRelease_v2") ||
        !UCT_SYNCMEM_CUDA_SYM(ctx_push, "cuCtxPushCurrent_v2") ||
        !UCT_SYNCMEM_CUDA_SYM(ctx_pop, "cuCtxPopCurrent_v2") ||
        !UCT_SYNCMEM_CUDA_SYM(device_get_pci_bus_id, "cuDeviceGetPCIBusId")) {
        goto failed;
    }
#undef UCT_SYNCMEM_CUDA_SYM

    __atomic_store_n(&uct_syncmem_cuda.state, UCT_SYNCMEM_CUDA_UNINIT,
                     __ATOMIC_RELEASE);
    return;

failed:
    ucs_debug("syncmem: the CUDA driver is unusable: %s", uct_syncmem_cuda.why);
    __atomic_store_n(&uct_syncmem_cuda.state, UCT_SYNCMEM_CUDA_FAILED,
                     __ATOMIC_RELEASE);
}

/* UNINIT: whether the process has initialised the driver since; if it has,
 * the GPUs are read once and the driver is in use. */
static void uct_syncmem_cuda_start(void)
{
    uct_syncmem_cu_device_t dev;
    uct_syncmem_cu_result_t res;
    int i, count, value;

    pthread_mutex_lock(&uct_syncmem_cuda_start_lock);
    if (uct_syncmem_cuda.state != UCT_SYNCMEM_CUDA_UNINIT) {
        goto out; /* another thread started it */
    }
    count = 0;
    res   = uct_syncmem_cuda.device_get_count(&count);
    if (res == UCT_SYNCMEM_CU_ERROR_NOT_INITIALIZED) {
        goto out; /* not yet: no CUDA memory exists */
    } else if (res != UCT_SYNCMEM_CU_SUCCESS) {
        snprintf(uct_syncmem_cuda.why, sizeof(uct_syncmem_cuda.why),
                 "cuDeviceGetCount() failed: %s", uct_syncmem_cu_error(res));
        ucs_debug("syncmem: the CUDA driver is unusable: %s",
                  uct_syncmem_cuda.why);
        __atomic_store_n(&uct_syncmem_cuda.state, UCT_SYNCMEM_CUDA_FAILED,
                         __ATOMIC_RELEASE);
        goto out;
    }

    uct_syncmem_cuda.num_gpus = ucs_min(count, UCT_SYNCMEM_CUDA_MAX_GPUS);
    for (i = 0; i < count; ++i) {
        if (uct_syncmem_cuda.device_get(&dev, i) != UCT_SYNCMEM_CU_SUCCESS) {
            continue;
        }
        value = 0;
        if ((uct_syncmem_cuda.device_get_attribute(
                     &value, UCT_SYNCMEM_CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
                     dev) == UCT_SYNCMEM_CU_SUCCESS) && value) {
            uct_syncmem_cuda.dmabuf = 1;
        }
        if (i < UCT_SYNCMEM_CUDA_MAX_GPUS) {
            uct_syncmem_cuda.sys_dev[i] = uct_syncmem_cuda_gpu_sys_dev(dev);
        }
    }
    ucs_debug("syncmem: CUDA driver in use, %d GPU(s), dma-buf export %s",
              count, uct_syncmem_cuda.dmabuf ? "supported" : "not supported");
    __atomic_store_n(&uct_syncmem_cuda.state, UCT_SYNCMEM_CUDA_LOADED,
                     __ATOMIC_RELEASE);
out:
    pthread_mutex_unlock(&uct_syncmem_cuda_start_lock);
}

static int uct_syncmem_cuda_phdr_adds(struct dl_phdr_info *info, size_t size,
                                      void *arg)
{
    *(unsigned long long*)arg = info->dlpi_adds;
    return 1;   /* the count is the same in every entry: one is enough */
}

static int uct_syncmem_cuda_phdr_find(struct dl_phdr_info *info, size_t size,
                                      void *arg)
{
    const char *base = strrchr(info->dlpi_name, '/');

    base = (base == NULL) ? info->dlpi_name : base + 1;
    return !strncmp(base, "libcuda.so", strlen("libcuda.so"));
}

/*
 * Whether the process has loaded libcuda. dlopen(RTLD_NOLOAD) would answer
 * only after searching the library path for the file (tens of
 * microseconds); the loaded objects are looked through instead, and only
 * when the count of objects ever loaded has changed since the last look.
 */
static int uct_syncmem_cuda_process_has_it(void)
{
    static unsigned long long seen_adds;
    unsigned long long adds = 0;

    dl_iterate_phdr(uct_syncmem_cuda_phdr_adds, &adds);
    if (adds == __atomic_load_n(&seen_adds, __ATOMIC_RELAXED)) {
        return 0;
    }
    if (dl_iterate_phdr(uct_syncmem_cuda_phdr_find, NULL)) {
        return 1;
    }
    __atomic_store_n(&seen_adds, adds, __ATOMIC_RELAXED);
    return 0;
}

/* Whether the driver is in use: once the process itself has loaded it and
 * initialised it. */
int uct_syncmem_cuda_in_use(void)
{
    int state = __atomic_load_n(&uct_syncmem_cuda.state, __ATOMIC_ACQUIRE);

    if (ucs_likely((state == UCT_SYNCMEM_CUDA_LOADED) ||
                   (state == UCT_SYNCMEM_CUDA_FAILED))) {
        return state == UCT_SYNCMEM_CUDA_LOADED;
    }

    if (state == UCT_SYNCMEM_CUDA_UNSEEN) {
        if (!uct_syncmem_cuda_process_has_it()) {
            return 0;
        }
        pthread_once(&uct_syncmem_cuda_once, uct_syncmem_cuda_load);
    }
    if (__atomic_load_n(&uct_syncmem_cuda.state, __ATOMIC_ACQUIRE) ==
        UCT_SYNCMEM_CUDA_UNINIT) {
        uct_syncmem_cuda_start();
    }
    return __atomic_load_n(&uct_syncmem_cuda.state, __ATOMIC_ACQUIRE) ==
           UCT_SYNCMEM_CUDA_LOADED;
}

/* What the driver knows about address: 0 if it is not CUDA device memory. */
static int uct_syncmem_cuda_query(const void *address,
                                  uct_syncmem_cuda_buf_t *buf)
{
    int attributes[] = {
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_IS_MANAGED,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_BUFFER_ID,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_RANGE_START,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_RANGE_SIZE,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_CONTEXT,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    };
    unsigned mem_type                = 0;
    unsigned managed                 = 0;
    unsigned long long id            = 0;
    uct_syncmem_cu_ptr_t range_start = 0;
    size_t range_size                = 0;
    uct_syncmem_cu_context_t ctx     = NULL;
    int ordinal                      = -1;
    void *data[] = { &mem_type, &managed, &id, &range_start, &range_size,
                     &ctx, &ordinal };

    /* unlike cuPointerGetAttribute, this one answers "not CUDA memory" for
     * host pointers with success and zeroed attributes, and needs no
     * current context */
    if (!uct_syncmem_cuda_in_use() ||
        (uct_syncmem_cuda.pointer_get_attributes(
                 ucs_static_array_size(attributes), attributes, data,
                 (uintptr_t)address) != UCT_SYNCMEM_CU_SUCCESS) ||
        (mem_type != UCT_SYNCMEM_CU_MEMORYTYPE_DEVICE) || managed) {
        return 0;   /* managed memory is host-accessible: the host path */
    }

    buf->buffer_id = id;
    buf->start     = range_start;
    buf->size      = range_size;
    buf->ctx       = ctx;
    buf->ordinal   = ordinal;
    return 1;
}

int uct_syncmem_cuda_owns(const void *address)
{
    uct_syncmem_cuda_buf_t buf;

    return uct_syncmem_cuda_query(address, &buf);
}

/* The driver's calls on a buffer want a context of its GPU current: the
 * one it was allocated in, or for memory of no context (VMM, pools) its
 * GPU's primary one. *dev >= 0 when that had to be retained. */
static ucs_status_t
uct_syncmem_cuda_ctx_push(const uct_syncmem_cuda_buf_t *buf,
                          ucs_log_level_t level, uct_syncmem_cu_device_t *dev)
{
    uct_syncmem_cu_context_t ctx = buf->ctx;
    uct_syncmem_cu_result_t res;

    *dev = -1;
    if ((ctx == NULL) && (buf->ordinal < 0)) {
        return UCS_OK;   /* the driver did not say: the caller's context */
    }
    if (ctx == NULL) {
        res = uct_syncmem_cuda.device_get(dev, buf->ordinal);
        if (res == UCT_SYNCMEM_CU_SUCCESS) {
            res = uct_syncmem_cuda.primary_ctx_retain(&ctx, *dev);
        }
        if (res != UCT_SYNCMEM_CU_SUCCESS) {
            ucs_log(level, "syncmem: no context for CUDA buffer 0x%lx on GPU"
                    " %d: %s", buf->start, buf->ordinal,
                    uct_syncmem_cu_error(res));
            *dev = -1;
            return UCS_ERR_IO_ERROR;
        }
    }

    res = uct_syncmem_cuda.ctx_push(ctx);
    if (res != UCT_SYNCMEM_CU_SUCCESS) {
        ucs_log(level, "syncmem: cuCtxPushCurrent() for CUDA buffer 0x%lx"
                " failed: %s", buf->start, uct_syncmem_cu_error(res));
        if (*dev >= 0) {
            uct_syncmem_cuda.primary_ctx_release(*dev);
        }
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

static void uct_syncmem_cuda_ctx_pop(const uct_syncmem_cuda_buf_t *buf,
                                     uct_syncmem_cu_device_t dev)
{
    uct_syncmem_cu_context_t ctx;

    if ((buf->ctx == NULL) && (buf->ordinal < 0)) {
        return;
    }
    uct_syncmem_cuda.ctx_pop(&ctx);
    if (dev >= 0) {
        uct_syncmem_cuda.primary_ctx_release(dev);
    }
}

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
     * a region serves any later request for its buffer */
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
                  (uct_syncmem_cuda.state == UCT_SYNCMEM_CUDA_FAILED) ?
                  uct_syncmem_cuda.why : "the process has not loaded and"
                  " initialised the CUDA driver; its memory is detected once"
                  " it has");
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
           uct_syncmem_cuda.dmabuf;
}

static void uct_syncmem_cuda_region_destroy(uct_syncmem_md_t *md,
                                            uct_syncmem_cuda_region_t *region)
{
    uct_syncmem_cuda_cache_t *cache = md->cuda;
    khiter_t it = kh_get(uct_syncmem_cuda_regions, &cache->regions,
                         region->buffer_id);
    unsigned i;

    kh_del(uct_syncmem_cuda_regions, &cache->regions, it);
    for (i = 0; i < UCT_SYNCMEM_CUDA_HINTS; ++i) {
        if (cache->hints[i].start == region->start) {
            __atomic_store_n(&cache->hints[i].end, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&cache->hints[i].start, 0, __ATOMIC_RELAXED);
        }
    }
    ucs_debug("syncmem: %s released CUDA buffer %lu, 0x%lx..0x%lx", md->name,
              region->buffer_id, region->start, region->start + region->size);
    uct_syncmem_mr_dereg(region->memh.mr);
    ucs_free(region);
}

static void uct_syncmem_cuda_unused_del(uct_syncmem_cuda_cache_t *cache,
                                        uct_syncmem_cuda_region_t *region)
{
    ucs_list_del(&region->unused);
    --cache->num_unused;
    cache->unused_bytes -= region->size;
}

/* Whether the region's allocation is still there: freed memory is no
 * longer CUDA memory, or has another buffer id. */
static int uct_syncmem_cuda_region_alive(uct_syncmem_cuda_region_t *region)
{
    uct_syncmem_cuda_buf_t buf;

    return uct_syncmem_cuda_query((void*)region->start, &buf) &&
           (buf.buffer_id == region->buffer_id);
}

static void uct_syncmem_cuda_drop_dead(uct_syncmem_md_t *md,
                                       uct_syncmem_cuda_region_t *region)
{
    if (!uct_syncmem_cuda_region_alive(region)) {
        uct_syncmem_cuda_unused_del(md->cuda, region);
        uct_syncmem_cuda_region_destroy(md, region);
    }
}

/* Drops unused regions of freed allocations (all of them, or only the one
 * just released: a driver query each), then the oldest past the bounds;
 * each dropped MR lets go of its GPU memory. */
static void uct_syncmem_cuda_trim(uct_syncmem_md_t *md, int all)
{
    uct_syncmem_cuda_cache_t *cache = md->cuda;
    uct_syncmem_cuda_region_t *region, *tmp;

    if (all) {
        ucs_list_for_each_safe(region, tmp, &cache->lru, unused) {
            uct_syncmem_cuda_drop_dead(md, region);
        }
    } else if (!ucs_list_is_empty(&cache->lru)) {
        uct_syncmem_cuda_drop_dead(md, ucs_list_tail(&cache->lru,
                                                     uct_syncmem_cuda_region_t,
                                                     unused));
    }

    while ((cache->num_unused > cache->max_unused) ||
           (cache->unused_bytes > cache->max_unused_bytes)) {
        region = ucs_list_head(&cache->lru, uct_syncmem_cuda_region_t,
                               unused);
        uct_syncmem_cuda_unused_del(cache, region);
        uct_syncmem_cuda_region_destroy(md, region);
    }
}

void uct_syncmem_cuda_cleanup(uct_syncmem_md_t *md)
{
    uct_syncmem_cuda_region_t *region;

    if (md->cuda == NULL) {
        return;
    }

    kh_foreach_value(&md->cuda->regions, region, {
        if (region->refcount > 0) {
            ucs_warn("syncmem: %s closed with CUDA registration of buffer %lu"
                     " still in use", md->name, region->buffer_id);
        }
        uct_syncmem_mr_dereg(region->memh.mr);
        ucs_free(region);
    })
    kh_destroy_inplace(uct_syncmem_cuda_regions, &md->cuda->regions);
    pthread_mutex_destroy(&md->cuda->lock);
    ucs_free(md->cuda);
    md->cuda = NULL;
}

static ucs_status_t
uct_syncmem_cuda_region_reg(uct_syncmem_md_t *md,
                            const uct_syncmem_cuda_buf_t *buf,
                            const uct_syncmem_cuda_span_t *span,
                            ucs_log_level_t level, struct ibv_mr **mr_p)
{
    int access = md->cuda->access;
    uct_syncmem_cu_result_t res;
    ucs_status_t status;
    int fd;

    if (!md->dmabuf || !uct_syncmem_cuda.dmabuf) {
        /* a peer-memory module resolves device pointers in ibv_reg_mr */
        return uct_syncmem_mr_reg(md, (void*)span->iova, span->length, access,
                                  level, mr_p);
    }

    fd  = -1;
    res = uct_syncmem_cuda.mem_get_handle(
            &fd, span->export_base, span->export_length,
            UCT_SYNCMEM_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (res != UCT_SYNCMEM_CU_SUCCESS) {
        ucs_log(md->peermem ? UCS_LOG_LEVEL_DEBUG : level,
                "syncmem: cuMemGetHandleForAddressRange(0x%lx, %zu, DMA_BUF_FD)"
                " for CUDA buffer 0x%lx+%zu failed: %s; the NVIDIA open kernel"
                " modules export dma-bufs, the proprietary ones may not",
                span->export_base, span->export_length, buf->start, buf->size,
                uct_syncmem_cu_error(res));
        status = UCS_ERR_UNSUPPORTED;
    } else {
        status = uct_syncmem_mr_reg_dmabuf(md, fd, span->offset, span->length,
                                           span->iova, access,
                                           md->peermem ? UCS_LOG_LEVEL_DEBUG :
                                           level, mr_p);
        close(fd);  /* the MR keeps its own reference to the dma-buf */
    }

    if ((status != UCS_OK) && md->peermem) {
        ucs_debug("syncmem: %s: dma-buf registration of CUDA buffer 0x%lx"
                  " failed, trying the peer-memory module", md->name,
                  buf->start);
        status = uct_syncmem_mr_reg(md, (void*)span->iova, span->length,
                                    access, level, mr_p);
    }
    return status;
}

/* A cudaMemcpy into the buffer that has returned must be visible to the
 * HCA's next read of it, as GPUDirect RDMA requires; VMM memory refuses the
 * attribute and has the behaviour anyway. */
static void uct_syncmem_cuda_sync_memops(const uct_syncmem_cuda_buf_t *buf)
{
    unsigned one = 1;
    uct_syncmem_cu_result_t res;

    res = uct_syncmem_cuda.pointer_set_attribute(
            &one, UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, buf->start);
    if (res != UCT_SYNCMEM_CU_SUCCESS) {
        ucs_debug("syncmem: SYNC_MEMOPS on CUDA buffer 0x%lx: %s", buf->start,
                  uct_syncmem_cu_error(res));
    }
}

static ucs_status_t
uct_syncmem_cuda_region_create(uct_syncmem_md_t *md,
                               const uct_syncmem_cuda_buf_t *buf,
                               const uct_syncmem_cuda_span_t *span,
                               ucs_log_level_t level,
                               uct_syncmem_cuda_region_t **region_p)
{
    uct_syncmem_cuda_cache_t *cache = md->cuda;
    uct_syncmem_cuda_region_t *region;
    uct_syncmem_cu_device_t dev;
    ucs_status_t status;
    unsigned hint;
    khiter_t it;
    int ret;

    region = ucs_calloc(1, sizeof(*region), "syncmem_cuda_region");
    if (region == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    status = uct_syncmem_cuda_ctx_push(buf, level, &dev);
    if (status == UCS_OK) {
        uct_syncmem_cuda_sync_memops(buf);
        status = uct_syncmem_cuda_region_reg(md, buf, span, level,
                                             &region->memh.mr);
        uct_syncmem_cuda_ctx_pop(buf, dev);
    }
    if (status != UCS_OK) {
        ucs_free(region);
        return status;
    }

    it = kh_put(uct_syncmem_cuda_regions, &cache->regions, buf->buffer_id,
                &ret);
    if (ret < 0) {
        uct_syncmem_mr_dereg(region->memh.mr);
        ucs_free(region);
        return UCS_ERR_NO_MEMORY;
    }
    kh_value(&cache->regions, it) = region;

    region->memh.flags = UCT_SYNCMEM_MEM_FLAG_CUDA;
    region->buffer_id  = buf->buffer_id;
    region->start      = buf->start;
    region->size       = buf->size;
    region->refcount   = 1;

    hint = cache->next_hint++ % UCT_SYNCMEM_CUDA_HINTS;
    __atomic_store_n(&cache->hints[hint].start, region->start,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&cache->hints[hint].end, region->start + region->size,
                     __ATOMIC_RELAXED);

    ucs_debug("syncmem: %s registered CUDA buffer %lu, 0x%lx..0x%lx (GPU %d,"
              " dma-buf 0x%lx+%zu)", md->name, buf->buffer_id, buf->start,
              buf->start + buf->size, buf->ordinal, span->export_base,
              span->export_length);
    *region_p = region;
    return UCS_OK;
}

int uct_syncmem_cuda_hinted(const uct_syncmem_md_t *md, const void *address)
{
    uct_syncmem_cuda_cache_t *cache = md->cuda;
    uintptr_t addr = (uintptr_t)address;
    unsigned i;

    for (i = 0; i < UCT_SYNCMEM_CUDA_HINTS; ++i) {
        if ((addr >= __atomic_load_n(&cache->hints[i].start,
                                     __ATOMIC_RELAXED)) &&
            (addr < __atomic_load_n(&cache->hints[i].end,
                                    __ATOMIC_RELAXED))) {
            return 1;
        }
    }
    return 0;
}

ucs_status_t uct_syncmem_cuda_reg(uct_syncmem_md_t *md, void *address,
                                  size_t length, ucs_log_level_t level,
                                  uct_syncmem_mem_t **memh_p)
{
    uct_syncmem_cuda_cache_t *cache   = md->cuda;
    uct_syncmem_cuda_region_t *region = NULL;
    uct_syncmem_cuda_span_t span;
    uct_syncmem_cuda_buf_t buf;
    ucs_status_t status;
    khiter_t it;

    if ((cache == NULL) || !uct_syncmem_cuda_query(address, &buf)) {
        return UCS_ERR_NO_ELEM;   /* not CUDA memory: the host path */
    }

    if (!uct_syncmem_cuda_can_reg(md)) {
        ucs_log(level, "syncmem: %p is CUDA memory, which %s cannot register:"
                " %s. Use an HCA and kernel that take dma-bufs (with the"
                " NVIDIA open kernel modules) or load nvidia_peermem",
                address, md->name, !md->dmabuf ?
                "the device does not take dma-bufs and no peer-memory module"
                " is loaded" : "no GPU here exports dma-bufs and no"
                " peer-memory module is loaded");
        return UCS_ERR_UNSUPPORTED;
    }

    status = uct_syncmem_cuda_span((uintptr_t)address, length, buf.start,
                                   buf.size, ucs_get_page_size(), &span);
    if (status != UCS_OK) {
        ucs_log(level, "syncmem: %p+%zu is not inside one CUDA allocation (the"
                " one at %p is 0x%lx+%zu); register each allocation, or each"
                " chunk of memory mapped with cuMemMap, separately", address,
                length, address, buf.start, buf.size);
        return status;
    }

    pthread_mutex_lock(&cache->lock);
    it = kh_get(uct_syncmem_cuda_regions, &cache->regions, buf.buffer_id);
    if (it != kh_end(&cache->regions)) {
        region = kh_value(&cache->regions, it);
        if (region->refcount++ == 0) {
            uct_syncmem_cuda_unused_del(cache, region);
        }
    } else {
        /* a new buffer: one freed may have made room for it */
        uct_syncmem_cuda_trim(md, 1);
        status = uct_syncmem_cuda_region_create(md, &buf, &span, level,
                                                &region);
    }
    pthread_mutex_unlock(&cache->lock);

    if (status == UCS_OK) {
        *memh_p = &region->memh;
    }
    return status;
}

void uct_syncmem_cuda_dereg(uct_syncmem_md_t *md, uct_syncmem_mem_t *memh)
{
    uct_syncmem_cuda_cache_t *cache   = md->cuda;
    uct_syncmem_cuda_region_t *region = ucs_container_of(memh,
                                                         uct_syncmem_cuda_region_t,
                                                         memh);

    pthread_mutex_lock(&cache->lock);
    if (--region->refcount == 0) {
        ucs_list_add_tail(&cache->lru, &region->unused);
        ++cache->num_unused;
        cache->unused_bytes += region->size;
        uct_syncmem_cuda_trim(md, 0);
    }
    pthread_mutex_unlock(&cache->lock);
}

ucs_status_t uct_syncmem_cuda_mem_info(const void *address,
                                       uct_syncmem_cuda_info_t *info)
{
    uct_syncmem_cuda_buf_t buf;

    if (!uct_syncmem_cuda_query(address, &buf)) {
        return UCS_ERR_NO_ELEM;
    }
    info->base    = buf.start;
    info->size    = buf.size;
    info->ordinal = buf.ordinal;
    info->sys_dev = ((buf.ordinal >= 0) &&
                     (buf.ordinal < uct_syncmem_cuda.num_gpus)) ?
                    uct_syncmem_cuda.sys_dev[buf.ordinal] :
                    UCS_SYS_DEVICE_ID_UNKNOWN;
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
