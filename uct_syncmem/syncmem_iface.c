/*
 * syncmem - the transport interface: one per port and worker.
 */
#include "syncmem.h"
#include "syncmem_addr.h"

#include <ucs/sys/string.h>
#include <ucs/type/class.h>


ucs_config_field_t uct_syncmem_iface_config_table[] = {
    {"", "", NULL, ucs_offsetof(uct_syncmem_iface_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {"GID_INDEX", "auto",
     "RoCE GID table index used for traffic. 'auto' picks a RoCE v2 GID with\n"
     "an IPv4-mapped address, then any RoCE v2 GID, then any GID. Ignored on\n"
     "InfiniBand, which routes by LID. See 'show_gids' for the table.",
     ucs_offsetof(uct_syncmem_iface_config_t, gid_index),
     UCS_CONFIG_TYPE_ULUNITS},

    {"MTU", "auto",
     "Largest path MTU in bytes (256, 512, 1024, 2048 or 4096). 'auto' uses\n"
     "the port's active MTU. Peers use the smaller of their two values.",
     ucs_offsetof(uct_syncmem_iface_config_t, mtu), UCS_CONFIG_TYPE_ULUNITS},

    {NULL}
};


static ucs_status_t uct_syncmem_iface_query(uct_iface_h tl_iface,
                                            uct_iface_attr_t *attr)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_iface, uct_syncmem_iface_t);

    uct_base_iface_query(&iface->super, attr);

    attr->device_addr_len = sizeof(uct_syncmem_dev_addr_t);
    attr->iface_addr_len  = sizeof(uct_syncmem_iface_addr_t);
    attr->ep_addr_len     = 0;
    attr->max_conn_priv   = 0;

    /* Only what works is claimed: operations arrive with their issues. */
    attr->cap.flags       = 0;
    attr->cap.event_flags = 0;

    attr->latency         = ucs_linear_func_make(
                              (iface->port.link_layer == IBV_LINK_LAYER_ETHERNET) ?
                              1.5e-6 : 1e-6, 0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = uct_syncmem_port_bandwidth(&iface->port);
    attr->overhead            = 75e-9;
    attr->priority            = 0;
    return UCS_OK;
}

static ucs_status_t
uct_syncmem_iface_get_device_address(uct_iface_h tl_iface,
                                     uct_device_addr_t *addr)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_iface, uct_syncmem_iface_t);

    uct_syncmem_dev_addr_pack(&iface->port, (uct_syncmem_dev_addr_t*)addr);
    return UCS_OK;
}

static ucs_status_t uct_syncmem_iface_get_address(uct_iface_h tl_iface,
                                                  uct_iface_addr_t *addr)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_iface, uct_syncmem_iface_t);

    ((uct_syncmem_iface_addr_t*)addr)->id = iface->id;
    return UCS_OK;
}

static int uct_syncmem_iface_is_reachable(const uct_iface_h tl_iface,
                                          const uct_device_addr_t *dev_addr,
                                          const uct_iface_addr_t *iface_addr)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_iface, uct_syncmem_iface_t);

    return (dev_addr != NULL) &&
           uct_syncmem_dev_addr_is_reachable(&iface->port,
                                             (const uct_syncmem_dev_addr_t*)
                                             dev_addr);
}

static uct_iface_ops_t uct_syncmem_iface_ops;

static UCS_CLASS_INIT_FUNC(uct_syncmem_iface_t, uct_md_h tl_md,
                           uct_worker_h worker,
                           const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    uct_syncmem_iface_config_t *config =
            ucs_derived_of(tl_config, uct_syncmem_iface_config_t);
    uct_syncmem_md_t *md = ucs_derived_of(tl_md, uct_syncmem_md_t);
    ucs_status_t status;
    uint8_t port_num;

    if (!(params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE) ||
        !(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error("syncmem: only UCT_IFACE_OPEN_MODE_DEVICE is supported");
        return UCS_ERR_UNSUPPORTED;
    }

    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, &uct_syncmem_iface_ops,
                              &uct_base_iface_internal_ops, tl_md, worker,
                              params, tl_config
                              UCS_STATS_ARG(NULL)
                              UCS_STATS_ARG(UCT_SYNCMEM_NAME));

    status = uct_syncmem_device_parse_name(md, params->mode.device.dev_name,
                                           &port_num);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_syncmem_port_open(md, port_num, config, &self->port);
    if (status != UCS_OK) {
        return status;
    }

    self->id = ucs_generate_uuid((uintptr_t)self);
    ucs_debug("syncmem: iface %p on %s id 0x%" PRIx64, self,
              params->mode.device.dev_name, self->id);
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(uct_syncmem_iface_t)
{
}

UCS_CLASS_DEFINE(uct_syncmem_iface_t, uct_base_iface_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_syncmem_iface_t, uct_iface_t, uct_md_h,
                                 uct_worker_h, const uct_iface_params_t*,
                                 const uct_iface_config_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_syncmem_iface_t, uct_iface_t);

static uct_iface_ops_t uct_syncmem_iface_ops = {
    .ep_create                = (uct_ep_create_func_t)ucs_empty_function_return_unsupported,
    .ep_destroy               = (uct_ep_destroy_func_t)ucs_empty_function,
    .ep_flush                 = uct_base_ep_flush,
    .ep_fence                 = uct_base_ep_fence,
    .iface_flush              = uct_base_iface_flush,
    .iface_fence              = uct_base_iface_fence,
    .iface_progress_enable    = (uct_iface_progress_enable_func_t)ucs_empty_function,
    .iface_progress_disable   = (uct_iface_progress_disable_func_t)ucs_empty_function,
    .iface_progress           = (uct_iface_progress_func_t)ucs_empty_function_return_zero,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_syncmem_iface_t),
    .iface_query              = uct_syncmem_iface_query,
    .iface_get_device_address = uct_syncmem_iface_get_device_address,
    .iface_get_address        = uct_syncmem_iface_get_address,
    .iface_is_reachable       = uct_syncmem_iface_is_reachable
};

UCT_TL_DEFINE_ENTRY(&uct_syncmem_component, syncmem,
                    uct_syncmem_query_tl_devices, uct_syncmem_iface_t,
                    UCT_SYNCMEM_CONFIG_PREFIX, uct_syncmem_iface_config_table,
                    uct_syncmem_iface_config_t);

/* Registered when the library loads (LD_PRELOAD or UCX's module loader);
 * the library is linked -z nodelete because UCX 1.13 never unlinks a
 * component from its list. */
UCT_SINGLE_TL_INIT(&uct_syncmem_component, syncmem, ctor,,)
