/*
 * syncmem - differences between UCX releases, in one place.
 *
 * The plugin is compiled against the internal headers of exactly the
 * installed UCX (see config/m4/syncmem.m4), so it only has to absorb API
 * differences between releases, never layout differences. Everything that
 * varies by release lives here, keyed on UCT_API from <uct/api/version.h>.
 *
 * Known work for UCX 1.18 (Debian 13), when it is added:
 *  - md query takes uct_md_attr_v2_t (UCT_SYNCMEM_MD_QUERY below);
 *  - uct_iface_internal_ops_t gains ep_connect_to_ep_v2,
 *    iface_is_reachable_v2 and ep_is_connected;
 *  - uct_component_t loses md_vfs_init (replaced by md_vfs_init in md ops).
 */
#ifndef UCT_SYNCMEM_COMPAT_H_
#define UCT_SYNCMEM_COMPAT_H_

#include <uct/api/uct.h>
#include <uct/api/version.h>

#if (UCT_API < UCT_VERSION(1, 13)) || (UCT_API >= UCT_VERSION(1, 14))
#  warning "syncmem supports UCX 1.13; add this release's differences to compat.h"
#endif

/* UCX 1.13: the component carries a per-MD VFS hook; we publish nothing. */
#define UCT_SYNCMEM_COMPONENT_COMPAT_FIELDS \
    .md_vfs_init = (uct_component_md_vfs_init_func_t)ucs_empty_function,

/* UCX 1.13: md query fills the v1 attribute struct. */
typedef uct_md_attr_t uct_syncmem_md_attr_t;

#endif
