/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the UCT component and its memory domains.
 *
 * One memory domain per verbs device, named after the device. The MD owns
 * the device context and protection domain; interfaces (one per port) and
 * memory registrations hang off it.
 */
#include "syncmem_md.h"
#include "syncmem_iface.h"
#include "syncmem_mw.h"

#include <ucs/sys/string.h>
#include <ucs/sys/topo/base/topo.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static ucs_config_field_t uct_syncmem_md_config_table[] = {
    {"", "", NULL, ucs_offsetof(uct_syncmem_md_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

    {"RCACHE", "try",
     "Registration cache (see RCACHE_* below):\n"
     " y   - use it; opening the memory domain fails without it\n"
     " n   - register on every mem_reg, with access no broader than asked\n"
     " try - use it when UCM memory events work (they keep it from serving\n"
     "       registrations of memory that was unmapped)\n"
     "A cached registration allows remote reads, or everything if any\n"
     "write access was asked for.",
     ucs_offsetof(uct_syncmem_md_config_t, rcache_mode),
     UCS_CONFIG_TYPE_TERNARY},

    {"", "", NULL, ucs_offsetof(uct_syncmem_md_config_t, rcache),
     UCS_CONFIG_TYPE_TABLE(UCT_SYNCMEM_RCACHE_CONFIG_TABLE)},

    {"REG_ALIGN", "auto",
     "With the registration cache, widen a registration that misses to this\n"
     "alignment, over memory that is mapped, so that neighbouring buffers\n"
     "share it. A power of 2, at least the page size ('auto': page size).\n"
     "2M suits buffers in huge pages.",
     ucs_offsetof(uct_syncmem_md_config_t, reg_align),
     UCS_CONFIG_TYPE_MEMUNITS},

    {"CUDA_REG_CACHE", "0",
     "How many unused registrations of CUDA memory to keep for reuse (0:\n"
     "none, each is released as UCP lets go of it). A kept one holds its GPU\n"
     "memory after the application frees it, until it is dropped: as it is\n"
     "released, or at the next registration of other CUDA memory, once the\n"
     "driver says its memory is gone; so freed memory may not return to the\n"
     "GPU at once. They are found by the driver's buffer id of each mapped\n"
     "piece, so memory freed, or unmapped and mapped again, even at the same\n"
     "address, is registered anew.",
     ucs_offsetof(uct_syncmem_md_config_t, cuda_reg_cache),
     UCS_CONFIG_TYPE_UINT},

    {"CUDA_REG_CACHE_SIZE", "1g",
     "How many bytes of CUDA memory the unused registrations kept may hold\n"
     "(see CUDA_REG_CACHE), counted in whole exported pages; the oldest go\n"
     "first.",
     ucs_offsetof(uct_syncmem_md_config_t, cuda_reg_cache_size),
     UCS_CONFIG_TYPE_MEMUNITS},

    {"MW", "try",
     "Memory windows for the remote keys UCP packs for invalidation (peer\n"
     "error handling: a rendezvous whose transfer fails revokes the key of\n"
     "its buffer, and the registration cache keeps the registration):\n"
     " y   - use them; opening the memory domain fails without them\n"
     " n   - register the buffer again for such a key instead\n"
     " try - use them where the device has them (ibv_devinfo -v: MEM_WINDOW)",
     ucs_offsetof(uct_syncmem_md_config_t, mw_mode),
     UCS_CONFIG_TYPE_TERNARY},

    {NULL}
};


/* Only devices that speak the InfiniBand transport (IB and RoCE) carry RC. */
static int uct_syncmem_device_is_usable(struct ibv_device *dev)
{
    return dev->transport_type == IBV_TRANSPORT_IB;
}

static ucs_status_t
uct_syncmem_query_md_resources(uct_component_t *component,
                               uct_md_resource_desc_t **resources_p,
                               unsigned *num_resources_p)
{
    static int warned = 0;
    uct_md_resource_desc_t *resources;
    struct ibv_device **devs;
    int num_devs, i;
    unsigned count = 0;

    devs = ibv_get_device_list(&num_devs);
    if (devs == NULL) {
        num_devs = 0;
    }

    resources = ucs_calloc(ucs_max(num_devs, 1), sizeof(*resources),
                           "syncmem_md_resources");
    if (resources == NULL) {
        if (devs != NULL) {
            ibv_free_device_list(devs);
        }
        return UCS_ERR_NO_MEMORY;
    }

    for (i = 0; i < num_devs; ++i) {
        if (!uct_syncmem_device_is_usable(devs[i])) {
            ucs_debug("syncmem: %s is not an InfiniBand/RoCE device, skipped",
                      ibv_get_device_name(devs[i]));
            continue;
        }
        ucs_strncpy_zero(resources[count++].md_name,
                         ibv_get_device_name(devs[i]),
                         sizeof(resources->md_name));
    }

    if (devs != NULL) {
        ibv_free_device_list(devs);
    }

    /* Without this a user who asked for UCX_TLS=syncmem only learns that no
     * transport is usable; say once what is missing and how to get it. */
    if ((count == 0) && !warned) {
        warned = 1;
        ucs_warn("syncmem: no RDMA device found (%s). Load the HCA driver and"
                 " ib_uverbs, or create a Soft-RoCE device ('rdma link add rxe0"
                 " type rxe netdev <if>'); on a machine without RDMA in its"
                 " kernel run under the syncmem test guest:"
                 " contrib/guest/guest.sh -- <command>",
                 (devs == NULL) ? strerror(errno) :
                 "no InfiniBand/RoCE devices in the verbs device list");
    }

    *resources_p     = resources;
    *num_resources_p = count;
    return UCS_OK;
}

static void uct_syncmem_md_close(uct_md_h tl_md)
{
    uct_syncmem_md_t *md = ucs_derived_of(tl_md, uct_syncmem_md_t);

    uct_syncmem_rcache_cleanup(md);
    uct_syncmem_cuda_cleanup(md);
    uct_syncmem_port_events_cleanup(md);
    uct_syncmem_mw_domain_destroy(md->mw);
    uct_syncmem_memh_cleanup(md);
    ibv_dealloc_pd(md->pd);
    ibv_close_device(md->ctx);
    ucs_free(md);
}

/*
 * Whether UCP should ask us the memory type of its buffers (mem_query; UCP
 * 1.13-1.22 never calls detect_memory_type). Only where nothing better
 * answers: cuda_copy does, and does more (its cache, managed memory); and
 * with UCS's memory-type cache on, a UCX without CUDA never asks any md
 * (its empty cache says "host"), so saying yes would only tell
 * ucp_context_query() that UCX detects CUDA memory. Before the process
 * loads the CUDA driver it has no CUDA memory: load it before ucp_init().
 */
static int uct_syncmem_md_detects_cuda(void)
{
    return (ucs_global_opts.enable_memtype_cache == UCS_NO) &&
           uct_syncmem_cuda_in_use() && !uct_syncmem_memh_ucx_has_cuda();
}

/*
 * What UCP reads of the MD, answered field by field as UCX's own ib md
 * (src/uct/ib/base/ib_md.c) answers it for the same capability; a comment
 * says where we differ and why. compat.h says which release has which field.
 */
ucs_status_t uct_syncmem_md_query(uct_md_h tl_md, uct_syncmem_md_attr_t *attr)
{
    uct_syncmem_md_t *md = ucs_derived_of(tl_md, uct_syncmem_md_t);
    typeof(*UCT_SYNCMEM_MD_ATTR_CAP(attr)) *cap = UCT_SYNCMEM_MD_ATTR_CAP(attr);
#if UCT_SYNCMEM_HAVE_MD_ATTR_V2
    const char *component = md->super.component->name;
    size_t component_len  = strlen(component);
    uint64_t guid         = md->dev_attr.sys_image_guid;
#endif

    UCT_SYNCMEM_MD_ATTR_INIT(attr);
    /* no ADVISE (ib: on-demand paging), no REG_DMABUF: UCP's dma-buf fds go
     * to mem_reg, which takes none (CUDA's are ours: syncmem_cuda.c) */
    /* INVALIDATE: UCP gives an endpoint with peer error handling an
     * rma_bw lane to an iface only with it (syncmem_memh.c) */
    cap->flags            = UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_MEMH |
                            UCT_MD_FLAG_NEED_RKEY | UCT_SYNCMEM_MD_INVALIDATE;
    cap->reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    cap->alloc_mem_types  = 0;
    cap->detect_mem_types = 0;
    /* what the CPU can touch: short and bcopy only ever see host memory */
    cap->access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    if (uct_syncmem_md_detects_cuda()) {
        cap->detect_mem_types = UCS_BIT(UCS_MEMORY_TYPE_CUDA);
    }
    if (uct_syncmem_cuda_can_reg(md)) {
        cap->reg_mem_types |= UCS_BIT(UCS_MEMORY_TYPE_CUDA);
    }
    /* as ib's (UCX's tests size their buffers by it; without
     * UCT_MD_FLAG_ALLOC nobody asks us to allocate) */
    cap->max_alloc        = ULONG_MAX;
    /* ib: ULONG_MAX ("TODO query device"); we did query it */
    cap->max_reg          = md->dev_attr.max_mr_size;
    attr->rkey_packed_size = sizeof(uct_syncmem_packed_rkey_t);
    attr->reg_cost         = md->reg_cost;
    /* ib: the device's NUMA node; verbs does not tell us, sysfs would */
    memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus));

#if UCT_SYNCMEM_HAVE_MD_ATTR_V2
    /* UCP may keep any registration of ours in its own cache, as ib's: its
     * zero-copy paths assert every registering MD is cacheable (1.18,
     * 1.22), and cache whatever this says. A UCX with CUDA support hears
     * of cudaFree (UCM's hooks); one without needs UCX_RCACHE_ENABLE=n for
     * CUDA memory (uct_syncmem_memh_cuda_advice) */
    attr->cache_mem_types           = UCS_MASK(UCS_MEMORY_TYPE_LAST);
    /* we take dma-bufs (CUDA), we hand out none: that is cuda_copy's part */
    attr->dmabuf_mem_types          = 0;
    /* no UCT_MD_FLAG_EXPORTED_MKEY (ib: mlx5 DevX only) */
    attr->exported_mkey_packed_size = 0;
    /* the same device seen by two processes: component name and system
     * image GUID, as ib's (UCP matches exported keys by it) */
    memset(attr->global_id, 0, sizeof(attr->global_id));
    UCS_STATIC_ASSERT(sizeof(guid) <=
                      (UCT_MD_GLOBAL_ID_MAX - UCT_COMPONENT_NAME_MAX));
    memcpy(attr->global_id, component, component_len);
    memcpy(UCS_PTR_BYTE_OFFSET(attr->global_id, component_len), &guid,
           sizeof(guid));
#endif
#if UCT_SYNCMEM_HAVE_MD_REG_NONBLOCK
    /* ib: its on-demand-paging types; we pin at registration */
    attr->reg_nonblock_mem_types    = 0;
#endif
#if UCT_SYNCMEM_HAVE_MD_REG_ALIGNMENT
    /* ibv_reg_mr takes any range (our cache widens its own: REG_ALIGN) */
    attr->reg_alignment             = 1;
#endif
#if UCT_SYNCMEM_HAVE_MD_GVA
    /* ib: mlx5's one key for the whole address space; verbs has none */
    attr->gva_mem_types             = 0;
#endif
#if UCT_SYNCMEM_HAVE_MD_REQUIRED_MEM_FLAGS
    /* as ib: memory UCP knows cannot be registered (e.g. CUDA VMM without
     * RDMA support) is not offered to mem_reg */
    attr->required_mem_flags        = UCS_MEM_FLAG_REGISTRABLE;
#endif
    return UCS_OK;
}

/* Whether the device takes dma-buf MRs at all: a driver without them
 * refuses before it looks at the fd (EOPNOTSUPP, ENOSYS), one with them
 * fails on fd -1 (EBADF). Only that clear answer counts: any other error
 * says nothing, and CUDA memory is then left to a peer-memory module. */
static int uct_syncmem_md_probe_dmabuf(uct_syncmem_md_t *md)
{
    struct ibv_mr *mr;
    int supported;

    mr = ibv_reg_dmabuf_mr(md->pd, 0, ucs_get_page_size(), 0, -1,
                           IBV_ACCESS_LOCAL_WRITE);
    if (mr != NULL) {
        ibv_dereg_mr(mr);   /* cannot happen; be safe */
        return 1;
    }
    supported = (errno == EBADF);
    ucs_debug("syncmem: %s: dma-buf MRs %s (probe: %m)", md->name,
              supported ? "supported" : "not supported");
    return supported;
}

/*
 * What UCP asks of a pointer when it does not know its memory type (UCP
 * 1.13 per operation, unless UCS's memory-type cache answers; later
 * releases when their cache misses): CUDA memory is answered from the
 * driver, with the mapped piece that holds it (its allocation, or for VMM
 * memory its mapping, not the reservation) and its GPU; anything else is
 * not ours to answer, and UCP takes it for host memory.
 */
ucs_status_t uct_syncmem_md_mem_query(uct_md_h tl_md, const void *address,
                                      size_t length,
                                      uct_syncmem_mem_attr_t *mem_attr)
{
    uct_syncmem_md_t *md = ucs_derived_of(tl_md, uct_syncmem_md_t);
    uct_syncmem_cuda_info_t info;

    if (uct_syncmem_cuda_mem_info(address, &info) != UCS_OK) {
        return UCS_ERR_INVALID_ADDR;
    }

    if (mem_attr->field_mask & UCT_SYNCMEM_MEM_ATTR_FIELD(MEM_TYPE)) {
        mem_attr->mem_type = UCS_MEMORY_TYPE_CUDA;
    }
    if (mem_attr->field_mask & UCT_SYNCMEM_MEM_ATTR_FIELD(SYS_DEV)) {
        mem_attr->sys_dev = info.sys_dev;
    }
    if (mem_attr->field_mask & UCT_SYNCMEM_MEM_ATTR_FIELD(BASE_ADDRESS)) {
        mem_attr->base_address = (void*)info.base;
    }
    if (mem_attr->field_mask & UCT_SYNCMEM_MEM_ATTR_FIELD(ALLOC_LENGTH)) {
        mem_attr->alloc_length = info.size;
    }
#if UCT_SYNCMEM_HAVE_MEM_ATTR_DMABUF
    /* we export no dma-buf to UCP (dmabuf_mem_types is 0) */
    if (mem_attr->field_mask & UCT_SYNCMEM_MEM_ATTR_FIELD(DMABUF_FD)) {
        mem_attr->dmabuf_fd = UCT_DMABUF_FD_INVALID;
    }
    if (mem_attr->field_mask & UCT_SYNCMEM_MEM_ATTR_FIELD(DMABUF_OFFSET)) {
        mem_attr->dmabuf_offset = 0;
    }
#endif
#if UCT_SYNCMEM_HAVE_MEM_ATTR_MEM_FLAGS
    /* UCP 1.22 offers memory to an md only with the flags it requires */
    if (mem_attr->field_mask & UCT_SYNCMEM_MEM_ATTR_FIELD(MEM_FLAGS)) {
        mem_attr->mem_flags = uct_syncmem_cuda_can_reg(md) ?
                              UCS_MEM_FLAG_REGISTRABLE : 0;
    }
#else
    (void)md;
#endif
    return UCS_OK;
}

static uct_md_ops_t uct_syncmem_md_ops = {
    .close              = uct_syncmem_md_close,
    .query              = uct_syncmem_md_query,
    .mem_alloc          = (uct_md_mem_alloc_func_t)ucs_empty_function_return_unsupported,
    .mem_free           = (uct_md_mem_free_func_t)ucs_empty_function_return_unsupported,
    .mem_advise         = (uct_md_mem_advise_func_t)ucs_empty_function_return_unsupported,
    .mem_reg            = uct_syncmem_memh_mem_reg,
    .mem_dereg          = uct_syncmem_memh_mem_dereg,
    .mem_query          = uct_syncmem_md_mem_query,
    .mkey_pack          = uct_syncmem_memh_mkey_pack,
    .detect_memory_type = uct_syncmem_cuda_detect,
    UCT_SYNCMEM_MD_OPS_COMPAT_FIELDS
    UCT_SYNCMEM_MD_OPS_ELEM_FIELDS
};

static struct ibv_context *uct_syncmem_device_open(const char *name)
{
    struct ibv_context *ctx = NULL;
    struct ibv_device **devs;
    int num_devs, i;

    devs = ibv_get_device_list(&num_devs);
    if (devs == NULL) {
        ucs_error("syncmem: ibv_get_device_list() failed: %m");
        return NULL;
    }

    for (i = 0; i < num_devs; ++i) {
        if (!strcmp(ibv_get_device_name(devs[i]), name)) {
            ctx = ibv_open_device(devs[i]);
            if (ctx == NULL) {
                ucs_error("syncmem: ibv_open_device(%s) failed: %m; check"
                          " permissions of /dev/infiniband/uverbs*", name);
            }
            break;
        }
    }

    if (i == num_devs) {
        ucs_error("syncmem: no RDMA device named '%s' (see ibv_devices)", name);
    }

    ibv_free_device_list(devs);
    return ctx;
}

/* The HCA's PCI function, from its sysfs device link, so that UCP can pair
 * it with the GPU nearest to it; unknown for a virtual device (rxe). */
static ucs_sys_device_t uct_syncmem_md_sys_dev(const uct_syncmem_md_t *md)
{
    ucs_sys_device_t sys_dev = UCS_SYS_DEVICE_ID_UNKNOWN;
    char path[PATH_MAX];
    char *real;

    ucs_snprintf_zero(path, sizeof(path), "%s/device",
                      md->ctx->device->ibdev_path);
    real = realpath(path, NULL);
    if ((real == NULL) ||
        (ucs_topo_find_device_by_bdf_name(strrchr(real, '/') + 1, &sys_dev) !=
         UCS_OK)) {
        sys_dev = UCS_SYS_DEVICE_ID_UNKNOWN;
    }
    ucs_debug("syncmem: %s: PCI device %s", md->name,
              (sys_dev == UCS_SYS_DEVICE_ID_UNKNOWN) ? "unknown" : real);
    free(real);
    return sys_dev;
}

static ucs_status_t uct_syncmem_md_open(uct_component_t *component,
                                        const char *md_name,
                                        const uct_md_config_t *config,
                                        uct_md_h *md_p)
{
    const uct_syncmem_md_config_t *md_config;
    uct_syncmem_md_t *md;
    ucs_status_t status;
    int ret;

    md = ucs_calloc(1, sizeof(*md), "syncmem_md");
    if (md == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    md->super.ops       = &uct_syncmem_md_ops;
    md->super.component = &uct_syncmem_component;
    ucs_strncpy_zero(md->name, md_name, sizeof(md->name));

    md->ctx = uct_syncmem_device_open(md_name);
    if (md->ctx == NULL) {
        status = UCS_ERR_NO_DEVICE;
        goto err_free;
    }

    ret = ibv_query_device(md->ctx, &md->dev_attr);
    if (ret) {
        ucs_error("syncmem: ibv_query_device(%s) failed: %s", md_name,
                  strerror(ret));
        status = UCS_ERR_IO_ERROR;
        goto err_close;
    }

    md->pd = ibv_alloc_pd(md->ctx);
    if (md->pd == NULL) {
        ucs_error("syncmem: ibv_alloc_pd(%s) failed: %m", md_name);
        status = UCS_ERR_IO_ERROR;
        goto err_close;
    }

    md_config   = ucs_derived_of(config, uct_syncmem_md_config_t);
    /* pinning and mapping: a fixed cost plus per-page work (a cache hit is
     * cheaper; syncmem_rcache.c says how much) */
    md->reg_cost = ucs_linear_func_make(16e-6, 0.06e-9);
    md->dmabuf  = uct_syncmem_md_probe_dmabuf(md);
    md->sys_dev = uct_syncmem_md_sys_dev(md);
    md->peermem = !access("/sys/module/nvidia_peermem", F_OK) ||
                  !access("/sys/kernel/mm/memory_peers/nv_mem/version", F_OK);
    status = uct_syncmem_memh_init(md);
    if (status != UCS_OK) {
        goto err_dealloc_pd;
    }

    /* before any registration: a window binds only over an MR that allows
     * it; without the cache every registration is its handle's own */
    status = uct_syncmem_mw_domain_create(md, (md_config->rcache_mode ==
                                               UCS_NO) ? UCS_NO :
                                              md_config->mw_mode, &md->mw);
    if (status != UCS_OK) {
        goto err_memh_cleanup;
    }
    md->mr_access = (md->mw != NULL) ? IBV_ACCESS_MW_BIND : 0;

    status = uct_syncmem_cuda_init(md, md_config->cuda_reg_cache,
                                   md_config->cuda_reg_cache_size);
    if (status != UCS_OK) {
        goto err_mw_destroy;
    }

    status = uct_syncmem_rcache_init(md, md_config);
    if (status != UCS_OK) {
        goto err_cuda_cleanup;
    }

    status = uct_syncmem_port_events_init(md);
    if (status != UCS_OK) {
        goto err_rcache_cleanup;
    }

    ucs_debug("syncmem: opened md %s (%u ports, fw %s)", md_name,
              md->dev_attr.phys_port_cnt, md->dev_attr.fw_ver);
    *md_p = &md->super;
    return UCS_OK;

err_rcache_cleanup:
    uct_syncmem_rcache_cleanup(md);
err_cuda_cleanup:
    uct_syncmem_cuda_cleanup(md);
err_mw_destroy:
    uct_syncmem_mw_domain_destroy(md->mw);
err_memh_cleanup:
    uct_syncmem_memh_cleanup(md);
err_dealloc_pd:
    ibv_dealloc_pd(md->pd);
err_close:
    ibv_close_device(md->ctx);
err_free:
    ucs_free(md);
    return status;
}

uct_component_t uct_syncmem_component = {
    .name               = UCT_SYNCMEM_NAME,
    .query_md_resources = uct_syncmem_query_md_resources,
    .md_open            = uct_syncmem_md_open,
    .cm_open            = (uct_component_cm_open_func_t)ucs_empty_function_return_unsupported,
    .rkey_unpack        = uct_syncmem_memh_rkey_unpack,
    .rkey_ptr           = (uct_component_rkey_ptr_func_t)ucs_empty_function_return_unsupported,
    .rkey_release       = (uct_component_rkey_release_func_t)ucs_empty_function_return_success,
    .md_config          = {
        .name           = "syncmem memory domain",
        .prefix         = UCT_SYNCMEM_CONFIG_PREFIX,
        .table          = uct_syncmem_md_config_table,
        .size           = sizeof(uct_syncmem_md_config_t),
    },
    .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER(&uct_syncmem_component),
    .flags              = 0,
    UCT_SYNCMEM_COMPONENT_COMPAT_FIELDS
};
