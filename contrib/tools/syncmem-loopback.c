/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem-loopback: what 'syncmem-run --check' asks of the module on one
 * port, through UCT's public API only: that UCX lists the syncmem
 * transport on it, that memory registers, and that a loopback connection
 * (two interfaces on the port, an endpoint from one to the other) carries
 * a put, a get and an atomic whose results are checked.
 *
 *   syncmem-run syncmem-loopback DEVICE:PORT
 *
 * Prints one line per check, "ok CHECK: detail" or "FAIL CHECK: detail";
 * UCX's own error messages go to stderr. Exits 0 only when all pass; a
 * failed check skips those that need it.
 */
#include <uct/api/uct.h>
#include <ucs/async/async.h>
#include <ucs/time/time.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_TIMEOUT_SEC  20.0   /* connecting retries for ~6 s */

static int failed;

static void report(int ok, const char *check, const char *fmt, ...)
{
    va_list ap;

    printf("%s %s: ", ok ? "ok" : "FAIL", check);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    failed |= !ok;
}

static uct_component_h find_syncmem(void)
{
    uct_component_h *components, found = NULL;
    uct_component_attr_t attr;
    unsigned i, count;

    if (uct_query_components(&components, &count) != UCS_OK) {
        return NULL;
    }
    for (i = 0; i < count; ++i) {
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        if ((uct_component_query(components[i], &attr) == UCS_OK) &&
            !strcmp(attr.name, "syncmem")) {
            found = components[i];
        }
    }
    uct_release_component_list(components);
    return found;
}

static int md_lists(uct_md_h md, const char *dev)
{
    uct_tl_resource_desc_t *resources;
    unsigned i, count;
    int found = 0;

    if (uct_md_query_tl_resources(md, &resources, &count) != UCS_OK) {
        return 0;
    }
    for (i = 0; i < count; ++i) {
        found |= !strcmp(resources[i].dev_name, dev) &&
                 !strcmp(resources[i].tl_name, "syncmem");
    }
    uct_release_tl_resource_list(resources);
    return found;
}

static ucs_status_t open_iface(uct_md_h md, uct_worker_h worker,
                               const char *dev, uct_iface_h *iface_p)
{
    uct_iface_params_t params = {};
    uct_iface_config_t *config;
    ucs_status_t status;

    status = uct_md_iface_config_read(md, "syncmem", NULL, NULL, &config);
    if (status != UCS_OK) {
        return status;
    }
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                  UCT_IFACE_PARAM_FIELD_DEVICE;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = "syncmem";
    params.mode.device.dev_name = dev;
    status = uct_iface_open(md, worker, &params, config, iface_p);
    uct_config_release(config);
    if (status == UCS_OK) {
        uct_iface_progress_enable(*iface_p, UCT_PROGRESS_SEND |
                                            UCT_PROGRESS_RECV);
    }
    return status;
}

static int timed_out(ucs_time_t start)
{
    return ucs_time_to_sec(ucs_get_time() - start) > CHECK_TIMEOUT_SEC;
}

static void comp_cb(uct_completion_t *comp)
{
}

/* Retries an operation while it answers NO_RESOURCE (connecting, queue
 * full), then waits for its completion. */
#define RUN_OP(_worker, _comp, _status, _op) \
    do { \
        ucs_time_t _start = ucs_get_time(); \
        while ((((_status) = (_op)) == UCS_ERR_NO_RESOURCE) && \
               !timed_out(_start)) { \
            uct_worker_progress(_worker); \
        } \
        if ((_status) == UCS_INPROGRESS) { \
            while (((_comp)->count > 0) && !timed_out(_start)) { \
                uct_worker_progress(_worker); \
            } \
            (_status) = ((_comp)->count > 0) ? UCS_ERR_TIMED_OUT : \
                        (_comp)->status; \
        } \
    } while (0)

static ucs_status_t flush_ep(uct_worker_h worker, uct_ep_h ep)
{
    uct_completion_t comp = {comp_cb, 1, UCS_OK};
    ucs_status_t status;

    RUN_OP(worker, &comp, status, uct_ep_flush(ep, 0, &comp));
    return status;
}

static void unpack_cb(void *arg, const void *data, size_t length)
{
    memcpy(arg, data, length);
}

static void loopback(uct_component_h component, uct_md_h md,
                     uct_worker_h worker, const char *dev)
{
    uint64_t target[2] = {0, 0}, value = 0x5ca1ab1e5eedf00dul, result = 0;
    uct_completion_t comp = {comp_cb, 1, UCS_OK};
    uct_iface_h a = NULL, b = NULL;
    uct_rkey_bundle_t rkey = {};
    uct_ep_params_t ep_params;
    uct_device_addr_t *dev_addr;
    uct_iface_addr_t *iface_addr;
    uct_iface_attr_t attr;
    uct_mem_h memh = NULL;
    uct_ep_h ep   = NULL;
    char packed[256];
    ucs_status_t status;

    status = uct_md_mem_reg(md, target, sizeof(target),
                            UCT_MD_MEM_ACCESS_ALL, &memh);
    if (status == UCS_OK) {
        status = uct_md_mkey_pack(md, memh, packed);
    }
    if (status == UCS_OK) {
        status = uct_rkey_unpack(component, packed, &rkey);
    }
    report(status == UCS_OK, "registration", "%s",
           (status == UCS_OK) ? "memory registers, and its key packs" :
           ucs_status_string(status));
    if (status != UCS_OK) {
        goto out;
    }

    status = open_iface(md, worker, dev, &a);
    if (status == UCS_OK) {
        status = open_iface(md, worker, dev, &b);
    }
    if (status == UCS_OK) {
        status = uct_iface_query(b, &attr);
    }
    if (status != UCS_OK) {
        report(0, "connection", "opening an interface on %s: %s", dev,
               ucs_status_string(status));
        goto out;
    }

    dev_addr   = alloca(attr.device_addr_len);
    iface_addr = alloca(attr.iface_addr_len);
    uct_iface_get_device_address(b, dev_addr);
    uct_iface_get_address(b, iface_addr);
    ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE |
                           UCT_EP_PARAM_FIELD_DEV_ADDR |
                           UCT_EP_PARAM_FIELD_IFACE_ADDR;
    ep_params.iface      = a;
    ep_params.dev_addr   = dev_addr;
    ep_params.iface_addr = iface_addr;
    status = uct_ep_create(&ep_params, &ep);
    if (status == UCS_OK) {
        status = flush_ep(worker, ep); /* waits for the handshake */
    }
    report(status == UCS_OK, "connection", "%s",
           (status == UCS_OK) ? "an endpoint connects to an interface on the"
           " same port" : ucs_status_string(status));
    if (status != UCS_OK) {
        goto out;
    }

    RUN_OP(worker, &comp, status,
           uct_ep_put_short(ep, &value, sizeof(value), (uintptr_t)&target[0],
                            rkey.rkey));
    if (status == UCS_OK) {
        status = flush_ep(worker, ep);
    }
    if ((status == UCS_OK) && (target[0] != value)) {
        report(0, "put", "8 bytes written, but the target holds 0x%lx",
               (unsigned long)target[0]);
    } else {
        report(status == UCS_OK, "put", "%s", (status == UCS_OK) ?
               "8 bytes arrive" : ucs_status_string(status));
    }

    target[1] = value + 1;
    comp.count = 1;
    RUN_OP(worker, &comp, status,
           uct_ep_get_bcopy(ep, unpack_cb, &result, sizeof(result),
                            (uintptr_t)&target[1], rkey.rkey, &comp));
    if ((status == UCS_OK) && (result != target[1])) {
        report(0, "get", "read 0x%lx, the source holds 0x%lx",
               (unsigned long)result, (unsigned long)target[1]);
    } else {
        report(status == UCS_OK, "get", "%s", (status == UCS_OK) ?
               "8 bytes read back" : ucs_status_string(status));
    }

    comp.count = 1;
    result     = 0;
    target[1]  = 40;
    RUN_OP(worker, &comp, status,
           uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_ADD, 2, &result,
                                 (uintptr_t)&target[1], rkey.rkey, &comp));
    if ((status == UCS_OK) && ((result != 40) || (target[1] != 42))) {
        report(0, "atomic", "fetch-add of 2 to 40 fetched %lu and left %lu",
               (unsigned long)result, (unsigned long)target[1]);
    } else {
        report(status == UCS_OK, "atomic", "%s", (status == UCS_OK) ?
               "a 64-bit fetch-add" : ucs_status_string(status));
    }

out:
    if (ep != NULL) {
        uct_ep_destroy(ep);
    }
    if (b != NULL) {
        uct_iface_close(b);
    }
    if (a != NULL) {
        uct_iface_close(a);
    }
    if (rkey.rkey != 0) {
        uct_rkey_release(component, &rkey);
    }
    if (memh != NULL) {
        uct_md_mem_dereg(md, memh);
    }
}

int main(int argc, char **argv)
{
    ucs_async_context_t *async = NULL;
    uct_worker_h worker        = NULL;
    uct_md_config_t *md_config;
    uct_component_h component;
    char md_name[64], *colon;
    uct_md_h md = NULL;

    if ((argc != 2) || (strchr(argv[1], ':') == NULL)) {
        fprintf(stderr, "usage: syncmem-run %s DEVICE:PORT\n", argv[0]);
        return 2;
    }
    snprintf(md_name, sizeof(md_name), "%s", argv[1]);
    colon  = strrchr(md_name, ':');
    *colon = '\0';

    component = find_syncmem();
    report(component != NULL, "module", "%s", (component != NULL) ?
           "the syncmem component is registered in UCX" :
           "UCX has no syncmem component: the module did not load (a"
           " message above says why, if it refused this UCX)");
    if (component == NULL) {
        return 1;
    }

    if ((ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async) !=
         UCS_OK) ||
        (uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker) != UCS_OK) ||
        (uct_md_config_read(component, NULL, NULL, &md_config) != UCS_OK)) {
        report(0, "device", "cannot create a UCT worker");
        return 1;
    }
    if (uct_md_open(component, md_name, md_config, &md) != UCS_OK) {
        md = NULL;
    }
    uct_config_release(md_config);

    if ((md == NULL) || !md_lists(md, argv[1])) {
        report(0, "device", "syncmem does not list %s%s", argv[1],
               (md == NULL) ? " (its memory domain did not open)" :
               " (is the port active?)");
    } else {
        report(1, "device", "syncmem lists %s", argv[1]);
        loopback(component, md, worker, argv[1]);
    }

    if (md != NULL) {
        uct_md_close(md);
    }
    uct_worker_destroy(worker);
    ucs_async_context_destroy(async);
    return failed;
}
