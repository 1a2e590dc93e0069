/*
 * syncmem - the UCT component and its memory domains.
 *
 * One memory domain per verbs device, named after the device. The MD owns
 * the device context and protection domain; interfaces (one per port) and
 * memory registrations hang off it.
 */
#include "syncmem.h"

#include <ucs/sys/string.h>
#include <errno.h>
#include <string.h>


static ucs_config_field_t uct_syncmem_md_config_table[] = {
    {"", "", NULL, ucs_offsetof(uct_syncmem_md_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

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
                 " kernel run under the syncmem test guest: contrib/guest.sh --"
                 " <command>", (devs == NULL) ? strerror(errno) :
                 "no InfiniBand/RoCE devices in the verbs device list");
    }

    *resources_p     = resources;
    *num_resources_p = count;
    return UCS_OK;
}

static void uct_syncmem_md_close(uct_md_h tl_md)
{
    uct_syncmem_md_t *md = ucs_derived_of(tl_md, uct_syncmem_md_t);

    ibv_dealloc_pd(md->pd);
    ibv_close_device(md->ctx);
    ucs_free(md);
}

static ucs_status_t uct_syncmem_md_query(uct_md_h tl_md,
                                         uct_syncmem_md_attr_t *attr)
{
    uct_syncmem_md_t *md = ucs_derived_of(tl_md, uct_syncmem_md_t);

    /* Registration arrives with the RMA work; until then, claim nothing. */
    attr->cap.flags            = 0;
    attr->cap.reg_mem_types    = 0;
    attr->cap.alloc_mem_types  = 0;
    attr->cap.detect_mem_types = 0;
    attr->cap.access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->cap.max_alloc        = 0;
    attr->cap.max_reg          = md->dev_attr.max_mr_size;
    attr->rkey_packed_size     = 0;
    attr->reg_cost             = ucs_linear_func_make(0, 0);
    memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus));
    return UCS_OK;
}

static uct_md_ops_t uct_syncmem_md_ops = {
    .close              = uct_syncmem_md_close,
    .query              = uct_syncmem_md_query,
    .mem_alloc          = (uct_md_mem_alloc_func_t)ucs_empty_function_return_unsupported,
    .mem_free           = (uct_md_mem_free_func_t)ucs_empty_function_return_unsupported,
    .mem_advise         = (uct_md_mem_advise_func_t)ucs_empty_function_return_unsupported,
    .mem_reg            = (uct_md_mem_reg_func_t)ucs_empty_function_return_unsupported,
    .mem_dereg          = (uct_md_mem_dereg_func_t)ucs_empty_function_return_unsupported,
    .mem_query          = (uct_md_mem_query_func_t)ucs_empty_function_return_unsupported,
    .mkey_pack          = (uct_md_mkey_pack_func_t)ucs_empty_function_return_unsupported,
    .is_sockaddr_accessible = (uct_md_is_sockaddr_accessible_func_t)ucs_empty_function_return_zero,
    .detect_memory_type = (uct_md_detect_memory_type_func_t)ucs_empty_function_return_unsupported
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

static ucs_status_t uct_syncmem_md_open(uct_component_t *component,
                                        const char *md_name,
                                        const uct_md_config_t *config,
                                        uct_md_h *md_p)
{
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

    ucs_debug("syncmem: opened md %s (%u ports, fw %s)", md_name,
              md->dev_attr.phys_port_cnt, md->dev_attr.fw_ver);
    *md_p = &md->super;
    return UCS_OK;

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
    .rkey_unpack        = (uct_component_rkey_unpack_func_t)ucs_empty_function_return_unsupported,
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
