/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Receiving active messages (uct_syncmem_rx_handle, syncmem_am.c, and the
 * replay filter of syncmem_rx_dedup.c): any completion a peer's QP can cause,
 * with any immediate data (AM id, flags, request number) and any payload,
 * interleaved with reconnects that tell the receive path which QP replaced
 * which. Nothing may reach a handler with an id UCT has no slot for, a
 * length past the receive buffer, or a buffer from anywhere else; a
 * descriptor a handler keeps is released later, as UCP does.
 */
#include "fuzz_iface.h"

#include <arpa/inet.h>

#define FUZZ_SEG_SIZE  256
#define FUZZ_HEADROOM  16
#define FUZZ_KEPT      8

static uct_syncmem_iface_t *fuzz_iface;
static void *fuzz_kept[FUZZ_KEPT];
static unsigned fuzz_num_kept;
static uint8_t fuzz_keep_next;

static ucs_status_t fuzz_am_handler(void *arg, void *data, size_t length,
                                    unsigned flags)
{
    uintptr_t id = (uintptr_t)arg;
    volatile uint8_t sum = 0;
    size_t i;

    FUZZ_CHECK(id < UCT_AM_ID_MAX);
    FUZZ_CHECK(length <= FUZZ_SEG_SIZE);
    FUZZ_CHECK(flags & UCT_CB_PARAM_FLAG_DESC);
    for (i = 0; i < length; ++i) {  /* every byte is ours to read */
        sum += ((uint8_t*)data)[i];
    }
    /* and the headroom before it is ours to write */
    memset(UCS_PTR_BYTE_OFFSET(data, -FUZZ_HEADROOM), 0xa5, FUZZ_HEADROOM);

    if (fuzz_keep_next && (fuzz_num_kept < FUZZ_KEPT)) {
        fuzz_kept[fuzz_num_kept++] = UCS_PTR_BYTE_OFFSET(data, -FUZZ_HEADROOM);
        return UCS_INPROGRESS;
    }
    return UCS_OK;
}

static void fuzz_init_rx(uct_syncmem_iface_t *iface)
{
    static ucs_mpool_ops_t ops = {
        .chunk_alloc   = ucs_mpool_chunk_malloc,
        .chunk_release = ucs_mpool_chunk_free,
        .obj_init      = NULL,
        .obj_cleanup   = NULL
    };
    uintptr_t id;

    iface->config.seg_size     = FUZZ_SEG_SIZE;
    iface->rx.headroom_offset  = sizeof(uct_syncmem_rx_desc_t) +
                                 sizeof(uct_recv_desc_t*);
    iface->rx.payload_offset   = iface->rx.headroom_offset + FUZZ_HEADROOM;
    iface->rx.release_desc.cb  = uct_syncmem_rx_release_desc;
    /* as uct_syncmem_rx_init has it: the payload aligned */
#if UCT_SYNCMEM_UCX_SINCE(1, 14)
    {
        ucs_mpool_params_t params;

        ucs_mpool_params_reset(&params);
        params.elem_size       = iface->rx.payload_offset + FUZZ_SEG_SIZE;
        params.align_offset    = iface->rx.payload_offset;
        params.alignment       = UCS_SYS_CACHE_LINE_SIZE;
        params.elems_per_chunk = 16;
        params.ops             = &ops;
        params.name            = "fuzz_rx";
        FUZZ_CHECK(ucs_mpool_init(&params, &iface->rx.mp) == UCS_OK);
    }
#else
    FUZZ_CHECK(ucs_mpool_init(&iface->rx.mp, 0, iface->rx.payload_offset +
                              FUZZ_SEG_SIZE, iface->rx.payload_offset,
                              UCS_SYS_CACHE_LINE_SIZE, 16, UINT_MAX, &ops,
                              "fuzz_rx") == UCS_OK);
#endif
    for (id = 0; id < UCT_AM_ID_MAX; ++id) {
        iface->super.am[id].cb    = fuzz_am_handler;
        iface->super.am[id].arg   = (void*)id;
        iface->super.am[id].flags = UCT_CB_FLAG_ASYNC;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    uct_syncmem_iface_t *iface;
    uct_syncmem_rx_desc_t *desc;
    struct ibv_wc wc;
    uint8_t what;
    unsigned steps, i;
    uint32_t qpn;

    if (fuzz_iface == NULL) {
        fuzz_iface = fuzz_iface_create();
        fuzz_init_rx(fuzz_iface);
    }
    iface = fuzz_iface;

    for (steps = 0; (in.left > 0) && (steps < 64); ++steps) {
        what = fuzz_u8(&in);
        qpn  = 0x40 + (what >> 4);  /* a few QPs, so that numbers meet */
        switch (what & 3) {
        case 0:
        case 1: /* a receive completion */
            desc = ucs_mpool_get_inline(&iface->rx.mp);
            FUZZ_CHECK(desc != NULL);
            memset(&wc, 0, sizeof(wc));
            wc.wr_id    = (uintptr_t)desc;
            wc.status   = (what & 4) ? fuzz_u8(&in) % 22 : IBV_WC_SUCCESS;
            wc.opcode   = IBV_WC_RECV;
            wc.wc_flags = (what & 8) ? 0 : IBV_WC_WITH_IMM;
            wc.imm_data = htonl(fuzz_u32(&in));
            wc.qp_num   = qpn;
            /* the HCA never writes more than the buffer it was given */
            wc.byte_len = fuzz_u16(&in) % (FUZZ_SEG_SIZE + 1);
            fuzz_bytes(&in, UCS_PTR_BYTE_OFFSET(desc, iface->rx.payload_offset),
                       wc.byte_len);
            fuzz_keep_next = fuzz_u8(&in) & 1;
            uct_syncmem_rx_handle(iface, &wc);
            break;
        case 2: /* the async context: a QP replaced another, or is gone */
            uct_syncmem_rx_link_push(iface, (what & 4) ? qpn + 1 : 0, qpn);
            break;
        case 3: /* progress: take the links, release what the user kept */
            if (iface->rx.have_links) {
                uct_syncmem_rx_links_apply(iface);
            }
            for (i = 0; i < fuzz_num_kept; ++i) {
                uct_iface_release_desc(fuzz_kept[i]);
            }
            fuzz_num_kept = 0;
            break;
        }
    }

    for (i = 0; i < fuzz_num_kept; ++i) {
        uct_iface_release_desc(fuzz_kept[i]);
    }
    fuzz_num_kept = 0;
    if (iface->rx.have_links) {
        uct_syncmem_rx_links_apply(iface);
    }
    /* each input starts from nothing known */
    kh_clear(uct_syncmem_qp_sn, &iface->rx.last_sn);
    kh_clear(uct_syncmem_qp_link, &iface->rx.replaced);
    return 0;
}
