/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - differences between UCX releases, in one place.
 *
 * The transport is compiled against the internal headers of exactly the
 * UCX it will run in (config/m4/syncmem.m4), and refuses to load into any
 * other (syncmem_version.c), so it only has to absorb API differences
 * between releases, never layout differences. Everything that varies by
 * release lives here, keyed on UCT_API from <uct/api/version.h>; the code
 * elsewhere uses these names and never tests a version itself.
 *
 * Which releases were built and tested, and how: README, Supported UCX
 * releases (the table of contrib/harness/ucx-matrix.sh's results); those it
 * does not list were only compiled against. The release each change
 * appeared in was read from UCX's release tags:
 *   1.14  md ops: query fills uct_md_attr_v2_t, mem_reg takes params,
 *         mem_attach (is_sockaddr_accessible stays until 1.16);
 *         ucs_mpool_init takes ucs_mpool_params_t; iface mpool config has
 *         chunk size and growth
 *   1.15  internal ops: each transport has its own table; config parser
 *         takes the table's registry entry;
 *         iface_is_reachable_v2 (UCP asks it, with a reason string);
 *         invalidation split into RMA and AMO (md flags, mkey_pack flags)
 *   1.16  mkey_pack gets the address and length of the region (the md op
 *         and uct_md_mkey_pack_v2); internal
 *         ops: ep_is_connected; md ops lose is_sockaddr_accessible; rcache
 *         configuration is UCS's (ucs_rcache_config_t)
 *   1.17  rcache alignment is per ucs_rcache_get() call; ucs_align_*_pow2
 *         in ucs/sys/ptr_arith.h
 *   1.18  rcache ops: merge (always called); iface flag INTER_NODE
 *   1.19  rkey_unpack takes params; the rcache config loses alignment
 *   1.20  internal ops: iface_query_v2, iface_mem_element_pack,
 *         ep_get_device_ep (1.21 drops the first two again)
 *   1.21  md ops: mem_elem_pack
 *   1.22  internal ops: iface_query_v2 again, ep_put_sgl_zcopy; third-party
 *         modules load from UCX_PLUGIN_PATH (see Makefile.am)
 */
#ifndef UCT_SYNCMEM_COMPAT_H_
#define UCT_SYNCMEM_COMPAT_H_

#include <uct/api/uct.h>
#include <uct/api/version.h>
#include <uct/base/uct_md.h>
#include <uct/base/uct_iface.h>
#include <ucs/datastruct/mpool.h>
#include <ucs/memory/rcache.h>
#include <ucs/time/time.h>

#define UCT_SYNCMEM_UCX_SINCE(_major, _minor) \
    (UCT_API >= UCT_VERSION(_major, _minor))

#if !UCT_SYNCMEM_UCX_SINCE(1, 13) || UCT_SYNCMEM_UCX_SINCE(1, 23)
#  error "syncmem supports UCX 1.13 to 1.22; add this release's differences to compat.h"
#endif

#if UCT_SYNCMEM_UCX_SINCE(1, 14)
#  include <uct/api/v2/uct_v2.h>
#endif
#if UCT_SYNCMEM_UCX_SINCE(1, 17)
#  include <ucs/sys/ptr_arith.h>  /* ucs_align_*_pow2 moved here */
#endif


/* --- memory domain ----------------------------------------------------- */

#if UCT_SYNCMEM_UCX_SINCE(1, 14)
typedef uct_md_attr_v2_t uct_syncmem_md_attr_t;
/* v2 has the capabilities at the top level */
#  define UCT_SYNCMEM_MD_ATTR_CAP(_attr)   (_attr)
#else
typedef uct_md_attr_t uct_syncmem_md_attr_t;
#  define UCT_SYNCMEM_MD_ATTR_CAP(_attr)   (&(_attr)->cap)
#endif
#if UCT_SYNCMEM_UCX_SINCE(1, 17)
/* the defaults of what a later release adds and we do not know of yet */
#  define UCT_SYNCMEM_MD_ATTR_INIT(_attr)  uct_md_base_md_query(_attr)
#else
#  define UCT_SYNCMEM_MD_ATTR_INIT(_attr)  do {} while (0)
#endif

/*
 * The fields of uct_md_attr_v2_t beyond the v1 capabilities, by the release
 * that added them; UCP reads every one (uct_syncmem_md_query answers them).
 *   1.14  cache_mem_types, dmabuf_mem_types, exported_mkey_packed_size,
 *         global_id
 *   1.15  reg_nonblock_mem_types
 *   1.16  reg_alignment
 *   1.18  gva_mem_types
 *   1.22  required_mem_flags
 */
#define UCT_SYNCMEM_HAVE_MD_ATTR_V2            UCT_SYNCMEM_UCX_SINCE(1, 14)
#define UCT_SYNCMEM_HAVE_MD_REG_NONBLOCK       UCT_SYNCMEM_UCX_SINCE(1, 15)
#define UCT_SYNCMEM_HAVE_MD_REG_ALIGNMENT      UCT_SYNCMEM_UCX_SINCE(1, 16)
#define UCT_SYNCMEM_HAVE_MD_GVA                UCT_SYNCMEM_UCX_SINCE(1, 18)
#define UCT_SYNCMEM_HAVE_MD_REQUIRED_MEM_FLAGS UCT_SYNCMEM_UCX_SINCE(1, 22)

/* md ops .query; not static so that the host unit test can ask it */
ucs_status_t uct_syncmem_md_query(uct_md_h tl_md, uct_syncmem_md_attr_t *attr);

/* md ops .mem_query: its attributes gained dma-buf fields in 1.14 and
 * became uct_md_mem_attr_v2_t, with per-buffer memory flags, in 1.22 */
#if UCT_SYNCMEM_UCX_SINCE(1, 22)
typedef uct_md_mem_attr_v2_t uct_syncmem_mem_attr_t;
#  define UCT_SYNCMEM_MEM_ATTR_FIELD(_name)  UCT_MD_MEM_ATTR_V2_FIELD_##_name
#else
typedef uct_md_mem_attr_t uct_syncmem_mem_attr_t;
#  define UCT_SYNCMEM_MEM_ATTR_FIELD(_name)  UCT_MD_MEM_ATTR_FIELD_##_name
#endif
#define UCT_SYNCMEM_HAVE_MEM_ATTR_DMABUF     UCT_SYNCMEM_UCX_SINCE(1, 14)
#define UCT_SYNCMEM_HAVE_MEM_ATTR_MEM_FLAGS  UCT_SYNCMEM_UCX_SINCE(1, 22)
ucs_status_t uct_syncmem_md_mem_query(uct_md_h tl_md, const void *address,
                                      size_t length,
                                      uct_syncmem_mem_attr_t *mem_attr);

/* mem_reg's flags argument became a params struct */
#if UCT_SYNCMEM_UCX_SINCE(1, 14)
#  define UCT_SYNCMEM_MEM_REG_ARGS   const uct_md_mem_reg_params_t *params
#  define UCT_SYNCMEM_MEM_REG_FLAGS  UCT_MD_MEM_REG_FIELD_VALUE(params, flags, \
                                                   FIELD_FLAGS, 0)
#else
#  define UCT_SYNCMEM_MEM_REG_ARGS   unsigned reg_flags
#  define UCT_SYNCMEM_MEM_REG_FLAGS  reg_flags
#endif

#if UCT_SYNCMEM_UCX_SINCE(1, 16)
#  define UCT_SYNCMEM_MKEY_PACK_REGION_ARGS  void *address, size_t length,
/* the whole handle, as uct_md_mkey_pack() asks it */
#  define uct_syncmem_mkey_pack_v2(_md, _memh, _params, _buffer) \
    uct_md_mkey_pack_v2(_md, _memh, NULL, SIZE_MAX, _params, _buffer)
#else
#  define UCT_SYNCMEM_MKEY_PACK_REGION_ARGS
#  define uct_syncmem_mkey_pack_v2 uct_md_mkey_pack_v2
#endif

/* Revocable keys: 1.15 splits invalidation into RMA and AMO. UCP asks the
 * md's v2 flags for INVALIDATE_RMA (v1's INVALIDATE means both) and packs
 * with MKEY_PACK_FLAG_INVALIDATE_RMA; a key of ours packed with either
 * refuses both (syncmem_memh.c) */
#if UCT_SYNCMEM_UCX_SINCE(1, 15)
#  define UCT_SYNCMEM_MD_INVALIDATE \
    (UCT_MD_FLAG_INVALIDATE | UCT_MD_FLAG_INVALIDATE_RMA | \
     UCT_MD_FLAG_INVALIDATE_AMO)
#  define UCT_SYNCMEM_PACK_INVALIDATE \
    (UCT_MD_MKEY_PACK_FLAG_INVALIDATE_RMA | \
     UCT_MD_MKEY_PACK_FLAG_INVALIDATE_AMO)
#else
#  define UCT_SYNCMEM_MD_INVALIDATE   UCT_MD_FLAG_INVALIDATE
#  define UCT_SYNCMEM_PACK_INVALIDATE UCT_MD_MKEY_PACK_FLAG_INVALIDATE
#endif

#if UCT_SYNCMEM_UCX_SINCE(1, 19)
#  define UCT_SYNCMEM_RKEY_UNPACK_PARAMS_ARG \
    const uct_rkey_unpack_params_t *params,
#else
#  define UCT_SYNCMEM_RKEY_UNPACK_PARAMS_ARG
#endif

/* Operations we do not offer, named in the md ops table of each release
 * (1.14 and 1.15 have both: uct_md_is_sockaddr_accessible() calls the op) */
#if UCT_SYNCMEM_UCX_SINCE(1, 14)
#  define UCT_SYNCMEM_MD_OPS_ATTACH_FIELDS \
    .mem_attach = (uct_md_mem_attach_func_t) \
            ucs_empty_function_return_unsupported,
#else
#  define UCT_SYNCMEM_MD_OPS_ATTACH_FIELDS
#endif
#if !UCT_SYNCMEM_UCX_SINCE(1, 16)
#  define UCT_SYNCMEM_MD_OPS_SOCKADDR_FIELDS \
    .is_sockaddr_accessible = (uct_md_is_sockaddr_accessible_func_t) \
            ucs_empty_function_return_zero,
#else
#  define UCT_SYNCMEM_MD_OPS_SOCKADDR_FIELDS
#endif
#define UCT_SYNCMEM_MD_OPS_COMPAT_FIELDS \
    UCT_SYNCMEM_MD_OPS_ATTACH_FIELDS \
    UCT_SYNCMEM_MD_OPS_SOCKADDR_FIELDS
#if UCT_SYNCMEM_UCX_SINCE(1, 21)
#  define UCT_SYNCMEM_MD_OPS_ELEM_FIELDS \
    .mem_elem_pack = (uct_md_mem_elem_pack_func_t) \
            ucs_empty_function_return_unsupported,
#else
#  define UCT_SYNCMEM_MD_OPS_ELEM_FIELDS
#endif

/* UCX 1.13: the component carries a per-MD VFS hook; we publish nothing. */
#define UCT_SYNCMEM_COMPONENT_COMPAT_FIELDS \
    .md_vfs_init = (uct_component_md_vfs_init_func_t)ucs_empty_function,


/* --- registration cache -------------------------------------------------- */

#if UCT_SYNCMEM_UCX_SINCE(1, 16)
typedef ucs_rcache_config_t uct_syncmem_rcache_config_t;
#  define UCT_SYNCMEM_RCACHE_CONFIG_TABLE ucs_config_rcache_table
#  define uct_syncmem_rcache_set_params   ucs_rcache_set_params
/* what a lookup costs, for UCP's choice between zcopy and bcopy */
#  define UCT_SYNCMEM_RCACHE_OVERHEAD(_config) \
    (((_config)->overhead == UCS_TIME_AUTO) ? 180e-9 : \
     ucs_time_to_sec((_config)->overhead))
#else
typedef uct_md_rcache_config_t uct_syncmem_rcache_config_t;
#  define UCT_SYNCMEM_RCACHE_CONFIG_TABLE uct_md_config_rcache_table
#  define uct_syncmem_rcache_set_params   uct_md_set_rcache_params
#  define UCT_SYNCMEM_RCACHE_OVERHEAD(_config) uct_md_rcache_overhead(_config)
#endif
#if UCT_SYNCMEM_UCX_SINCE(1, 17)
/* the region alignment went from the cache to each lookup (pages: our
 * own UCX_SYNCMEM_REG_ALIGN widens registrations, see syncmem_rcache.c) */
#  define UCT_SYNCMEM_RCACHE_SET_ALIGN(_params, _config, _max)
#  define UCT_SYNCMEM_RCACHE_GET_ALIGN(_align)  (_align),
#else
#  define UCT_SYNCMEM_RCACHE_SET_ALIGN(_params, _config, _max) \
    (_params)->alignment     = (_config)->alignment; \
    (_params)->max_alignment = (_max);
#  define UCT_SYNCMEM_RCACHE_GET_ALIGN(_align)
#endif

#if UCT_SYNCMEM_UCX_SINCE(1, 18)
#  define UCT_SYNCMEM_RCACHE_OPS_COMPAT_FIELDS \
    .merge = (void (*)(void*, ucs_rcache_t*, void*, ucs_rcache_region_t*)) \
            ucs_empty_function,
#else
#  define UCT_SYNCMEM_RCACHE_OPS_COMPAT_FIELDS
#endif


/* --- memory pools ---------------------------------------------------------- */

#if UCT_SYNCMEM_UCX_SINCE(1, 14)
#  define UCT_SYNCMEM_IFACE_MPOOL_CONFIG \
    { .max_bufs = -1, .bufs_grow = 0, .max_chunk_size = 128 * UCS_MBYTE, \
      .grow_factor = 1.0 }
#else
#  define UCT_SYNCMEM_IFACE_MPOOL_CONFIG { .max_bufs = -1, .bufs_grow = 0 }
#endif

/* A pool of plain structs, elems_per_chunk at a time, unbounded */
static inline ucs_status_t
uct_syncmem_mpool_init(ucs_mpool_t *mp, size_t elem_size, size_t alignment,
                       unsigned elems_per_chunk, ucs_mpool_ops_t *ops,
                       const char *name)
{
#if UCT_SYNCMEM_UCX_SINCE(1, 14)
    ucs_mpool_params_t params;

    ucs_mpool_params_reset(&params);
    params.elem_size       = elem_size;
    params.alignment       = alignment;
    params.elems_per_chunk = elems_per_chunk;
    params.ops             = ops;
    params.name            = name;
    return ucs_mpool_init(&params, mp);
#else
    return ucs_mpool_init(mp, 0, elem_size, 0, alignment, elems_per_chunk,
                          UINT_MAX, ops, name);
#endif
}


/* UCP (1.18+) takes an iface without this flag for shared memory: a peer
 * on another node would never get a lane */
#if UCT_SYNCMEM_UCX_SINCE(1, 18)
#  define UCT_SYNCMEM_IFACE_FLAG_INTER_NODE UCT_IFACE_FLAG_INTER_NODE
#else
#  define UCT_SYNCMEM_IFACE_FLAG_INTER_NODE 0
#endif


/* --- configuration ------------------------------------------------------- */

/* Parse UCX_<prefix>* into opts (1.15 takes the table's registry entry) */
static inline ucs_status_t
uct_syncmem_config_fill(void *opts, ucs_config_global_list_entry_t *entry)
{
#if UCT_SYNCMEM_UCX_SINCE(1, 15)
    return ucs_config_parser_fill_opts(opts, entry, "UCX_", 0);
#else
    return ucs_config_parser_fill_opts(opts, entry->table, "UCX_",
                                       entry->prefix, 0);
#endif
}


/* --- interface ----------------------------------------------------------- */

/*
 * Internal ops: up to 1.14 every transport shared UCT's base table; since
 * 1.15 each has its own, and UCP asks it whether a peer is reachable (and
 * why not) and whether an endpoint is connected to an address. Our table is
 * in syncmem_iface.c; these are the fields each release adds to it.
 */
#if UCT_SYNCMEM_UCX_SINCE(1, 15)
#  define UCT_SYNCMEM_HAVE_INTERNAL_OPS 1
#  define UCT_SYNCMEM_INTERNAL_OPS_REACHABLE_FIELDS \
    .ep_connect_to_ep_v2   = (uct_ep_connect_to_ep_v2_func_t) \
            ucs_empty_function_return_unsupported, \
    .iface_is_reachable_v2 = uct_syncmem_iface_is_reachable_v2,
#else
#  define UCT_SYNCMEM_HAVE_INTERNAL_OPS 0
#endif
#if UCT_SYNCMEM_UCX_SINCE(1, 16)
#  define UCT_SYNCMEM_INTERNAL_OPS_CONNECTED_FIELDS \
    .ep_is_connected = uct_syncmem_ep_is_connected,
#else
#  define UCT_SYNCMEM_INTERNAL_OPS_CONNECTED_FIELDS
#endif
#if UCT_SYNCMEM_UCX_SINCE(1, 22) || (UCT_API == UCT_VERSION(1, 20))
#  define UCT_SYNCMEM_INTERNAL_OPS_QUERY_FIELDS \
    .iface_query_v2 = uct_iface_base_query_v2,
#else
#  define UCT_SYNCMEM_INTERNAL_OPS_QUERY_FIELDS
#endif
#if UCT_API == UCT_VERSION(1, 20)
#  define UCT_SYNCMEM_INTERNAL_OPS_ELEM_FIELDS \
    .iface_mem_element_pack = (uct_iface_mem_element_pack_func_t) \
            ucs_empty_function_return_unsupported,
#else
#  define UCT_SYNCMEM_INTERNAL_OPS_ELEM_FIELDS
#endif
/* GPU-initiated operations: none (UCP uses them only when the iface's v2
 * query reports them, which uct_iface_base_query_v2 does not) */
#if UCT_SYNCMEM_UCX_SINCE(1, 20)
#  define UCT_SYNCMEM_INTERNAL_OPS_DEVICE_FIELDS \
    .ep_get_device_ep = (uct_ep_get_device_ep_func_t) \
            ucs_empty_function_return_unsupported,
#else
#  define UCT_SYNCMEM_INTERNAL_OPS_DEVICE_FIELDS
#endif
#if UCT_SYNCMEM_UCX_SINCE(1, 22)
#  define UCT_SYNCMEM_INTERNAL_OPS_SGL_FIELDS \
    .ep_put_sgl_zcopy = (uct_ep_put_sgl_zcopy_func_t) \
            ucs_empty_function_return_unsupported,
#else
#  define UCT_SYNCMEM_INTERNAL_OPS_SGL_FIELDS
#endif

#endif
