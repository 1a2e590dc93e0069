/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the CUDA driver: loaded at run time, used once the application
 * has initialised it, asked what an address is and what is mapped around
 * it, and called around a registration (SYNC_MEMOPS, the dma-buf export).
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
 * What is mapped around an address, per the driver API's documentation:
 * CU_POINTER_ATTRIBUTE_RANGE_START_ADDR/RANGE_SIZE give the allocation, or
 * for VMM memory the whole reservation (cuMemAddressReserve), mapped or
 * not; cuMemGetAddressRange gives the mapped piece that holds the address
 * (one cuMemMap, or the allocation). cuMemAlloc memory, which the driver
 * says cudaIpcGetMemHandle takes (IS_LEGACY_CUDA_IPC_CAPABLE), is its own
 * piece; other memory is walked piece by piece.
 */
#ifndef _GNU_SOURCE
#  define _GNU_SOURCE  /* dl_iterate_phdr */
#endif
#include "syncmem_cuda_driver.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <ucs/sys/sys.h>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

/* GPUs whose PCI function UCP is told (mem_query's sys_dev) */
#define UCT_SYNCMEM_CUDA_MAX_GPUS 64
/* contexts whose SYNC_MEMOPS flag is remembered as set */
#define UCT_SYNCMEM_CUDA_MAX_CTXS 64


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
    uct_syncmem_cu_result_t (*mem_get_address_range)(uct_syncmem_cu_ptr_t *base,
                                                     size_t *size,
                                                     uct_syncmem_cu_ptr_t ptr);
    /* NULL before CUDA 11.7: peer memory only */
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
    uct_syncmem_cu_result_t (*ctx_push)(uct_syncmem_cu_context_t ctx);
    uct_syncmem_cu_result_t (*ctx_pop)(uct_syncmem_cu_context_t *ctx);
    uct_syncmem_cu_result_t (*ctx_get_current)(uct_syncmem_cu_context_t *ctx);
    uct_syncmem_cu_result_t (*ctx_get_flags)(unsigned *flags);
    /* NULL before CUDA 12.1 */
    uct_syncmem_cu_result_t (*ctx_set_flags)(unsigned flags);
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

/*
 * The contexts syncmem makes current: a buffer's own, or for memory of no
 * context (VMM, pools) its GPU's primary context, retained the first time
 * and kept for the life of the process (releasing the last reference would
 * destroy it, and create it again at the next registration). And the
 * contexts that have CU_CTX_SYNC_MEMOPS, set once.
 */
static struct {
    pthread_mutex_t          lock;
    uct_syncmem_cu_context_t primary[UCT_SYNCMEM_CUDA_MAX_GPUS];
    uct_syncmem_cu_context_t synced[UCT_SYNCMEM_CUDA_MAX_CTXS];
    unsigned                 num_synced;
    int                      warned;   /* "no SYNC_MEMOPS" */
} uct_syncmem_cuda_ctxs = {
    .lock = PTHREAD_MUTEX_INITIALIZER
};


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
static void *uct_syncmem_cuda_sym(void *lib, const char *name, int required)
{
    void *sym = dlsym(lib, name);

    if (sym == NULL) {
        if (required) {
            snprintf(uct_syncmem_cuda.why, sizeof(uct_syncmem_cuda.why),
                     "the CUDA driver has no %s (older than CUDA 11.0?)",
                     name);
        } else {
            ucs_debug("syncmem: the CUDA driver has no %s", name);
        }
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
    ((uct_syncmem_cuda._field = uct_syncmem_cuda_sym(lib, _name, 1)) != NULL)
    if (!UCT_SYNCMEM_CUDA_SYM(get_error_string, "cuGetErrorString") ||
        !UCT_SYNCMEM_CUDA_SYM(pointer_get_attributes,
                              "cuPointerGetAttributes") ||
        !UCT_SYNCMEM_CUDA_SYM(pointer_set_attribute, "cuPointerSetAttribute") ||
        !UCT_SYNCMEM_CUDA_SYM(mem_get_address_range,
                              "cuMemGetAddressRange_v2") ||
        !UCT_SYNCMEM_CUDA_SYM(device_get_count, "cuDeviceGetCount") ||
        !UCT_SYNCMEM_CUDA_SYM(device_get, "cuDeviceGet") ||
        !UCT_SYNCMEM_CUDA_SYM(device_get_attribute, "cuDeviceGetAttribute") ||
        !UCT_SYNCMEM_CUDA_SYM(primary_ctx_retain, "cuDevicePrimaryCtxRetain") ||
        !UCT_SYNCMEM_CUDA_SYM(ctx_push, "cuCtxPushCurrent_v2") ||
        !UCT_SYNCMEM_CUDA_SYM(ctx_pop, "cuCtxPopCurrent_v2") ||
        !UCT_SYNCMEM_CUDA_SYM(ctx_get_current, "cuCtxGetCurrent") ||
        !UCT_SYNCMEM_CUDA_SYM(ctx_get_flags, "cuCtxGetFlags") ||
        !UCT_SYNCMEM_CUDA_SYM(device_get_pci_bus_id, "cuDeviceGetPCIBusId")) {
        goto failed;
    }
#undef UCT_SYNCMEM_CUDA_SYM
    /* without these, peer memory still registers, and VMM and pool memory
     * go without SYNC_MEMOPS (said once) */
    uct_syncmem_cuda.mem_get_handle = uct_syncmem_cuda_sym(
            lib, "cuMemGetHandleForAddressRange", 0);
    uct_syncmem_cuda.ctx_set_flags  = uct_syncmem_cuda_sym(lib,
                                                           "cuCtxSetFlags", 0);

    __atomic_store_n(&uct_syncmem_cuda.state, UCT_SYNCMEM_CUDA_UNINIT,
                     __ATOMIC_RELEASE);
    return;

failed:
    ucs_debug("syncmem: the CUDA driver is unusable: %s", uct_syncmem_cuda.why);
    __atomic_store_n(&uct_syncmem_cuda.state, UCT_SYNCMEM_CUDA_FAILED,
                     __ATOMIC_RELEASE);
}

/* Only a clear yes counts: a driver that cannot say does not export. */
static int uct_syncmem_cuda_dev_exports(uct_syncmem_cu_device_t dev)
{
    int value = 0;

    return (uct_syncmem_cuda.mem_get_handle != NULL) &&
           (uct_syncmem_cuda.device_get_attribute(
                    &value, UCT_SYNCMEM_CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
                    dev) == UCT_SYNCMEM_CU_SUCCESS) && (value == 1);
}

/* UNINIT: whether the process has initialised the driver since; if it has,
 * the GPUs are read once and the driver is in use. */
static void uct_syncmem_cuda_start(void)
{
    uct_syncmem_cu_device_t dev;
    uct_syncmem_cu_result_t res;
    int i, count;

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
            if (i < UCT_SYNCMEM_CUDA_MAX_GPUS) {
                uct_syncmem_cuda.sys_dev[i] = UCS_SYS_DEVICE_ID_UNKNOWN;
            }
            continue;
        }
        if (uct_syncmem_cuda_dev_exports(dev)) {
            uct_syncmem_cuda.dmabuf = 1;
        }
        if (i < UCT_SYNCMEM_CUDA_MAX_GPUS) {
            uct_syncmem_cuda.sys_dev[i] = uct_syncmem_cuda_gpu_sys_dev(dev);
        }
    }
    ucs_debug("syncmem: CUDA driver in use, %d GPU(s), dma-buf export %s",
              count, uct_syncmem_cuda.dmabuf ? "supported" :
              (uct_syncmem_cuda.mem_get_handle == NULL) ?
              "not in this driver (CUDA 11.7+ has it)" : "not supported");
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
 * Whether the process has loaded libcuda, read from the loaded objects
 * (no search of the library path, as dlopen would make), and only when
 * the count of objects ever loaded has changed since the last look.
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

const char *uct_syncmem_cuda_why(void)
{
    return (__atomic_load_n(&uct_syncmem_cuda.state, __ATOMIC_ACQUIRE) ==
            UCT_SYNCMEM_CUDA_FAILED) ? uct_syncmem_cuda.why : "";
}

int uct_syncmem_cuda_exports(void)
{
    return uct_syncmem_cuda_in_use() && uct_syncmem_cuda.dmabuf;
}

ucs_sys_device_t uct_syncmem_cuda_sys_dev(int ordinal)
{
    return ((ordinal >= 0) && (ordinal < uct_syncmem_cuda.num_gpus)) ?
           uct_syncmem_cuda.sys_dev[ordinal] : UCS_SYS_DEVICE_ID_UNKNOWN;
}

int uct_syncmem_cuda_query(const void *address, uct_syncmem_cuda_buf_t *buf)
{
    int attributes[] = {
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_IS_MANAGED,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_BUFFER_ID,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_RANGE_START,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_RANGE_SIZE,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_CONTEXT,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_IS_LEGACY_IPC,
        UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_MAPPED
    };
    unsigned mem_type                = 0;
    unsigned managed                 = 0;
    unsigned long long id            = 0;
    uct_syncmem_cu_ptr_t range_start = 0;
    size_t range_size                = 0;
    uct_syncmem_cu_context_t ctx     = NULL;
    int ordinal                      = -1;
    unsigned legacy_ipc              = 0;
    unsigned mapped                  = 0;
    void *data[] = { &mem_type, &managed, &id, &range_start, &range_size,
                     &ctx, &ordinal, &legacy_ipc, &mapped };

    /* unlike cuPointerGetAttribute, this one answers "not CUDA memory" for
     * host pointers with success and zeroed attributes, and needs no
     * current context */
    if (!uct_syncmem_cuda_in_use() ||
        (uct_syncmem_cuda.pointer_get_attributes(
                 ucs_static_array_size(attributes), attributes, data,
                 (uintptr_t)address) != UCT_SYNCMEM_CU_SUCCESS) ||
        managed) {
        return 0;   /* managed memory is host-accessible: the host path */
    }
    if (mem_type != UCT_SYNCMEM_CU_MEMORYTYPE_DEVICE) {
        /* host memory, or a hole in a VMM reservation, which only the
         * range tells (for memory it does not know, the driver zeroes
         * every attribute) */
        if ((mem_type != 0) || mapped || (range_size == 0)) {
            return 0;
        }
        id = 0;
    }

    buf->buffer_id   = id;
    buf->range_start = range_start;
    buf->range_size  = range_size;
    buf->ctx         = ctx;
    buf->ordinal     = ordinal;
    buf->allocation  = legacy_ipc && (ctx != NULL);
    buf->mapped      = (mem_type == UCT_SYNCMEM_CU_MEMORYTYPE_DEVICE);
    return 1;
}

int uct_syncmem_cuda_owns(const void *address)
{
    uct_syncmem_cuda_buf_t buf;

    return uct_syncmem_cuda_query(address, &buf);
}

/* The context the driver's calls on buf want current: its own, or its
 * GPU's primary one; NULL: the caller's. */
static ucs_status_t
uct_syncmem_cuda_ctx_of(const uct_syncmem_cuda_buf_t *buf,
                        ucs_log_level_t level, uct_syncmem_cu_context_t *ctx_p)
{
    uct_syncmem_cu_context_t ctx = buf->ctx;
    uct_syncmem_cu_device_t dev;
    uct_syncmem_cu_result_t res = UCT_SYNCMEM_CU_SUCCESS;

    if ((ctx == NULL) && (buf->ordinal >= 0) &&
        (buf->ordinal < UCT_SYNCMEM_CUDA_MAX_GPUS)) {
        pthread_mutex_lock(&uct_syncmem_cuda_ctxs.lock);
        ctx = uct_syncmem_cuda_ctxs.primary[buf->ordinal];
        if (ctx == NULL) {
            res = uct_syncmem_cuda.device_get(&dev, buf->ordinal);
            if (res == UCT_SYNCMEM_CU_SUCCESS) {
                res = uct_syncmem_cuda.primary_ctx_retain(&ctx, dev);
            }
            if (res == UCT_SYNCMEM_CU_SUCCESS) {
                uct_syncmem_cuda_ctxs.primary[buf->ordinal] = ctx;
            }
        }
        pthread_mutex_unlock(&uct_syncmem_cuda_ctxs.lock);
    }
    if (res != UCT_SYNCMEM_CU_SUCCESS) {
        ucs_log(level, "syncmem: no context for CUDA memory at 0x%lx on GPU"
                " %d: %s", buf->range_start, buf->ordinal,
                uct_syncmem_cu_error(res));
        return UCS_ERR_IO_ERROR;
    }
    *ctx_p = ctx;
    return UCS_OK;
}

static ucs_status_t
uct_syncmem_cuda_ctx_push(const uct_syncmem_cuda_buf_t *buf,
                          ucs_log_level_t level, uct_syncmem_cu_context_t *ctx)
{
    uct_syncmem_cu_result_t res;
    ucs_status_t status;

    status = uct_syncmem_cuda_ctx_of(buf, level, ctx);
    if ((status != UCS_OK) || (*ctx == NULL)) {
        return status;
    }
    res = uct_syncmem_cuda.ctx_push(*ctx);
    if (res != UCT_SYNCMEM_CU_SUCCESS) {
        ucs_log(level, "syncmem: cuCtxPushCurrent() for CUDA memory at 0x%lx"
                " failed: %s", buf->range_start, uct_syncmem_cu_error(res));
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

static void uct_syncmem_cuda_ctx_pop(uct_syncmem_cu_context_t ctx)
{
    uct_syncmem_cu_context_t popped;

    if (ctx != NULL) {
        uct_syncmem_cuda.ctx_pop(&popped);
    }
}

/* The mapped piece at address (a context current): 0 if none is. */
static int uct_syncmem_cuda_piece_at(uintptr_t address, uint64_t id,
                                     uct_syncmem_cuda_piece_t *piece)
{
    uct_syncmem_cu_ptr_t base = 0;
    size_t size               = 0;
    uct_syncmem_cuda_buf_t buf;

    if (uct_syncmem_cuda.mem_get_address_range(&base, &size, address) !=
        UCT_SYNCMEM_CU_SUCCESS) {
        return 0;
    }
    if (id == 0) {
        if (!uct_syncmem_cuda_query((void*)address, &buf) || !buf.mapped) {
            return 0;
        }
        id = buf.buffer_id;
    }
    piece->start = base;
    piece->size  = size;
    piece->id    = id;
    return 1;
}

/* The pieces from address on to end, as far as they go without a hole. */
static unsigned uct_syncmem_cuda_walk(uintptr_t address, uintptr_t end,
                                      uint64_t first_id,
                                      uct_syncmem_cuda_piece_t *pieces)
{
    uintptr_t next = address;
    unsigned num;

    for (num = 0; (num < UCT_SYNCMEM_CUDA_MAX_PIECES) && (next < end);
         ++num) {
        if (!uct_syncmem_cuda_piece_at(next, (num == 0) ? first_id : 0,
                                       &pieces[num])) {
            break;
        }
        if (pieces[num].start + pieces[num].size <= next) {
            return num + 1;   /* the driver's answer does not hold next */
        }
        next = pieces[num].start + pieces[num].size;
    }
    return num;
}

ucs_status_t uct_syncmem_cuda_locate(uintptr_t address, size_t length,
                                     const uct_syncmem_cuda_buf_t *buf,
                                     ucs_log_level_t level,
                                     uct_syncmem_cuda_extent_t *extent)
{
    uct_syncmem_cu_context_t ctx;
    ucs_status_t status;
    uintptr_t hole;

    extent->num_pieces = 0;
    if (buf->allocation) {
        extent->pieces[0].start = buf->range_start;
        extent->pieces[0].size  = buf->range_size;
        extent->pieces[0].id    = buf->buffer_id;
        extent->num_pieces      = 1;
    } else if (buf->mapped) {
        /* cuMemGetAddressRange wants a context */
        status = uct_syncmem_cuda_ctx_push(buf, level, &ctx);
        if (status != UCS_OK) {
            return status;
        }
        extent->num_pieces = uct_syncmem_cuda_walk(address, address + length,
                                                   buf->buffer_id,
                                                   extent->pieces);
        uct_syncmem_cuda_ctx_pop(ctx);
    }

    status = uct_syncmem_cuda_extent(address, length, buf->range_start,
                                     buf->range_size, extent->pieces,
                                     extent->num_pieces, ucs_get_page_size(),
                                     &extent->span, &hole);
    switch (status) {
    case UCS_OK:
        break;
    case UCS_ERR_INVALID_ADDR:
        ucs_log(level, "syncmem: 0x%lx+%zu is CUDA memory with a hole: nothing"
                " is mapped at 0x%lx (in the reservation 0x%lx+%zu); register"
                " only memory that cuMemMap has mapped", address, length,
                hole, buf->range_start, buf->range_size);
        break;
    case UCS_ERR_EXCEEDS_LIMIT:
        ucs_log(level, "syncmem: 0x%lx+%zu spans more than %u pieces of CUDA"
                " memory mapped apart; register it in parts", address,
                length, UCT_SYNCMEM_CUDA_MAX_PIECES);
        break;
    default:
        ucs_log(level, "syncmem: 0x%lx+%zu is not inside one CUDA allocation"
                " or reservation (the one at 0x%lx is 0x%lx+%zu); register"
                " each allocation separately", address, length, address,
                buf->range_start, buf->range_size);
        break;
    }
    return status;
}

int uct_syncmem_cuda_pieces_alive(const uct_syncmem_cuda_piece_t *pieces,
                                  unsigned num)
{
    uct_syncmem_cuda_piece_t now;
    uct_syncmem_cuda_buf_t buf;
    uct_syncmem_cu_context_t ctx;
    unsigned i;
    int alive;

    if (!uct_syncmem_cuda_query((void*)pieces[0].start, &buf) ||
        !buf.mapped || (buf.buffer_id != pieces[0].id)) {
        return 0;
    }
    if (buf.allocation) {
        return (num == 1) && (buf.range_start == pieces[0].start) &&
               (buf.range_size == pieces[0].size);
    }
    if (uct_syncmem_cuda_ctx_push(&buf, UCS_LOG_LEVEL_DEBUG, &ctx) !=
        UCS_OK) {
        return 0;
    }
    alive = 1;
    for (i = 0; alive && (i < num); ++i) {
        alive = uct_syncmem_cuda_piece_at(pieces[i].start, 0, &now) &&
                (now.start == pieces[i].start) &&
                (now.size == pieces[i].size) && (now.id == pieces[i].id);
    }
    uct_syncmem_cuda_ctx_pop(ctx);
    return alive;
}

/* Whether ctx has SYNC_MEMOPS (syncmem set it, or found it set). */
static int uct_syncmem_cuda_ctx_synced(uct_syncmem_cu_context_t ctx)
{
    unsigned i;

    for (i = 0; i < uct_syncmem_cuda_ctxs.num_synced; ++i) {
        if (uct_syncmem_cuda_ctxs.synced[i] == ctx) {
            return 1;
        }
    }
    return 0;
}

/*
 * A cudaMemcpy into the memory that has returned must be visible to the
 * HCA's next read of it, as GPUDirect RDMA requires: the pointer attribute
 * SYNC_MEMOPS where the driver takes it (cuMemAlloc memory), else the flag
 * CU_CTX_SYNC_MEMOPS on its context (cuCtxSetFlags, CUDA 12.1), which
 * covers all of the context's memory. The flag is set once per context
 * and never again: cuCtxSetFlags takes the context's write lock, which an
 * application thread may hold (in a kernel launch) while waiting for ours.
 * Where neither can be set, one warning. ctx is current.
 */
static void uct_syncmem_cuda_sync_memops(const uct_syncmem_cuda_buf_t *buf,
                                         uct_syncmem_cu_context_t ctx,
                                         uintptr_t address)
{
    unsigned one = 1, flags = 0;
    uct_syncmem_cu_result_t res = UCT_SYNCMEM_CU_ERROR_NOT_SUPPORTED;

    if ((ctx == NULL) &&
        (uct_syncmem_cuda.ctx_get_current(&ctx) != UCT_SYNCMEM_CU_SUCCESS)) {
        ctx = NULL;
    }

    pthread_mutex_lock(&uct_syncmem_cuda_ctxs.lock);
    if ((ctx != NULL) && uct_syncmem_cuda_ctx_synced(ctx)) {
        goto out;
    }
    if (buf->allocation &&
        (uct_syncmem_cuda.pointer_set_attribute(
                 &one, UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                 address) == UCT_SYNCMEM_CU_SUCCESS)) {
        goto out;
    }

    if ((ctx != NULL) && (uct_syncmem_cuda.ctx_set_flags != NULL)) {
        res = uct_syncmem_cuda.ctx_get_flags(&flags);
        if ((res == UCT_SYNCMEM_CU_SUCCESS) &&
            !(flags & UCT_SYNCMEM_CU_CTX_SYNC_MEMOPS)) {
            /* it sets all the flags: keep the application's */
            flags |= UCT_SYNCMEM_CU_CTX_SYNC_MEMOPS;
            res    = uct_syncmem_cuda.ctx_set_flags(flags);
        }
    }
    if (res == UCT_SYNCMEM_CU_SUCCESS) {
        ucs_debug("syncmem: CUDA context %p has SYNC_MEMOPS", ctx);
        if (uct_syncmem_cuda_ctxs.num_synced < UCT_SYNCMEM_CUDA_MAX_CTXS) {
            uct_syncmem_cuda_ctxs.synced[uct_syncmem_cuda_ctxs.num_synced++] =
                    ctx;
        }
    } else if (!uct_syncmem_cuda_ctxs.warned) {
        uct_syncmem_cuda_ctxs.warned = 1;
        ucs_warn("syncmem: cannot make CUDA memory at 0x%lx synchronize its"
                 " memory operations (SYNC_MEMOPS): %s; an RDMA read may see"
                 " data from before a cudaMemcpy that has returned, so"
                 " synchronize the stream before a peer reads, or use a"
                 " driver of CUDA 12.1 or later", address,
                 (uct_syncmem_cuda.ctx_set_flags == NULL) ?
                 "the driver refuses the pointer attribute (VMM or pool"
                 " memory) and has no cuCtxSetFlags" :
                 uct_syncmem_cu_error(res));
    }
out:
    pthread_mutex_unlock(&uct_syncmem_cuda_ctxs.lock);
}

ucs_status_t uct_syncmem_cuda_prepare(const uct_syncmem_cuda_buf_t *buf,
                                      const uct_syncmem_cuda_span_t *span,
                                      int dmabuf, ucs_log_level_t level,
                                      int *fd)
{
    uct_syncmem_cu_context_t ctx;
    uct_syncmem_cu_result_t res;
    ucs_status_t status;

    *fd    = -1;
    status = uct_syncmem_cuda_ctx_push(buf, level, &ctx);
    if (status != UCS_OK) {
        return status;
    }
    uct_syncmem_cuda_sync_memops(buf, ctx, span->iova);
    if (dmabuf) {
        res = (uct_syncmem_cuda.mem_get_handle == NULL) ?
              UCT_SYNCMEM_CU_ERROR_NOT_SUPPORTED :
              uct_syncmem_cuda.mem_get_handle(
                      fd, span->export_base, span->export_length,
                      UCT_SYNCMEM_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
        if (res != UCT_SYNCMEM_CU_SUCCESS) {
            ucs_log(level, "syncmem: cuMemGetHandleForAddressRange(0x%lx, %zu,"
                    " DMA_BUF_FD) for CUDA memory 0x%lx+%zu failed: %s; the"
                    " NVIDIA open kernel modules export dma-bufs, the"
                    " proprietary ones may not", span->export_base,
                    span->export_length, span->iova, span->length,
                    uct_syncmem_cu_error(res));
            *fd    = -1;
            status = UCS_ERR_UNSUPPORTED;
        }
    }
    uct_syncmem_cuda_ctx_pop(ctx);
    return status;
}
