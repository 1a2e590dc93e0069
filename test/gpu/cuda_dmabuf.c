/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU check of syncmem's CUDA memory path (test/gpu/run.sh runs it). With a
 * GPU, the driver checks; with an RDMA port too (argument or SYNCMEM_DEV,
 * e.g. mlx5_0:1) and the module loaded (syncmem-run), data moves:
 *
 *   driver  CUDA memory is device memory, exports as a dma-buf, and a buffer
 *           allocated again gets a new buffer id
 *   odd     put and get zcopy of 8, 100, 3000, 4097 and 10000 B between
 *           cuMemAlloc buffers (mostly mid-page): the data arrives; the
 *           neighbouring allocations and the bytes around each stay
 *   access  registered for local read only, then for remote put: a put works
 *   stale   freed and allocated again at the same address: a put with the
 *           old rkey fails or leaves the new buffer unchanged; the new works
 *   ucp     tag send/recv, put and get between CUDA buffers, 8 B .. 64 MiB
 *           (cuda_ucp.c)
 *
 * Each check prints "ok ...", "FAIL ..." or "SKIP ...: why"; every wait is
 * bounded by SYNCMEM_TEST_WAIT_S seconds (default 60), the run by ten times
 * that. Exit status: 0 when data moved and no check failed, 1 on a failure,
 * 77 when no data could move (no GPU, no RDMA port given, built without
 * UCX, or the port cannot register CUDA memory).
 */
#define _GNU_SOURCE
#include "cuda_check.h"
#ifndef SYNCMEM_DRIVER_ONLY
#include <ucs/async/async_fwd.h>
#endif

#include <signal.h>
#include <unistd.h>

int num_ok, num_failed;
int wait_s = 60;    /* SYNCMEM_TEST_WAIT_S */

/* The backstop for a hang outside the bounded waits (in a driver call). */
static void on_alarm(int sig)
{
    static const char msg[] = "FAIL the run outlasted 10 * SYNCMEM_TEST_WAIT_S"
                              ": a hang outside the bounded waits\n";

    (void)!write(STDOUT_FILENO, msg, sizeof(msg) - 1);
    _exit(1);
}

static void driver_checks(void)
{
    const size_t size = 4u << 20;
    unsigned long long id_a, id_b;
    char link[64] = "", path[64];
    int dmabuf = 0, fd = -1;
    unsigned mem_type = 0;
    CUdeviceptr a, b;
    CUdevice dev;

    CU(cuDeviceGet(&dev, 0));
    CU(cuDeviceGetAttribute(&dmabuf, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
                            dev));
    CU(cuMemAlloc(&a, size));
    CU(cuPointerGetAttribute(&mem_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a));
    CU(cuPointerGetAttribute(&id_a, CU_POINTER_ATTRIBUTE_BUFFER_ID, a));
    if (mem_type != CU_MEMORYTYPE_DEVICE) {
        fail("driver: cuMemAlloc memory has memory type %u", mem_type);
    }

    if (!dmabuf) {
        skip("driver: dma-buf export: this GPU/driver cannot (the NVIDIA"
             " open kernel modules can); syncmem needs nvidia_peermem then");
    } else if (cuMemGetHandleForAddressRange(
                       &fd, a, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                       0) != CUDA_SUCCESS) {
        fail("driver: the GPU exports dma-bufs, it says, but"
             " cuMemGetHandleForAddressRange failed");
    } else {
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        if ((readlink(path, link, sizeof(link) - 1) > 0) &&
            !strncmp(link, "/dmabuf:", 8)) {
            ok("driver: CUDA device memory, exported as a dma-buf (%s)",
               link);
        } else {
            fail("driver: fd %d is '%s', not a dma-buf", fd, link);
        }
        close(fd);
    }

    CU(cuMemFree(a));
    CU(cuMemAlloc(&b, size));
    CU(cuPointerGetAttribute(&id_b, CU_POINTER_ATTRIBUTE_BUFFER_ID, b));
    if (id_a != id_b) {
        ok("driver: a buffer allocated again (%s address) has a new buffer"
           " id", (a == b) ? "same" : "another");
    } else {
        fail("driver: buffer id %llu given again after a free", id_a);
    }
    CU(cuMemFree(b));
}

#ifndef SYNCMEM_DRIVER_ONLY
#define NO_DATA   (-2)
#define MAX_BUFS  9      /* of one check */

/* A CUDA buffer, registered, and its rkey unpacked as a peer would. */
typedef struct {
    CUdeviceptr       ptr;
    size_t            size;
    uct_mem_h         memh;
    uct_rkey_bundle_t rkey;
    int               has_rkey;
} gpu_buf_t;

/* The syncmem MD of the port under test, two ifaces and an endpoint; and
 * the buffers of the check that runs, freed after it. */
typedef struct {
    uct_component_h     component;
    uct_md_h            md;
    uct_md_attr_t       md_attr;
    ucs_async_context_t *async;
    uct_worker_h        worker;
    uct_iface_h         iface[2];    /* sender, receiver */
    uct_ep_h            ep;          /* sender -> receiver */
    gpu_buf_t           bufs[MAX_BUFS];
    int                 num_bufs;
} uct_pair_t;

static void gpu_fill(CUdeviceptr ptr, size_t size, int seed)
{
    uint8_t *host = malloc(size);

    pattern(host, size, seed);
    CU(cuMemcpyHtoD(ptr, host, size));
    free(host);
}

/* The first byte at which the CUDA buffer is not data seed, or -1. */
static ssize_t gpu_mismatch(CUdeviceptr ptr, size_t size, int seed)
{
    uint8_t *host   = malloc(size);
    uint8_t *expect = malloc(size);
    size_t j;

    CU(cuMemcpyDtoH(host, ptr, size));
    pattern(expect, size, seed);
    for (j = 0; (j < size) && (host[j] == expect[j]); ++j) {
    }
    free(expect);
    free(host);
    return (j < size) ? (ssize_t)j : -1;
}

/* The byte at addr, or -1 where the driver does not let us read it. */
static int gpu_peek(CUdeviceptr addr)
{
    uint8_t value;

    return (cuMemcpyDtoH(&value, addr, 1) == CUDA_SUCCESS) ? value : -1;
}

/* An endpoint failed (the stale rkey's): its operations say how. */
static ucs_status_t ep_error(void *arg, uct_ep_h ep, ucs_status_t status)
{
    return UCS_OK;
}

/* A new endpoint from the sender iface to the receiver iface. */
static uct_ep_h pair_connect(uct_pair_t *p)
{
    uint8_t dev_addr[256], iface_addr[256];
    uct_iface_attr_t attr;
    uct_ep_params_t params;
    uct_ep_h ep;

    if ((uct_iface_query(p->iface[1], &attr) != UCS_OK) ||
        (attr.device_addr_len > sizeof(dev_addr)) ||
        (attr.iface_addr_len > sizeof(iface_addr)) ||
        (uct_iface_get_device_address(p->iface[1], (void*)dev_addr) !=
         UCS_OK) ||
        (uct_iface_get_address(p->iface[1], (void*)iface_addr) != UCS_OK)) {
        return NULL;
    }
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE |
                        UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface      = p->iface[0];
    params.dev_addr   = (uct_device_addr_t*)dev_addr;
    params.iface_addr = (uct_iface_addr_t*)iface_addr;
    return (uct_ep_create(&params, &ep) == UCS_OK) ? ep : NULL;
}

/* The port dev ("mlx5_0:1") was given: not being able to use it fails. */
static void pair_open(uct_pair_t *p, const char *dev)
{
    uct_iface_params_t params = {0};
    uct_md_config_t *md_config;
    uct_iface_config_t *config;
    char md_name[64];
    int i;

    memset(p, 0, sizeof(*p));
    snprintf(md_name, sizeof(md_name), "%s", dev);
    *strchrnul(md_name, ':') = '\0';
    if (((p->component = find_component("syncmem")) == NULL) ||
        (uct_md_config_read(p->component, NULL, NULL, &md_config) !=
         UCS_OK) ||
        (uct_md_open(p->component, md_name, md_config, &p->md) != UCS_OK) ||
        (uct_md_query(p->md, &p->md_attr) != UCS_OK) ||
        (ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                  &p->async) != UCS_OK) ||
        (uct_worker_create(p->async, UCS_THREAD_MODE_SINGLE, &p->worker) !=
         UCS_OK) ||
        (uct_md_iface_config_read(p->md, "syncmem", NULL, NULL, &config) !=
         UCS_OK)) {
        die("cannot open syncmem's MD of %s (under syncmem-run? is it a"
            " device? 'syncmem-run --check %s' says)", md_name, dev);
    }
    uct_config_release(md_config);

    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                  UCT_IFACE_PARAM_FIELD_DEVICE |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = "syncmem";
    params.mode.device.dev_name = dev;
    params.err_handler          = ep_error;
    params.err_handler_arg      = p;
    for (i = 0; i < 2; ++i) {
        if (uct_iface_open(p->md, p->worker, &params, config, &p->iface[i]) !=
            UCS_OK) {
            die("cannot open syncmem on %s ('syncmem-run --check %s')", dev,
                dev);
        }
        uct_iface_progress_enable(p->iface[i], UCT_PROGRESS_SEND |
                                               UCT_PROGRESS_RECV);
    }
    uct_config_release(config);
    p->ep = pair_connect(p);
    if (p->ep == NULL) {
        die("cannot create an endpoint on %s", dev);
    }
}

static void pair_close(uct_pair_t *p)
{
    uct_ep_destroy(p->ep);
    uct_iface_close(p->iface[1]);
    uct_iface_close(p->iface[0]);
    uct_worker_destroy(p->worker);
    ucs_async_context_destroy(p->async);
    uct_md_close(p->md);
}

/* A new CUDA buffer of the check that runs, holding data seed (NO_DATA:
 * an entry only, for memory allocated by the caller). */
static gpu_buf_t *gpu_new(uct_pair_t *p, size_t size, int seed)
{
    gpu_buf_t *b;

    if (p->num_bufs == MAX_BUFS) {
        die("more than %d buffers in a check", MAX_BUFS);
    }
    b = &p->bufs[p->num_bufs++];
    memset(b, 0, sizeof(*b));
    b->size = size;
    if (seed != NO_DATA) {
        CU(cuMemAlloc(&b->ptr, size));
        gpu_fill(b->ptr, size, seed);
    }
    return b;
}

static ucs_status_t gpu_reg(uct_pair_t *p, gpu_buf_t *b, unsigned access)
{
    uint8_t packed[256];
    ucs_status_t status;

    if (p->md_attr.rkey_packed_size > sizeof(packed)) {
        return UCS_ERR_BUFFER_TOO_SMALL;
    }
    status = uct_md_mem_reg(p->md, (void*)b->ptr, b->size, access, &b->memh);
    if (status != UCS_OK) {
        b->memh = NULL;
        return status;
    }
    status = uct_md_mkey_pack(p->md, b->memh, packed);
    if (status == UCS_OK) {
        status = uct_rkey_unpack(p->component, packed, &b->rkey);
    }
    b->has_rkey = (status == UCS_OK);
    return status;
}

/* The check's buffers: rkeys, registrations, memory. */
static void gpu_free_all(uct_pair_t *p)
{
    gpu_buf_t *b;

    while (p->num_bufs > 0) {
        b = &p->bufs[--p->num_bufs];
        if (b->has_rkey) {
            uct_rkey_release(p->component, &b->rkey);
        }
        if (b->memh != NULL) {
            uct_md_mem_dereg(p->md, b->memh);
        }
        if (b->ptr != 0) {
            cuMemFree(b->ptr);
        }
    }
}

static int progress(uct_pair_t *p, time_t until, const char *what)
{
    check_deadline(until, what);
    uct_worker_progress(p->worker);
    return 1;
}

static void comp_done(uct_completion_t *self)
{
}

/* A put (local -> remote) or get (remote -> local) zcopy, then a flush of
 * the endpoint: the status of the first that fails, or UCS_OK. */
static ucs_status_t rma(uct_pair_t *p, uct_ep_h ep, int get, gpu_buf_t *local,
                        uint64_t remote, uct_rkey_t rkey)
{
    const char *what[] = { get ? "a get_zcopy" : "a put_zcopy",
                           "an endpoint flush" };
    uct_iov_t iov = { (void*)local->ptr, local->size, local->memh, 0, 1 };
    time_t until  = deadline();
    uct_completion_t comp;
    ucs_status_t status;
    int step;

    for (step = 0; step < 2; ++step) {
        comp = (uct_completion_t){ comp_done, 1, UCS_OK };
        do {
            status = (step == 1) ? uct_ep_flush(ep, 0, &comp) : get ?
                     uct_ep_get_zcopy(ep, &iov, 1, remote, rkey, &comp) :
                     uct_ep_put_zcopy(ep, &iov, 1, remote, rkey, &comp);
        } while ((status == UCS_ERR_NO_RESOURCE) &&
                 progress(p, until, what[step]));
        while ((status == UCS_INPROGRESS) && (comp.count > 0)) {
            progress(p, until, what[step]);
        }
        status = (status == UCS_INPROGRESS) ? comp.status : status;
        if (status != UCS_OK) {
            return status;
        }
    }
    return UCS_OK;
}

/* A put of src into dst through rkey; *off: where dst is then not data
 * seed (-1: nowhere). */
static ucs_status_t put_expect(uct_pair_t *p, uct_ep_h ep, gpu_buf_t *src,
                               gpu_buf_t *dst, uct_rkey_t rkey, int seed,
                               ssize_t *off)
{
    ucs_status_t status = rma(p, ep, 0, src, dst->ptr, rkey);

    *off = gpu_mismatch(dst->ptr, dst->size, seed);
    return status;
}

#define ODD_BUFS 4       /* of each size, between ODD_BUFS + 1 neighbours */

/* ODD_BUFS buffers of size bytes, allocated in turn with neighbours full
 * of canaries: put 0 -> 1, get 2 <- 3. */
static void check_odd_size(uct_pair_t *p, size_t size)
{
    static const char *role[ODD_BUFS] = { "put source", "put target",
                                          "get target", "get source" };
    static const int holds[ODD_BUFS]  = { 0, 0, 3, 3 };
    gpu_buf_t *b[ODD_BUFS], *nb[ODD_BUFS + 1];
    int edge[ODD_BUFS][2], i, side, mid = 0, edges = 0, value;
    long page = sysconf(_SC_PAGESIZE);
    ucs_status_t status;
    ssize_t off;

#define EDGE(_i, _side) ((_side) ? b[_i]->ptr + size : b[_i]->ptr - 1)
    for (i = 0; i <= ODD_BUFS; ++i) {
        nb[i] = gpu_new(p, size, CANARY);
        if (i < ODD_BUFS) {
            b[i] = gpu_new(p, size, i);
            mid += (b[i]->ptr % page) != 0;
        }
    }
    for (i = 0; i < ODD_BUFS; ++i) {
        status = gpu_reg(p, b[i], UCT_MD_MEM_ACCESS_ALL);
        EXPECT(status == UCS_OK, "odd: register %zu B of CUDA memory at"
               " 0x%llx: %s", size, b[i]->ptr, ucs_status_string(status));
        for (side = 0; side < 2; ++side) {
            edge[i][side] = gpu_peek(EDGE(i, side));
        }
    }

    status = rma(p, p->ep, 0, b[0], b[1]->ptr, b[1]->rkey.rkey);
    EXPECT(status == UCS_OK, "odd: put_zcopy of %zu B between CUDA buffers:"
           " %s", size, ucs_status_string(status));
    status = rma(p, p->ep, 1, b[2], b[3]->ptr, b[3]->rkey.rkey);
    EXPECT(status == UCS_OK, "odd: get_zcopy of %zu B between CUDA buffers:"
           " %s", size, ucs_status_string(status));

    for (i = 0; i <= ODD_BUFS; ++i) {
        off = gpu_mismatch(nb[i]->ptr, size, CANARY);
        EXPECT(off < 0, "odd: %zu B: neighbour 0x%llx overwritten at byte"
               " %zd", size, nb[i]->ptr, off);
        if (i == ODD_BUFS) {
            break;
        }
        off = gpu_mismatch(b[i]->ptr, size, holds[i]);
        EXPECT(off < 0, "odd: %zu B: the %s at 0x%llx is wrong from byte"
               " %zd", size, role[i], b[i]->ptr, off);
        for (side = 0; side < 2; ++side) {
            value = (edge[i][side] < 0) ? -1 : gpu_peek(EDGE(i, side));
            EXPECT(value == edge[i][side], "odd: %zu B: the byte just %s the"
                   " %s at 0x%llx changed (0x%02x -> 0x%02x)", size,
                   side ? "after" : "before", role[i], b[i]->ptr,
                   edge[i][side], value);
            edges += (value >= 0);
        }
    }
    ok("odd: put and get zcopy of %zu B between CUDA buffers (%d of %d at"
       " mid-page addresses): data arrived; %d neighbours and %d of %d"
       " bytes just before and after them unchanged", size, mid, ODD_BUFS,
       ODD_BUFS + 1, edges, 2 * ODD_BUFS);
#undef EDGE
out:
    gpu_free_all(p);
}

/* Registered first for local read only (which a registration cached for
 * the buffer must not keep to), then for remote put: a put works. */
static void check_access(uct_pair_t *p)
{
    gpu_buf_t *src      = gpu_new(p, 3000, 7);
    gpu_buf_t *dst      = gpu_new(p, 3000, 8);
    uct_mem_h read_only = NULL;
    ucs_status_t status;
    ssize_t off;

    status = uct_md_mem_reg(p->md, (void*)dst->ptr, dst->size,
                            UCT_MD_MEM_ACCESS_LOCAL_READ, &read_only);
    EXPECT(status == UCS_OK, "access: register for local read: %s",
           ucs_status_string(status));
    status = gpu_reg(p, dst, UCT_MD_MEM_ACCESS_REMOTE_PUT);
    EXPECT(status == UCS_OK, "access: register again for remote put: %s",
           ucs_status_string(status));
    status = gpu_reg(p, src, UCT_MD_MEM_ACCESS_LOCAL_READ);
    EXPECT(status == UCS_OK, "access: register the put's source: %s",
           ucs_status_string(status));
    status = put_expect(p, p->ep, src, dst, dst->rkey.rkey, 7, &off);
    EXPECT((status == UCS_OK) && (off < 0), "access: a put into CUDA memory"
           " registered for local read, then for remote put: %s, target"
           " wrong from byte %zd", ucs_status_string(status), off);
    ok("access: a put into CUDA memory registered for local read only,"
       " then for remote put");
out:
    if (read_only != NULL) {
        uct_md_mem_dereg(p->md, read_only);
    }
    gpu_free_all(p);
}

#define REALLOC_TRIES 64

/* Frees ptr, then allocates size bytes until the driver gives ptr again,
 * at most REALLOC_TRIES times: whether it did. */
static int realloc_same_address(CUdeviceptr ptr, size_t size)
{
    CUdeviceptr other[REALLOC_TRIES], again = 0;
    int n = 0;

    CU(cuMemFree(ptr));
    while ((n < REALLOC_TRIES) && (again != ptr)) {
        CU(cuMemAlloc(&again, size));
        if (again != ptr) {
            other[n++] = again;
        }
    }
    while (n > 0) {
        CU(cuMemFree(other[--n]));
    }
    return again == ptr;
}

/* A peer's rkey of freed memory never reaches what is allocated at its
 * address next; the new registration's rkey does. */
static void check_stale_rkey(uct_pair_t *p)
{
    gpu_buf_t *src = gpu_new(p, 10000, 1);
    gpu_buf_t *old = gpu_new(p, 10000, 2);
    uct_ep_h ep[2] = { pair_connect(p), pair_connect(p) }; /* old, new */
    ucs_status_t stale, status;
    gpu_buf_t *buf;
    ssize_t off;
    int i;

    EXPECT((ep[0] != NULL) && (ep[1] != NULL), "stale: create endpoints");
    EXPECT((gpu_reg(p, src, UCT_MD_MEM_ACCESS_ALL) == UCS_OK) &&
           (gpu_reg(p, old, UCT_MD_MEM_ACCESS_ALL) == UCS_OK),
           "stale: register CUDA memory");
    status = put_expect(p, p->ep, src, old, old->rkey.rkey, 1, &off);
    EXPECT((status == UCS_OK) && (off < 0), "stale: a put with the rkey of"
           " live memory: %s, wrong from byte %zd",
           ucs_status_string(status), off);

    /* the owner deregisters and frees; the peer keeps the rkey */
    uct_md_mem_dereg(p->md, old->memh);
    old->memh = NULL;
    buf       = gpu_new(p, old->size, NO_DATA);
    buf->ptr  = old->ptr;
    old->ptr  = 0;
    if (!realloc_same_address(buf->ptr, buf->size)) {
        buf->ptr = 0;
        skip("stale: the driver did not give a freed address again in %d"
             " allocations", REALLOC_TRIES);
        goto out;
    }
    gpu_fill(buf->ptr, buf->size, 2);
    status = gpu_reg(p, buf, UCT_MD_MEM_ACCESS_ALL);
    EXPECT(status == UCS_OK, "stale: register the new buffer: %s",
           ucs_status_string(status));

    /* each on its own endpoint: an access error fails the one it is on */
    stale = put_expect(p, ep[0], src, buf, old->rkey.rkey, 2, &off);
    EXPECT(off < 0, "stale: a put with the old rkey (%s) wrote into the"
           " buffer allocated at its address (byte %zd)",
           ucs_status_string(stale), off);
    status = put_expect(p, ep[1], src, buf, buf->rkey.rkey, 1, &off);
    EXPECT((status == UCS_OK) && (off < 0), "stale: a put with the new"
           " registration's rkey: %s, wrong from byte %zd",
           ucs_status_string(status), off);
    ok("stale: freed and allocated again at the same address: a put with"
       " the old rkey %s%s, and the new rkey works",
       (stale == UCS_OK) ? "left the new buffer unchanged" : "failed: ",
       (stale == UCS_OK) ? "" : ucs_status_string(stale));
out:
    for (i = 0; i < 2; ++i) {
        if (ep[i] != NULL) {
            uct_ep_destroy(ep[i]);
        }
    }
    gpu_free_all(p);
}

static void uct_checks(const char *dev)
{
    static const size_t odd_sizes[] = { 8, 100, 3000, 4097, 10000 };
    uct_pair_t *p = calloc(1, sizeof(*p));
    unsigned i;

    pair_open(p, dev);
    if (!(p->md_attr.cap.reg_mem_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA))) {
        skip("odd, access, stale: syncmem cannot register CUDA memory on %s"
             " (the device takes no dma-bufs and nvidia_peermem is not"
             " loaded; UCX_LOG_LEVEL=debug says which)", dev);
    } else {
        for (i = 0; i < sizeof(odd_sizes) / sizeof(odd_sizes[0]); ++i) {
            check_odd_size(p, odd_sizes[i]);
        }
        check_access(p);
        check_stale_rkey(p);
    }
    pair_close(p);
    free(p);
}

#endif

int main(int argc, char **argv)
{
    const char *dev   = (argc > 1) ? argv[1] : getenv("SYNCMEM_DEV");
    const char *limit = getenv("SYNCMEM_TEST_WAIT_S");
    const char *str   = "?";
    int count = 0, driver_ok;
    CUcontext ctx;
    CUdevice cudev;
    CUresult res;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if ((limit != NULL) && (atoi(limit) > 0)) {
        wait_s = atoi(limit);
    }
    signal(SIGALRM, on_alarm);
    alarm(10 * wait_s);

    res = cuInit(0);
    if (res == CUDA_SUCCESS) {
        res = cuDeviceGetCount(&count);
    }
    if ((res != CUDA_SUCCESS) || (count == 0)) {
        cuGetErrorString(res, &str);
        skip("GPU checks: no GPU (%s, CUresult %d)", (res == CUDA_SUCCESS) ?
             "the driver sees none" : str, res);
        return 77;
    }
    CU(cuDeviceGet(&cudev, 0));
    CU(cuDevicePrimaryCtxRetain(&ctx, cudev));
    CU(cuCtxSetCurrent(ctx));

    driver_checks();
    driver_ok = num_ok;
#ifdef SYNCMEM_DRIVER_ONLY
    (void)dev;
    skip("data movement: built without UCX (test/gpu/run.sh DEV builds"
         " with it)");
#else
    if ((dev == NULL) || (*dev == '\0')) {
        skip("data movement: no RDMA port given (test/gpu/run.sh DEV, or"
             " SYNCMEM_DEV)");
    } else {
        uct_checks(dev);
        ucp_check(dev);
    }
#endif
    if (num_failed > 0) {
        printf("%d check(s) failed\n", num_failed);
        return 1;
    }
    if (num_ok == driver_ok) {
        skip("GPU checks: no data moved, so syncmem's CUDA path was not"
             " checked (see above)");
        return 77;
    }
    return 0;
}
