/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cm_flood: another process on the fabric that floods an iface's
 * handshake QP (test/guest/test_flood.cc starts it).
 *
 *   cm_flood DEVICE DEV_ADDR_HEX IFACE_ADDR_HEX COUNT
 *
 * Sends COUNT UD messages from a QP of its own to the iface at those
 * addresses, in turn: garbage of any length, messages for another iface,
 * messages with a damaged device address, and well-formed connection
 * requests (right iface id, a valid address of this port) for connections
 * whose RC QP does not exist. Plain verbs, no UCX: a stranger needs none.
 */
#include <uct_syncmem/syncmem_ep.h>
#include <uct_syncmem/syncmem_cm.h>

#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLOOD_DEPTH 64
#define FLOOD_QKEY  0x53594e43u /* the handshake's, as any sniffer sees */

static int unhex(const char *hex, void *buf, size_t len)
{
    size_t i;

    if (strlen(hex) != 2 * len) {
        return -1;
    }
    for (i = 0; i < len; ++i) {
        if (sscanf(hex + 2 * i, "%2hhx", (uint8_t*)buf + i) != 1) {
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct ibv_qp_init_attr init = {};
    struct ibv_qp_attr attr      = {};
    struct ibv_ah_attr ah_attr   = {};
    uct_syncmem_iface_addr_t iface_addr;
    uct_syncmem_dev_addr_t dev_addr;
    struct ibv_device **devs;
    struct ibv_context *ctx = NULL;
    uct_syncmem_port_t me, peer;
    struct ibv_port_attr pattr;
    unsigned long count, i, posted = 0, done = 0;
    uct_syncmem_cm_msg_t msg;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_ah *ah;
    struct ibv_mr *mr;
    union ibv_gid gid;
    struct ibv_wc wc[16];
    uint8_t *bufs;
    int n, idx = -1;

    if ((argc != 5) || unhex(argv[2], &dev_addr, sizeof(dev_addr)) ||
        unhex(argv[3], &iface_addr, sizeof(iface_addr)) ||
        (uct_syncmem_dev_addr_unpack(&dev_addr, &peer) != UCS_OK)) {
        fprintf(stderr, "usage: cm_flood DEVICE DEV_ADDR_HEX IFACE_ADDR_HEX"
                " COUNT\n");
        return 2;
    }
    count = strtoul(argv[4], NULL, 0);

    devs = ibv_get_device_list(NULL);
    for (i = 0; (devs != NULL) && (devs[i] != NULL); ++i) {
        if (!strcmp(ibv_get_device_name(devs[i]), argv[1])) {
            ctx = ibv_open_device(devs[i]);
        }
    }
    if (devs != NULL) {
        ibv_free_device_list(devs); /* an open context outlives the list */
    }
    if ((ctx == NULL) || ibv_query_port(ctx, 1, &pattr)) {
        fprintf(stderr, "cm_flood: cannot open %s port 1\n", argv[1]);
        return 1;
    }
    /* the GID of ours of the target's kind (same subnet, same IP version) */
    for (n = 0; n < pattr.gid_tbl_len; ++n) {
        if (!ibv_query_gid(ctx, 1, n, &gid) &&
            (uct_syncmem_gid_is_ipv4(&gid) ==
             uct_syncmem_gid_is_ipv4(&peer.gid)) &&
            (gid.global.interface_id != 0)) {
            idx = n;
            if (!memcmp(&gid, &peer.gid, sizeof(gid))) {
                break;
            }
        }
    }
    if (idx < 0) {
        fprintf(stderr, "cm_flood: no GID like the target's\n");
        return 1;
    }
    ibv_query_gid(ctx, 1, idx, &gid);

    pd   = ibv_alloc_pd(ctx);
    cq   = ibv_create_cq(ctx, FLOOD_DEPTH, NULL, NULL, 0);
    bufs = calloc(FLOOD_DEPTH, UCT_SYNCMEM_CM_SLOT);
    mr   = ibv_reg_mr(pd, bufs, FLOOD_DEPTH * UCT_SYNCMEM_CM_SLOT, 0);
    init.qp_type          = IBV_QPT_UD;
    init.send_cq          = cq;
    init.recv_cq          = cq;
    init.cap.max_send_wr  = FLOOD_DEPTH;
    init.cap.max_recv_wr  = 1;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    qp = (pd && cq && mr) ? ibv_create_qp(pd, &init) : NULL;
    if (qp == NULL) {
        fprintf(stderr, "cm_flood: cannot create a UD QP\n");
        return 1;
    }
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = 1;
    attr.qkey     = FLOOD_QKEY;
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                      IBV_QP_PORT | IBV_QP_QKEY)) {
        return 1;
    }
    attr.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE)) {
        return 1;
    }
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn   = 0;
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN)) {
        return 1;
    }

    ah_attr.is_global      = 1;
    ah_attr.port_num       = 1;
    ah_attr.grh.dgid       = peer.gid;
    ah_attr.grh.sgid_index = idx;
    ah_attr.grh.hop_limit  = 64;
    ah = ibv_create_ah(pd, &ah_attr);
    if (ah == NULL) {
        fprintf(stderr, "cm_flood: cannot reach the target\n");
        return 1;
    }

    memset(&me, 0, sizeof(me));
    me.link_layer = pattr.link_layer;
    me.mtu        = pattr.active_mtu;
    me.lid        = pattr.lid;
    me.gid        = gid;
    srand(42);

    for (i = 0; i < count; ++i) {
        struct ibv_send_wr wr = {}, *bad;
        struct ibv_sge sge;
        uint8_t *buf = bufs + (i % FLOOD_DEPTH) * UCT_SYNCMEM_CM_SLOT;
        uint32_t len = sizeof(msg);
        unsigned k;

        memset(&msg, 0, sizeof(msg));
        msg.type         = UCT_SYNCMEM_CM_REQ;
        msg.src_cm_qpn   = qp->qp_num;
        msg.rc_qpn       = 0x800000 + (rand() & 0xffff); /* nobody's */
        msg.src_iface_id = ((uint64_t)rand() << 32) | rand();
        msg.dst_iface_id = iface_addr.id;
        msg.conn_id      = i;
        uct_syncmem_dev_addr_pack(&me, &msg.src_dev);
        memcpy(buf, &msg, sizeof(msg));
        switch (i % 4) {
        case 0: /* garbage */
            len = rand() % (UCT_SYNCMEM_CM_SLOT - UCT_SYNCMEM_CM_GRH_LEN);
            for (k = 0; k < len; ++k) {
                buf[k] = rand();
            }
            break;
        case 1: /* for another iface */
            ((uct_syncmem_cm_msg_t*)buf)->dst_iface_id ^= 1;
            break;
        case 2: /* a damaged address */
            buf[sizeof(msg) - 3] ^= 0x40;
            break;
        case 3: /* a well-formed request */
            break;
        }

        while (posted - done >= FLOOD_DEPTH) {
            n = ibv_poll_cq(cq, 16, wc);
            done += (n > 0) ? n : 0;
        }
        sge.addr             = (uintptr_t)buf;
        sge.length           = len;
        sge.lkey             = mr->lkey;
        wr.sg_list           = &sge;
        wr.num_sge           = 1;
        wr.opcode            = IBV_WR_SEND;
        wr.send_flags        = IBV_SEND_SIGNALED;
        wr.wr.ud.ah          = ah;
        wr.wr.ud.remote_qpn  = iface_addr.cm_qpn;
        wr.wr.ud.remote_qkey = FLOOD_QKEY;
        if (ibv_post_send(qp, &wr, &bad)) {
            fprintf(stderr, "cm_flood: ibv_post_send failed\n");
            return 1;
        }
        ++posted;
    }
    while (done < posted) {
        n = ibv_poll_cq(cq, 16, wc);
        done += (n > 0) ? n : 0;
    }
    printf("cm_flood: sent %lu messages from QP 0x%x\n", posted, qp->qp_num);

    /* released, so that a leak check of this program (check-asan) sees
     * only real leaks */
    ibv_destroy_ah(ah);
    ibv_destroy_qp(qp);
    ibv_dereg_mr(mr);
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    free(bufs);
    return 0;
}
