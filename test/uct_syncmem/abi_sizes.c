/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Compiled in C with exactly the flags of the module, so the sizes are the
 * ones the module was built with; test_abi.cc compares them with what the
 * installed UCX libraries report through 'ucx_info -y'.
 */
#include "abi_sizes.h"

#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>
#include <ucs/datastruct/arbiter.h>
#include <ucs/datastruct/mpool.h>
#include <ucs/memory/rcache.h>
#include <ucs/memory/rcache_int.h>
#include <ucs/type/class.h>

#define SIZE(_type) { #_type, sizeof(_type) }

const syncmem_abi_size_t syncmem_abi_sizes[] = {
    SIZE(uct_base_iface_t),
    SIZE(uct_iface_t),
    SIZE(uct_iface_ops_t),
    SIZE(uct_iface_attr_t),
    SIZE(uct_iface_config_t),
    SIZE(uct_md_t),
    SIZE(uct_md_ops_t),
    SIZE(uct_md_attr_t),
    SIZE(uct_md_config_t),
    SIZE(uct_ep_t),
    SIZE(uct_completion_t),
    SIZE(uct_tl_resource_desc_t),
    SIZE(ucs_mpool_t),
    SIZE(ucs_arbiter_t),
    SIZE(ucs_arbiter_group_t),
    SIZE(ucs_arbiter_elem_t),
    SIZE(ucs_rcache_t),
    SIZE(ucs_rcache_region_t),
    SIZE(ucs_config_field_t),
    SIZE(ucs_class_t),
    SIZE(ucs_callbackq_t),
    { NULL, 0 }
};
