/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The UCP check of test/gpu/cuda_dmabuf (cuda_dmabuf.c says what it checks
 * and runs it): tag send/recv, put and get between CUDA buffers, 8 B .. 64
 * MiB, over UCP on syncmem (and cuda_copy) on the port under test.
 */
#include "cuda_check.h"
#include <ucp/api/ucp.h>
#include <ucs/config/global_opts.h>

#define UCP_MAX_SIZE (64ul << 20)

enum { UCP_TAG, UCP_PUT, UCP_GET, UCP_NUM_OPS };

/* Two workers of one context, and an endpoint from 0 to 1. */
typedef struct {
    ucp_context_h context;
    ucp_worker_h  worker[2];
    ucp_ep_h      ep;
} ucp_pair_t;

/* UCX_<name>=value unless set already; printed either way. */
static void ucx_setting(const char *name, const char *value)
{
    char env[64];

    snprintf(env, sizeof(env), "UCX_%s", name);
    setenv(env, value, 0);
    printf(" %s=%s", env, getenv(env));
}

/* Progresses both workers until request completes, and frees it. */
static ucs_status_t ucp_wait(ucp_pair_t *u, void *request, const char *what)
{
    time_t until = deadline();
    ucs_status_t status;

    if (!UCS_PTR_IS_PTR(request)) {
        return UCS_PTR_STATUS(request);
    }
    while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) {
        check_deadline(until, what);
        ucp_worker_progress(u->worker[0]);
        ucp_worker_progress(u->worker[1]);
    }
    ucp_request_free(request);
    return status;
}

static void ucp_pair_open(ucp_pair_t *u, const char *dev)
{
    ucp_params_t params = { .field_mask = UCP_PARAM_FIELD_FEATURES,
                            .features   = UCP_FEATURE_TAG | UCP_FEATURE_RMA };
    ucp_worker_params_t worker_params = {
        .field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE
    };
    ucp_ep_params_t ep_params = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS
    };
    ucp_address_t *address;
    size_t length;

    printf("ucp:");
    ucx_setting("TLS", "syncmem,cuda_copy");
    ucx_setting("NET_DEVICES", dev);
    /* the memtype cache knows no memory allocated before UCX was loaded
     * (a UCS option, read when UCS loaded: set there) */
    if (getenv("UCX_MEMTYPE_CACHE") == NULL) {
        ucs_global_opts_set_value("MEMTYPE_CACHE", "n");
        printf(" UCX_MEMTYPE_CACHE=n");
    }
    /* UCP 1.13's put/get copy small buffers with the CPU: zero copy only */
    ucx_setting("ZCOPY_THRESH", "0");
    printf("\n");
    if ((ucp_init(&params, NULL, &u->context) != UCS_OK) ||
        (ucp_worker_create(u->context, &worker_params, &u->worker[0]) !=
         UCS_OK) ||
        (ucp_worker_create(u->context, &worker_params, &u->worker[1]) !=
         UCS_OK) ||
        (ucp_worker_get_address(u->worker[1], &address, &length) != UCS_OK)) {
        die("ucp: cannot set up two workers (UCX's error above)");
    }
    ep_params.address = address;
    if (ucp_ep_create(u->worker[0], &ep_params, &u->ep) != UCS_OK) {
        die("ucp: cannot create an endpoint (UCX's error above)");
    }
    ucp_worker_release_address(u->worker[1], address);
}

static void ucp_pair_close(ucp_pair_t *u)
{
    ucp_request_param_t param = { .op_attr_mask = 0 };

    ucp_wait(u, ucp_ep_close_nbx(u->ep, &param), "an endpoint's close");
    ucp_worker_destroy(u->worker[1]);
    ucp_worker_destroy(u->worker[0]);
    ucp_cleanup(u->context);
}

/* One operation of size bytes: tag a -> b, put a -> b or get a <- b. */
static ucs_status_t ucp_move(ucp_pair_t *u, int op, CUdeviceptr a,
                             CUdeviceptr b, size_t size, ucp_rkey_h rkey_b)
{
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE,
        .memory_type  = UCS_MEMORY_TYPE_CUDA
    };
    ucs_status_t status, recv_status;
    void *recv;

    if (op == UCP_TAG) {
        recv   = ucp_tag_recv_nbx(u->worker[1], (void*)b, size, 0x5a, ~0ul,
                                  &param);
        status = ucp_wait(u, ucp_tag_send_nbx(u->ep, (void*)a, size, 0x5a,
                                              &param), "a tag send");
        if ((status != UCS_OK) && UCS_PTR_IS_PTR(recv)) {
            ucp_request_cancel(u->worker[1], recv);
        }
        recv_status = ucp_wait(u, recv, "a tag receive");
        return (status != UCS_OK) ? status : recv_status;
    }
    status = ucp_wait(u, (op == UCP_PUT) ?
                      ucp_put_nbx(u->ep, (void*)a, size, b, rkey_b, &param) :
                      ucp_get_nbx(u->ep, (void*)a, size, b, rkey_b, &param),
                      (op == UCP_PUT) ? "a put" : "a get");
    param.op_attr_mask = 0;
    return (status != UCS_OK) ? status :
           ucp_wait(u, ucp_ep_flush_nbx(u->ep, &param), "an endpoint flush");
}

/* Tag, put and get between CUDA buffers a and b, 8 B .. 64 MiB: a and b
 * hold data 5; the target is cleared, the byte after it set apart, and
 * the operation must bring back the data and leave that byte. */
void ucp_check(const char *dev)
{
    static const char *names[UCP_NUM_OPS] = { "tag send/recv", "put",
                                              "get" };
    ucp_mem_map_params_t map = {
        .field_mask  = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                       UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                       UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE,
        .length      = UCP_MAX_SIZE + 1,
        .memory_type = UCS_MEMORY_TYPE_CUDA
    };
    uint8_t *data  = malloc(UCP_MAX_SIZE + 1);
    uint8_t *check = malloc(UCP_MAX_SIZE + 1);
    int failed[UCP_NUM_OPS] = {0}, op, i, num_sizes = 0;
    CUdeviceptr buf[2], dst;    /* a, b */
    ucp_mem_h memh[2];
    ucp_rkey_h rkey_b;
    ucs_status_t status;
    void *rkey_buffer;
    size_t size, j;
    ucp_pair_t u;

    /* UCP 1.13 receives eager data into CUDA memory only through it */
    if (find_component("cuda_cpy") == NULL) {
        skip("ucp: this UCX (%s) has no cuda_copy, and its UCP cannot"
             " receive into CUDA memory without it (it would use a"
             " memory-type endpoint it does not have, and crash); configure"
             " syncmem --with-ucx= a UCX built with CUDA",
             ucp_get_version_string());
        goto out;
    }
    ucp_pair_open(&u, dev);
    pattern(data, UCP_MAX_SIZE + 1, 5);
    for (i = 0; i < 2; ++i) {
        CU(cuMemAlloc(&buf[i], UCP_MAX_SIZE + 1));
        CU(cuMemcpyHtoD(buf[i], data, UCP_MAX_SIZE + 1));
        map.address = (void*)buf[i];
        if (ucp_mem_map(u.context, &map, &memh[i]) != UCS_OK) {
            die("ucp: ucp_mem_map of 64 MiB of CUDA memory failed");
        }
    }
    if ((ucp_rkey_pack(u.context, memh[1], &rkey_buffer, &j) != UCS_OK) ||
        (ucp_ep_rkey_unpack(u.ep, rkey_buffer, &rkey_b) != UCS_OK)) {
        die("ucp: cannot pack and unpack an rkey of CUDA memory");
    }
    ucp_rkey_buffer_release(rkey_buffer);

    for (size = 8; size <= UCP_MAX_SIZE;
         size = (size < UCP_MAX_SIZE / 4) ? size * 4 : size * 2) {
        ++num_sizes;
        for (op = 0; op < UCP_NUM_OPS; ++op) {
            dst = buf[op != UCP_GET];
            CU(cuMemsetD8(dst, 0, size));
            CU(cuMemsetD8(dst + size, (uint8_t)~data[size], 1));
            status = ucp_move(&u, op, buf[0], buf[1], size, rkey_b);
            CU(cuMemcpyDtoH(check, dst, size + 1));
            CU(cuMemcpyHtoD(dst, data, size + 1));    /* for the next */
            for (j = 0; (j < size) && (check[j] == data[j]); ++j) {
            }
            if ((status == UCS_OK) && (j == size) &&
                (check[size] == (uint8_t)~data[size])) {
                continue;
            }
            ++failed[op];
            fail("ucp: %s of %zu B between CUDA buffers: %s, byte %zu is"
                 " 0x%02x, not 0x%02x", names[op], size,
                 ucs_status_string(status), j, check[j],
                 (j < size) ? data[j] : (uint8_t)~data[j]);
        }
    }
    for (op = 0; op < UCP_NUM_OPS; ++op) {
        if (!failed[op]) {
            ok("ucp: %s between CUDA buffers, 8 B .. 64 MiB (%d sizes)",
               names[op], num_sizes);
        }
    }

    ucp_rkey_destroy(rkey_b);
    for (i = 0; i < 2; ++i) {
        ucp_mem_unmap(u.context, memh[i]);
    }
    ucp_pair_close(&u);
    for (i = 0; i < 2; ++i) {
        CU(cuMemFree(buf[i]));
    }
out:
    free(check);
    free(data);
}
