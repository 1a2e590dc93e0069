/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the handshake's test hooks (syncmem_hooks.h): what it holds,
 * and passive QPs that refuse writes. Not called by the module.
 */
#include "syncmem_cm.h"
#include "syncmem_qp.h"
#include "syncmem_hooks.h"

#include <ucs/async/async.h>


/* What the handshake holds: passive connections, or address handles; read
 * under the async lock */
static unsigned uct_syncmem_iface_cm_count(uct_iface_h tl_iface, int ahs)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_iface, uct_syncmem_iface_t);
    unsigned count;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    count = ahs ? kh_size(&iface->cm.ahs) :
                  ucs_list_length(&iface->cm.passive);
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return count;
}

unsigned uct_syncmem_iface_num_passive(uct_iface_h tl_iface)
{
    return uct_syncmem_iface_cm_count(tl_iface, 0);
}

unsigned uct_syncmem_iface_num_ahs(uct_iface_h tl_iface)
{
    return uct_syncmem_iface_cm_count(tl_iface, 1);
}

unsigned uct_syncmem_iface_refused(uct_iface_h tl_iface)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_iface, uct_syncmem_iface_t);

    return iface->cm.refused_total; /* one word, written by the async thread */
}

unsigned uct_syncmem_iface_busy_answers(uct_iface_h tl_iface)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_iface, uct_syncmem_iface_t);

    return iface->cm.busy_total; /* one word, written by the async thread */
}

ucs_status_t uct_syncmem_iface_inject_refusal(uct_iface_h tl_iface,
                                              int persist)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_iface, uct_syncmem_iface_t);
    ucs_status_t status        = UCS_ERR_NO_ELEM;
    uct_syncmem_cm_passive_t *p;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    iface->cm.refuse_writes = persist;
    ucs_list_for_each(p, &iface->cm.passive, list) {
        status = uct_syncmem_qp_refuse_writes(p->qp);
        if (status != UCS_OK) {
            break;
        }
    }
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return status;
}
