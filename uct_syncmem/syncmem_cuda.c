/*
 * syncmem - GPU (CUDA) memory: detection and registration through dma-buf.
 *
 * UCX 1.13 registers GPU memory only through a vendor peer-memory kernel
 * module. The upstream way is dma-buf: the CUDA driver exports a device
 * allocation as a dma-buf fd (cuMemGetHandleForAddressRange), and the HCA
 * maps it (ibv_reg_dmabuf_mr). With a peer-memory module loaded instead,
 * plain ibv_reg_mr on the device pointer works, and is the fallback.
 *
 * The driver is loaded with dlopen() once per process; without it the
 * module works as before, with host memory only.
 *
 * Registrations cover a whole CUDA allocation and are cached by the
 * driver's buffer id, which is unique per allocation for the life of the
 * process: a buffer freed and allocated again at the same address gets a
 * new id, so it can never be served the old registration. UCX 1.13 has no
 * event for cuMemFree here, so a kept registration holds its GPU memory
 * until evicted; UCX_SYNCMEM_CUDA_REG_CACHE bounds how many are kept.
 */
#include "syncmem.h"
#include "syncmem_cuda.h"

#include <ucs/datastruct/khash.h>
#include <ucs/type/spinlock.h>
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>


/* One registered CUDA allocation. */
typedef struct uct_syncmem_cuda_region {
    uct_syncmem_mem_t memh;       /* first: memh <-> region */
    uint64_t          buffer_id;
    unsigned          refcount;   /* mem_reg handles out */
    ucs_list_link_t   unused;     /* in cache->lru while refcount == 0 */
} uct_syncmem_cuda_region_t;

KHASH_MAP_INIT_INT64(uct_syncmem_cuda_regions, uct_syncmem_cuda_region_t*)

struct uct_syncmem_cuda_cache {
    ucs_spinlock_t                     lock;
    khash_t(uct_syncmem_cuda_regions)  regions;   /* by buffer id */
    ucs_list_link_t                    lru;       /* unused, oldest first */
    unsigned                           num_unused;
    unsigned                           max_unused;
};


/* The driver API, loaded once per process. */
static struct {
    int  loaded;           /* cuInit() succeeded */
    char why[160];         /* why not, when not */
    uct_syncmem_cu_result_t (*init)(unsigned flags);
    uct_syncmem_cu_result_t (*get_error_string)(uct_syncmem_cu_result_t res,
                                                const char **str);
    uct_syncmem_cu_result_t (*pointer_get_attributes)(unsigned num,
                                                      int *attributes,
                                                      void **data,
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
    int  dmabuf;           /* a GPU can export dma-bufs */
} uct_syncmem_cuda;

static pthread_once_t uct_syncmem_cuda_once = PTHREAD_ONCE_INIT;


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

static void *uct_syncmem_cuda_sym(void *lib, const char *name)
{
    void *sym = dlsym(lib, name);

    if (sym == NULL) {
        snprintf(uct_syncmem_cuda.why, sizeof(uct_syncmem_cuda.why),
                 "the CUDA driver has no %s (older than CUDA 11.7?)", name);
    }
    return sym;
}

static void uct_syncmem_cuda_load(void)
{
    uct_syncmem_cu_device_t dev;
    uct_syncmem_cu_result_t res;
    int i, count, value;
    void *lib;

    /* never closed: handles and registrations may outlive any MD */
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(uct_syncmem_cuda.why, sizeof(uct_syncmem_cuda.why),
                 "no CUDA driver: %s", dlerror());
        return;
    }

    if (((uct_syncmem_cuda.init = uct_syncmem_cuda_sym(lib, "cuInit")) ==
         NULL) ||
        ((uct_syncmem_cuda.get_error_string =
          uct_syncmem_cuda_sym(lib, "cuGetErrorString")) == NULL) ||
        ((uct_syncmem_cuda.pointer_get_attributes =
          uct_syncmem_cuda_sym(lib, "cuPointerGetAttributes")) == NULL) ||
        ((uct_syncmem_cuda.mem_get_handle =
          uct_syncmem_cuda_sym(lib, "cuMemGetHandleForAddressRange")) ==
         NULL) ||
        ((uct_syncmem_cuda.device_get_count =
          uct_syncmem_cuda_sym(lib, "cuDeviceGetCount")) == NULL) ||
        ((uct_syncmem_cuda.device_get =
          uct_syncmem_cuda_sym(lib, "cuDeviceGet")) == NULL) ||
        ((uct_syncmem_cuda.device_get_attribute =
          uct_syncmem_cuda_sym(lib, "cuDeviceGetAttribute")) == NULL)) {
        return;
    }

    res = uct_syncmem_cuda.init(0);
    if (res != UCT_SYNCMEM_CU_SUCCESS) {
        snprintf(uct_syncmem_cuda.why, sizeof(uct_syncmem_cuda.why),
                 "cuInit() failed: %s", uct_syncmem_cu_error(res));
        return;
    }

    count = 0;
    uct_syncmem_cuda.device_get_count(&count);
    for (i = 0; i < count; ++i) {
        value = 0;
        if ((uct_syncmem_cuda.device_get(&dev, i) == UCT_SYNCMEM_CU_SUCCESS) &&
            (uct_syncmem_cuda.device_get_attribute(
                     &value, UCT_SYNCMEM_CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
                     dev) == UCT_SYNCMEM_CU_SUCCESS) && value) {
            uct_syncmem_cuda.dmabuf = 1;
        }
    }
    uct_syncmem_cuda.loaded = 1;
    ucs_debug("syncmem: CUDA driver loaded, %d GPU(s), dma-buf export %s",
              count, uct_syncmem_cuda.dmabuf ? "supported" : "not supported");
}

/* What the driver knows about address: 0 if it is not CUDA device memory. */
static int uct_syncmem_cuda_query(const void *address, uint64_t *buffer_id,
                                  uintptr_t *start, size_t *size)
{
    int attributes[] = {
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_IS_MANAGED,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_BUFFER_ID,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_RANGE_START,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_RANGE_SIZE
    };
    unsigned mem_type               = 0;
    unsigned managed                = 0;
    unsigned long long id           = 0;
    uct_syncmem_cu_ptr_t range_start = 0;
    size_t range_size               = 0;
    void *data[] = { &mem_type, &managed, &id, &range_start, &range_size };

    /* unlike cuPointerGetAttribute, this one answers "not CUDA memory" for
     * host pointers with success and zeroed attributes */
    if (!uct_syncmem_cuda.loaded ||
        (uct_syncmem_cuda.pointer_get_attributes(
                 ucs_static_array_size(attributes), attributes, data,
                 (uintptr_t)address) != UCT_SYNCMEM_CU_SUCCESS) ||
        (mem_type != UCT_SYNCMEM_CU_MEMORYTYPE_DEVICE) || managed) {
        return 0;   /* managed memory is host-accessible: the host path */
    }

    *buffer_id = id;
    *start     = range_start;
    *size      = range_size;
    return 1;
}

ucs_status_t uct_syncmem_cuda_init(uct_syncmem_md_t *md, unsigned max_unused)
{
    static int said;
    uct_syncmem_cuda_cache_t *cache;

    pthread_once(&uct_syncmem_cuda_once, uct_syncmem_cuda_load);
    if (!uct_syncmem_cuda.loaded) {
        if (!said) {
            said = 1;
            ucs_debug("syncmem: host memory only (%s)", uct_syncmem_cuda.why);
        }
        return UCS_OK;
    }

    cache = ucs_calloc(1, sizeof(*cache), "syncmem_cuda_cache");
    if (cache == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    ucs_spinlock_init(&cache->lock, 0);
    kh_init_inplace(uct_syncmem_cuda_regions, &cache->regions);
    ucs_list_head_init(&cache->lru);
    cache->max_unused = max_unused;
    md->cuda          = cache;

    if (!uct_syncmem_cuda_can_reg(md)) {
        ucs_debug("syncmem: %s cannot register CUDA memory: %s and no"
                  " peer-memory module (nvidia_peermem) is loaded", md->name,
                  !md->dmabuf ? "the device does not take dma-bufs" :
                  "no GPU exports dma-bufs");
    }
    return UCS_OK;
}

int uct_syncmem_cuda_can_reg(const uct_syncmem_md_t *md)
{
    return (md->cuda != NULL) &&
           ((md->dmabuf && uct_syncmem_cuda.dmabuf) || md->peermem);
}

static void uct_syncmem_cuda_region_destroy(uct_syncmem_md_t *md,
                                            uct_syncmem_cuda_region_t *region)
{
    khiter_t it = kh_get(uct_syncmem_cuda_regions, &md->cuda->regions,
                         region->buffer_id);

    kh_del(uct_syncmem_cuda_regions, &md->cuda->regions, it);
    uct_syncmem_dereg_mr(region->memh.mr);
    ucs_free(region);
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
        uct_syncmem_dereg_mr(region->memh.mr);
        ucs_free(region);
    })
    kh_destroy_inplace(uct_syncmem_cuda_regions, &md->cuda->regions);
    ucs_spinlock_destroy(&md->cuda->lock);
    ucs_free(md->cuda);
}

static ucs_status_t
uct_syncmem_cuda_region_create(uct_syncmem_md_t *md, uint64_t buffer_id,
                               uintptr_t start, size_t size, int access,
                               ucs_log_level_t level,
                               uct_syncmem_cuda_region_t **region_p)
{
    uct_syncmem_cuda_region_t *region;
    uct_syncmem_cu_result_t res;
    ucs_status_t status;
    int fd;

    region = ucs_calloc(1, sizeof(*region), "syncmem_cuda_region");
    if (region == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    if (md->dmabuf && uct_syncmem_cuda.dmabuf) {
        /* the export wants page granularity; allocations are backed in
         * larger units, so rounding up stays inside this one */
        size = ucs_align_up_pow2(size, ucs_get_page_size());
        fd   = -1;
        res = uct_syncmem_cuda.mem_get_handle(
                &fd, start, size,
                UCT_SYNCMEM_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
        if (res != UCT_SYNCMEM_CU_SUCCESS) {
            ucs_log(level, "syncmem: cuMemGetHandleForAddressRange(0x%lx, %zu,"
                    " DMA_BUF_FD) failed: %s; the NVIDIA open kernel modules"
                    " export dma-bufs, the proprietary ones may not", start,
                    size, uct_syncmem_cu_error(res));
            status = UCS_ERR_UNSUPPORTED;
        } else {
            status = uct_syncmem_reg_dmabuf_mr(md, fd, 0, size, start, access,
                                               level, &region->memh.mr);
            close(fd);  /* the MR keeps its own reference to the dma-buf */
        }
    } else {
        /* a peer-memory module resolves device pointers in ibv_reg_mr */
        status = uct_syncmem_reg_mr(md, (void*)start, size, access, level,
                                    &region->memh.mr);
    }

    if (status != UCS_OK) {
        ucs_free(region);
        return status;
    }

    region->memh.flags = UCT_SYNCMEM_MEM_FLAG_CUDA;
    region->buffer_id  = buffer_id;
    *region_p          = region;
    return UCS_OK;
}

ucs_status_t uct_syncmem_cuda_reg(uct_syncmem_md_t *md, void *address,
                                  size_t length, int access,
                                  ucs_log_level_t level,
                                  uct_syncmem_mem_t **memh_p)
{
    uct_syncmem_cuda_cache_t *cache = md->cuda;
    uct_syncmem_cuda_region_t *region;
    uint64_t buffer_id;
    uintptr_t start;
    size_t size;
    ucs_status_t status;
    khiter_t it;
    int ret;

    if ((cache == NULL) ||
        !uct_syncmem_cuda_query(address, &buffer_id, &start, &size)) {
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

    ucs_spin_lock(&cache->lock);
    it = kh_get(uct_syncmem_cuda_regions, &cache->regions, buffer_id);
    if (it != kh_end(&cache->regions)) {
        region = kh_value(&cache->regions, it);
        if (region->refcount++ == 0) {
            ucs_list_del(&region->unused);
            --cache->num_unused;
        }
        status = UCS_OK;
        goto out;
    }

    /* registration can take a while; the lock keeps two threads from
     * registering one buffer twice, and mem_reg is not a fast path */
    status = uct_syncmem_cuda_region_create(md, buffer_id, start, size,
                                            access, level, &region);
    if (status != UCS_OK) {
        goto out;
    }
    region->refcount = 1;
    it = kh_put(uct_syncmem_cuda_regions, &cache->regions, buffer_id, &ret);
    kh_value(&cache->regions, it) = region;
    ucs_debug("syncmem: %s registered CUDA buffer %lu, 0x%lx..0x%lx",
              md->name, buffer_id, start, start + size);

out:
    ucs_spin_unlock(&cache->lock);
    if (status == UCS_OK) {
        ucs_assertv(((uintptr_t)address >= start) &&
                    ((uintptr_t)address + length <= start + size),
                    "%p+%zu outside CUDA allocation 0x%lx+%zu", address,
                    length, start, size);
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

    ucs_spin_lock(&cache->lock);
    if (--region->refcount == 0) {
        ucs_list_add_tail(&cache->lru, &region->unused);
        ++cache->num_unused;
        while (cache->num_unused > cache->max_unused) {
            region = ucs_list_extract_head(&cache->lru,
                                           uct_syncmem_cuda_region_t, unused);
            --cache->num_unused;
            uct_syncmem_cuda_region_destroy(md, region);
        }
    }
    ucs_spin_unlock(&cache->lock);
}

ucs_status_t uct_syncmem_cuda_detect(uct_md_h tl_md, const void *address,
                                     size_t length,
                                     ucs_memory_type_t *mem_type_p)
{
    uint64_t buffer_id;
    uintptr_t start;
    size_t size;

    *mem_type_p = uct_syncmem_cuda_query(address, &buffer_id, &start, &size) ?
                  UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
    return UCS_OK;
}
