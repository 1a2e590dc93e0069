/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - memory windows: remote keys that can be revoked without
 * deregistering the memory under them.
 *
 * UCP asks for such a key (UCT_MD_MKEY_PACK_FLAG_INVALIDATE) for every
 * buffer of a rendezvous on an endpoint with peer error handling, and
 * revokes it (UCT_MD_MEM_DEREG_FLAG_INVALIDATE) when the transfer fails, so
 * that a peer still reading cannot read the buffer once the application
 * reuses it. A type-1 window over the cached registration gives the memh
 * a key of its own: binding and revoking it are two send-queue requests on
 * a self-connected RC QP of the md, where a registration would pin and map
 * the buffer again. The md shares the QP between all its ifaces and
 * threads, under a lock.
 */
#ifndef UCT_SYNCMEM_MW_H_
#define UCT_SYNCMEM_MW_H_

#include "syncmem.h"

typedef struct uct_syncmem_mw_domain uct_syncmem_mw_domain_t;

/* A window, bound to one memh while that memh holds it. */
typedef struct uct_syncmem_mw {
    struct ibv_mw   *ibmw;
    struct ibv_mr   *mr;    /* bound over; providers want it for a revoke */
    unsigned        binds;  /* its key byte moves on at each: it wraps at 256 */
    ucs_list_link_t list;   /* in the domain's unbound windows */
} uct_syncmem_mw_t;

/* NULL in *domain_p: the device has no type-1 windows (or mode is 'n');
 * the caller registers the range again instead. Fails only with mode 'y'. */
ucs_status_t uct_syncmem_mw_domain_create(uct_syncmem_md_t *md, int mode,
                                          uct_syncmem_mw_domain_t **domain_p);
void uct_syncmem_mw_domain_destroy(uct_syncmem_mw_domain_t *domain);

/* Binds a window over [address, address + length) of mr, which was
 * registered with IBV_ACCESS_MW_BIND; the peer's key is (*mw_p)->ibmw->rkey,
 * valid when this returns. access: the IBV_ACCESS_REMOTE_* to grant. */
ucs_status_t uct_syncmem_mw_bind(uct_syncmem_mw_domain_t *domain,
                                 struct ibv_mr *mr, void *address,
                                 size_t length, int access,
                                 uct_syncmem_mw_t **mw_p);

/* Revokes the window's key (the peer's next access through it is refused)
 * and takes the window back. Always before mr is deregistered. */
void uct_syncmem_mw_unbind(uct_syncmem_mw_domain_t *domain,
                           uct_syncmem_mw_t *mw);

#endif
