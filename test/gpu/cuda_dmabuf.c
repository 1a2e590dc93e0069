/*
 * GPU check for syncmem's CUDA memory path (run by test/gpu/run.sh on a
 * machine with a GPU; exits non-zero on the first failed check).
 *
 * 1. Driver level, needs only a GPU: CUDA memory is device memory, it can be
 *    exported as a dma-buf, and a freed and reallocated buffer gets a new
 *    buffer id even at the same address (what keeps the cache honest).
 * 2. With SYNCMEM_DEV set to an RDMA port (e.g. mlx5_0:1) and the module
 *    loaded (syncmem-run): the syncmem MD detects CUDA memory, registers it,
 *    and put/get zcopy move data between two CUDA buffers, checked by
 *    copying them back to the host.
 */
#define _GNU_SOURCE
#include <cuda.h>
#ifndef SYNCMEM_DRIVER_ONLY
#include <uct/api/uct.h>
#include <ucs/async/async_fwd.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIZE (4u << 20)

#define CHECK(_cond, ...) \
    do { \
        if (!(_cond)) { \
            printf("FAIL %s:%d: ", __FILE__, __LINE__); \
            printf(__VA_ARGS__); \
            printf("\n"); \
            exit(1); \
        } \
    } while (0)

#define CU(_call) \
    do { \
        CUresult _res = (_call); \
        const char *_str = "?"; \
        cuGetErrorString(_res, &_str); \
        CHECK(_res == CUDA_SUCCESS, "%s: %s", #_call, _str); \
    } while (0)

static void driver_checks(void)
{
    CUdeviceptr a, b;
    unsigned long long id_a, id_b;
    unsigned mem_type = 0;
    char link[64] = "", path[64];
    int dmabuf = 0, fd = -1;
    CUdevice dev;

    CU(cuDeviceGet(&dev, 0));
    CU(cuDeviceGetAttribute(&dmabuf, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
                            dev));
    printf("GPU 0: dma-buf export %s\n", dmabuf ? "supported" : "NOT supported");

    CU(cuMemAlloc(&a, SIZE));
    CU(cuPointerGetAttribute(&mem_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a));
    CHECK(mem_type == CU_MEMORYTYPE_DEVICE, "memory type %u", mem_type);
    CU(cuPointerGetAttribute(&id_a, CU_POINTER_ATTRIBUTE_BUFFER_ID, a));

    CHECK(dmabuf, "this GPU/driver cannot export dma-bufs (the NVIDIA open"
          " kernel modules can)");
    CU(cuMemGetHandleForAddressRange(&fd, a, SIZE,
                                     CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    CHECK(readlink(path, link, sizeof(link) - 1) > 0, "readlink %s", path);
    CHECK(!strncmp(link, "/dmabuf:", 8), "fd %d is %s, not a dma-buf", fd,
          link);
    close(fd);
    printf("ok: 4 MiB of CUDA memory exported as dma-buf (%s)\n", link);

    CU(cuMemFree(a));
    CU(cuMemAlloc(&b, SIZE));
    CU(cuPointerGetAttribute(&id_b, CU_POINTER_ATTRIBUTE_BUFFER_ID, b));
    CHECK(id_a != id_b, "buffer id %llu reused", id_a);
    printf("ok: reallocated buffer (%s address) has a new buffer id\n",
           (a == b) ? "same" : "another");
    CU(cuMemFree(b));
}

#ifndef SYNCMEM_DRIVER_ONLY
static uct_component_h find_syncmem(void)
{
    uct_component_h *components, found = NULL;
    uct_component_attr_t attr = { .field_mask = UCT_COMPONENT_ATTR_FIELD_NAME };
    unsigned i, count;

    CHECK(uct_query_components(&components, &count) == UCS_OK, "components");
    for (i = 0; i < count; ++i) {
        if ((uct_component_query(components[i], &attr) == UCS_OK) &&
            !strcmp(attr.name, "syncmem")) {
            found = components[i];
        }
    }
    uct_release_component_list(components);
    CHECK(found != NULL, "no syncmem component: run through syncmem-run");
    return found;
}

static void uct_checks(const char *dev_name)
{
    char md_name[64];
    uct_component_h component = find_syncmem();
    uct_md_config_t *md_config;
    uct_iface_config_t *if_config;
    uct_iface_params_t params = {0};
    uct_ep_params_t ep_params = {0};
    uct_iface_h iface[2];
    uct_iface_attr_t if_attr;
    ucs_async_context_t *async;
    uct_worker_h worker;
    uct_md_attr_t md_attr;
    uct_md_h md;
    uct_mem_h memh[2];
    uct_rkey_bundle_t rkey;
    uct_ep_h ep;
    ucs_memory_type_t mem_type;
    uct_completion_t comp;
    CUdeviceptr buf[2];
    unsigned char *host, dev_addr[64], iface_addr[64], packed[64];
    ucs_status_t status;
    uct_iov_t iov;
    int i;

    snprintf(md_name, sizeof(md_name), "%s", dev_name);
    *strchrnul(md_name, ':') = '\0';
    CHECK(uct_md_config_read(component, NULL, NULL, &md_config) == UCS_OK,
          "md config");
    CHECK(uct_md_open(component, md_name, md_config, &md) == UCS_OK,
          "open md %s", md_name);
    CHECK(uct_md_query(md, &md_attr) == UCS_OK, "md query");
    CHECK(md_attr.cap.detect_mem_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA),
          "the MD does not detect CUDA memory (see UCX_LOG_LEVEL=debug)");
    CHECK(md_attr.cap.reg_mem_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA),
          "the MD cannot register CUDA memory (see UCX_LOG_LEVEL=debug)");

    host = malloc(SIZE);
    for (i = 0; i < 2; ++i) {
        CU(cuMemAlloc(&buf[i], SIZE));
        memset(host, 'A' + i, SIZE);
        CU(cuMemcpyHtoD(buf[i], host, SIZE));
        CHECK(uct_md_detect_memory_type(md, (void*)buf[i], SIZE, &mem_type) ==
              UCS_OK && mem_type == UCS_MEMORY_TYPE_CUDA, "detect");
        CHECK(uct_md_mem_reg(md, (void*)buf[i], SIZE, UCT_MD_MEM_ACCESS_ALL,
                             &memh[i]) == UCS_OK, "register CUDA buffer %d", i);
    }
    printf("ok: CUDA memory detected and registered on %s\n", md_name);

    CHECK(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async) ==
          UCS_OK, "async");
    CHECK(uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker) == UCS_OK,
          "worker");
    CHECK(uct_md_iface_config_read(md, "syncmem", NULL, NULL, &if_config) ==
          UCS_OK, "iface config");
    params.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                        UCT_IFACE_PARAM_FIELD_DEVICE;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = "syncmem";
    params.mode.device.dev_name = dev_name;
    for (i = 0; i < 2; ++i) {
        CHECK(uct_iface_open(md, worker, &params, if_config, &iface[i]) ==
              UCS_OK, "open iface on %s", dev_name);
        uct_iface_progress_enable(iface[i], UCT_PROGRESS_SEND |
                                            UCT_PROGRESS_RECV);
    }
    uct_iface_query(iface[1], &if_attr);
    uct_iface_get_device_address(iface[1], (uct_device_addr_t*)dev_addr);
    uct_iface_get_address(iface[1], (uct_iface_addr_t*)iface_addr);
    ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE |
                           UCT_EP_PARAM_FIELD_DEV_ADDR |
                           UCT_EP_PARAM_FIELD_IFACE_ADDR;
    ep_params.iface      = iface[0];
    ep_params.dev_addr   = (uct_device_addr_t*)dev_addr;
    ep_params.iface_addr = (uct_iface_addr_t*)iface_addr;
    CHECK(uct_ep_create(&ep_params, &ep) == UCS_OK, "ep");

    uct_md_mkey_pack(md, memh[1], packed);
    CHECK(uct_rkey_unpack(component, packed, &rkey) == UCS_OK, "rkey");

    /* put: the first half of buf[0] into buf[1]; get: buf[1]'s second
     * half back into buf[0]'s */
    iov = (uct_iov_t){ (void*)buf[0], SIZE / 2, memh[0], 0, 1 };
    while ((status = uct_ep_put_zcopy(ep, &iov, 1, buf[1], rkey.rkey,
                                      NULL)) == UCS_ERR_NO_RESOURCE) {
        uct_worker_progress(worker);
    }
    CHECK(status == UCS_OK || status == UCS_INPROGRESS, "put_zcopy: %s",
          ucs_status_string(status));
    iov = (uct_iov_t){ (void*)(buf[0] + SIZE / 2), SIZE / 2, memh[0], 0, 1 };
    comp = (uct_completion_t){ NULL, 1, UCS_OK };
    while ((status = uct_ep_get_zcopy(ep, &iov, 1, buf[1] + SIZE / 2,
                                      rkey.rkey, &comp)) ==
           UCS_ERR_NO_RESOURCE) {
        uct_worker_progress(worker);
    }
    CHECK(status == UCS_OK || status == UCS_INPROGRESS, "get_zcopy: %s",
          ucs_status_string(status));
    while ((status == UCS_INPROGRESS) && (comp.count > 0)) {
        uct_worker_progress(worker);
    }
    comp = (uct_completion_t){ NULL, 1, UCS_OK };
    while ((status = uct_ep_flush(ep, 0, &comp)) == UCS_ERR_NO_RESOURCE) {
        uct_worker_progress(worker);
    }
    while ((status == UCS_INPROGRESS) && (comp.count > 0)) {
        uct_worker_progress(worker);
    }
    CHECK(comp.status == UCS_OK, "flush: %s", ucs_status_string(comp.status));

    CU(cuMemcpyDtoH(host, buf[1], SIZE));
    CHECK(host[0] == 'A' && host[SIZE / 2 - 1] == 'A' && host[SIZE / 2] == 'B',
          "put_zcopy between CUDA buffers: got %c %c %c", host[0],
          host[SIZE / 2 - 1], host[SIZE / 2]);
    CU(cuMemcpyDtoH(host, buf[0], SIZE));
    CHECK(host[SIZE / 2] == 'B' && host[SIZE - 1] == 'B',
          "get_zcopy between CUDA buffers: got %c", host[SIZE / 2]);
    printf("ok: put_zcopy and get_zcopy of 2 MiB between CUDA buffers\n");

    uct_rkey_release(component, &rkey);
    uct_ep_destroy(ep);
    for (i = 0; i < 2; ++i) {
        uct_iface_close(iface[i]);
        uct_md_mem_dereg(md, memh[i]);
        cuMemFree(buf[i]);
    }
    uct_config_release(if_config);
    uct_config_release(md_config);
    uct_md_close(md);
    uct_worker_destroy(worker);
    ucs_async_context_destroy(async);
    free(host);
}
#endif

int main(int argc, char **argv)
{
    const char *dev = getenv("SYNCMEM_DEV");
    CUcontext ctx;
    CUdevice cudev;
    int count = 0;

    CU(cuInit(0));
    CU(cuDeviceGetCount(&count));
    CHECK(count > 0, "no GPU");
    CU(cuDeviceGet(&cudev, 0));
    CU(cuDevicePrimaryCtxRetain(&ctx, cudev));
    CU(cuCtxSetCurrent(ctx));

    driver_checks();
#ifndef SYNCMEM_DRIVER_ONLY
    if ((dev != NULL) && (*dev != '\0')) {
        uct_checks(dev);
        return 0;
    }
#endif
    printf("SKIPPED: put/get between CUDA buffers (%s)\n",
#ifdef SYNCMEM_DRIVER_ONLY
           "built without UCX"
#else
           "no RDMA port given"
#endif
           );
    (void)dev;
    return 0;
}
