/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - ports of a verbs device: naming, addressing, speed.
 *
 * A UCT device is one active port of a verbs device, named "<dev>:<port>"
 * as UCX's own verbs transports name them ("rxe0:1", "mlx5_0:1"), so that
 * UCX_NET_DEVICES selects syncmem and rc_verbs on the same ports alike.
 */
#include "syncmem_iface.h"
#include "syncmem_addr.h"

#include <ucs/sys/string.h>
#include <ucs/datastruct/string_buffer.h>
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#define UCT_SYNCMEM_PKEY_PARTITION  0x7fffu  /* the partition, without ... */
#define UCT_SYNCMEM_PKEY_FULL       0x8000u  /* ... the membership bit */
#define UCT_SYNCMEM_SL_MAX          15
#define UCT_SYNCMEM_TCLASS_MAX      255


ucs_status_t uct_syncmem_device_parse_name(const uct_syncmem_md_t *md,
                                           const char *dev_name,
                                           uint8_t *port_num_p)
{
    const char *sep = strrchr(dev_name, ':');
    size_t len      = (sep == NULL) ? 0 : (size_t)(sep - dev_name);
    char *end;
    unsigned long port;

    if ((sep == NULL) || (len != strlen(md->name)) ||
        strncmp(dev_name, md->name, len)) {
        ucs_error("syncmem: device '%s' does not belong to memory domain '%s'"
                  " (expected '%s:<port>')", dev_name, md->name, md->name);
        return UCS_ERR_NO_DEVICE;
    }

    port = strtoul(sep + 1, &end, 10);
    if ((*end != '\0') || (port == 0) ||
        (port > md->dev_attr.phys_port_cnt)) {
        ucs_error("syncmem: device '%s': no port '%s' on %s (it has %u)",
                  dev_name, sep + 1, md->name, md->dev_attr.phys_port_cnt);
        return UCS_ERR_NO_DEVICE;
    }

    *port_num_p = port;
    return UCS_OK;
}

/*
 * On RoCE, pick the GID that RoCE v2 with an IPv4-mapped address uses:
 * routable, and what every RoCE NIC and Soft-RoCE offer. Fall back to any
 * RoCE v2 GID, then to any non-zero one.
 */
static void uct_syncmem_gid_consider(const struct ibv_gid_entry *entry,
                                     int *best, int *best_score)
{
    int score = 1 + 2 * (entry->gid_type == IBV_GID_TYPE_ROCE_V2) +
                uct_syncmem_gid_is_ipv4((const union ibv_gid*)entry->gid.raw);

    if (score > *best_score) {
        *best       = entry->gid_index;
        *best_score = score;
    }
}

static ucs_status_t uct_syncmem_port_find_gid(uct_syncmem_md_t *md,
                                              uint8_t port_num, int tbl_len,
                                              uint8_t *index_p)
{
    size_t max     = (size_t)tbl_len * md->dev_attr.phys_port_cnt;
    int best       = -1, best_score = 0, i;
    struct ibv_gid_entry *table, entry;
    ssize_t count;

    /* The valid entries of every port in one call: one per index is a
     * system call each, 1024 of them on Soft-RoCE, mostly answering
     * ENODATA (10 ms of an iface's open on the emulated guest). */
    table = ucs_malloc(max * sizeof(*table), "syncmem gid table");
    count = (table == NULL) ? -1 :
            ibv_query_gid_table(md->ctx, table, max, 0);
    if (count >= 0) {
        for (i = 0; i < count; ++i) {
            if (table[i].port_num == port_num) {
                uct_syncmem_gid_consider(&table[i], &best, &best_score);
            }
        }
    } else {
        /* a kernel or provider without it */
        for (i = 0; i < tbl_len; ++i) {
            if (ibv_query_gid_ex(md->ctx, port_num, i, &entry, 0) == 0) {
                uct_syncmem_gid_consider(&entry, &best, &best_score);
            } /* else empty: ENODATA */
        }
    }
    ucs_free(table);

    if (best < 0) {
        ucs_error("syncmem: %s:%u has no GID; is its network interface up and"
                  " does it have an IP address?", md->name, port_num);
        return UCS_ERR_NO_DEVICE;
    }

    *index_p = best;
    return UCS_OK;
}

static enum ibv_mtu uct_syncmem_mtu_from_bytes(unsigned long bytes)
{
    enum ibv_mtu mtu = IBV_MTU_256;

    while ((mtu < IBV_MTU_4096) && ((256ul << mtu) <= bytes)) {
        ++mtu;
    }
    return mtu;
}

/*
 * The P_Key table index of partition want (UCS_HEXUNITS_AUTO: any), a
 * full-membership entry first, as UCX's own verbs transports choose: a
 * limited member cannot talk to another limited member. A partition that
 * is not in the table is an error listing the table, so that the user sees
 * what the subnet manager gave this port.
 */
static ucs_status_t uct_syncmem_port_find_pkey(uct_syncmem_md_t *md,
                                               uint8_t port_num, int tbl_len,
                                               size_t want,
                                               uct_syncmem_port_t *port)
{
    int found = -1, i;
    UCS_STRING_BUFFER_ONSTACK(table, 128);
    uint16_t pkey, found_pkey = 0;
    __be16 raw;

    if ((want != UCS_HEXUNITS_AUTO) && (want > UCT_SYNCMEM_PKEY_PARTITION)) {
        ucs_error("syncmem: UCX_SYNCMEM_PKEY=0x%zx is out of range: give the"
                  " partition, 0x0..0x7fff, without the membership bit"
                  " (0x8000)", want);
        return UCS_ERR_INVALID_PARAM;
    }

    for (i = 0; i < tbl_len; ++i) {
        if (ibv_query_pkey(md->ctx, port_num, i, &raw)) {
            continue;
        }
        pkey = ntohs(raw);
        if ((pkey & UCT_SYNCMEM_PKEY_PARTITION) == 0) {
            continue; /* 0: an empty entry */
        }
        ucs_string_buffer_appendf(&table, "%s[%d] 0x%04x",
                                  (ucs_string_buffer_length(&table) > 0) ?
                                  ", " : "", i, pkey);
        if ((want != UCS_HEXUNITS_AUTO) &&
            ((pkey & UCT_SYNCMEM_PKEY_PARTITION) != want)) {
            continue;
        }
        if ((found < 0) || (!(found_pkey & UCT_SYNCMEM_PKEY_FULL) &&
                            (pkey & UCT_SYNCMEM_PKEY_FULL))) {
            found      = i;
            found_pkey = pkey;
        }
    }

    if (found < 0) {
        if (want == UCS_HEXUNITS_AUTO) {
            ucs_error("syncmem: the P_Key table of %s:%u has no valid entry"
                      " (%s); is a subnet manager running?", md->name,
                      port_num, (ucs_string_buffer_length(&table) > 0) ?
                      ucs_string_buffer_cstr(&table) : "all empty");
        } else {
            ucs_error("syncmem: UCX_SYNCMEM_PKEY=0x%zx is not in the P_Key"
                      " table of %s:%u (%s); set it to one of these"
                      " partitions (the low 15 bits), or have the subnet"
                      " manager add it to this port", want, md->name,
                      port_num, (ucs_string_buffer_length(&table) > 0) ?
                      ucs_string_buffer_cstr(&table) : "all empty");
        }
        return UCS_ERR_NO_ELEM;
    }

    port->pkey_index = found;
    port->pkey       = found_pkey;
    return UCS_OK;
}

ucs_status_t uct_syncmem_port_open(uct_syncmem_md_t *md, uint8_t port_num,
                                   const uct_syncmem_iface_config_t *config,
                                   uct_syncmem_port_t *port)
{
    struct ibv_port_attr attr;
    ucs_status_t status;
    enum ibv_mtu cap;
    int ret;

    ret = ibv_query_port(md->ctx, port_num, &attr);
    if (ret) {
        ucs_error("syncmem: ibv_query_port(%s:%u) failed: %s", md->name,
                  port_num, strerror(ret));
        return UCS_ERR_IO_ERROR;
    }

    if (attr.state != IBV_PORT_ACTIVE) {
        ucs_error("syncmem: %s:%u is %s, not active; check the link (ibv_devinfo)",
                  md->name, port_num, ibv_port_state_str(attr.state));
        return UCS_ERR_NO_DEVICE;
    }

    memset(port, 0, sizeof(*port));
    port->num          = port_num;
    port->link_layer   = attr.link_layer;
    port->lid          = attr.lid;
    port->active_speed = attr.active_speed;
    port->active_width = attr.active_width;
    port->mtu          = attr.active_mtu;

    if (config->mtu != UCS_ULUNITS_AUTO) {
        if ((config->mtu < 256) || (config->mtu > 4096) ||
            !ucs_is_pow2(config->mtu)) {
            ucs_error("syncmem: UCX_SYNCMEM_MTU=%lu is not one of 256, 512,"
                      " 1024, 2048, 4096", config->mtu);
            return UCS_ERR_INVALID_PARAM;
        }
        cap       = uct_syncmem_mtu_from_bytes(config->mtu);
        port->mtu = ucs_min(port->mtu, cap);
    }

    if (attr.link_layer == IBV_LINK_LAYER_ETHERNET) {
        if (config->gid_index == UCS_ULUNITS_AUTO) {
            status = uct_syncmem_port_find_gid(md, port_num, attr.gid_tbl_len,
                                               &port->gid_index);
            if (status != UCS_OK) {
                return status;
            }
        } else if (config->gid_index >= attr.gid_tbl_len) {
            ucs_error("syncmem: UCX_SYNCMEM_GID_INDEX=%lu is out of range for"
                      " %s:%u (table size %d)", config->gid_index, md->name,
                      port_num, attr.gid_tbl_len);
            return UCS_ERR_INVALID_PARAM;
        } else {
            port->gid_index = config->gid_index;
        }
    } else if (attr.lid == 0) {
        ucs_error("syncmem: %s:%u has no LID; is a subnet manager running?",
                  md->name, port_num);
        return UCS_ERR_NO_DEVICE;
    }

    ret = ibv_query_gid(md->ctx, port_num, port->gid_index, &port->gid);
    if (ret) {
        ucs_error("syncmem: ibv_query_gid(%s:%u, index %u) failed: %s",
                  md->name, port_num, port->gid_index, strerror(errno));
        return UCS_ERR_IO_ERROR;
    }

    status = uct_syncmem_port_find_pkey(md, port_num, attr.pkey_tbl_len,
                                        config->pkey, port);
    if (status != UCS_OK) {
        return status;
    }

    if ((config->sl > UCT_SYNCMEM_SL_MAX) ||
        (config->traffic_class > UCT_SYNCMEM_TCLASS_MAX)) {
        ucs_error("syncmem: UCX_SYNCMEM_SL=%lu or UCX_SYNCMEM_TRAFFIC_CLASS=%lu"
                  " is out of range (SL 0..%d, traffic class 0..%d, both"
                  " decimal)", config->sl, config->traffic_class,
                  UCT_SYNCMEM_SL_MAX, UCT_SYNCMEM_TCLASS_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    port->sl            = config->sl;
    port->traffic_class = config->traffic_class;

    ucs_debug("syncmem: %s:%u %s lid %u gid index %u mtu %u pkey[%u] 0x%04x"
              " sl %u traffic class %u", md->name, port_num,
              (attr.link_layer == IBV_LINK_LAYER_ETHERNET) ? "RoCE" : "IB",
              port->lid, port->gid_index, 128u << port->mtu, port->pkey_index,
              port->pkey, port->sl, port->traffic_class);
    return UCS_OK;
}

/* Data rate in bytes/second from the port's reported speed and width. */
double uct_syncmem_port_bandwidth(const uct_syncmem_port_t *port)
{
    double lane_gbps, encoding = 64.0 / 66.0;
    unsigned lanes;

    switch (port->active_speed) {
    case 1:   lane_gbps = 2.5;  encoding = 0.8; break; /* SDR */
    case 2:   lane_gbps = 5.0;  encoding = 0.8; break; /* DDR */
    case 4:   lane_gbps = 10.0; encoding = 0.8; break; /* QDR */
    case 8:   lane_gbps = 10.3125;  break;             /* FDR10 */
    case 16:  lane_gbps = 14.0625;  break;             /* FDR */
    case 32:  lane_gbps = 25.78125; break;             /* EDR */
    case 64:  lane_gbps = 53.125;   break;             /* HDR */
    case 128: lane_gbps = 106.25;   break;             /* NDR */
    default:  lane_gbps = 2.5;  encoding = 0.8; break;
    }

    switch (port->active_width) {
    case 2:  lanes = 4;  break;
    case 4:  lanes = 8;  break;
    case 8:  lanes = 12; break;
    case 16: lanes = 2;  break;
    default: lanes = 1;  break;
    }

    return lane_gbps * 1e9 / 8.0 * lanes * encoding;
}

ucs_status_t uct_syncmem_query_tl_devices(uct_md_h tl_md,
                                          uct_tl_device_resource_t **devices_p,
                                          unsigned *num_devices_p)
{
    uct_syncmem_md_t *md = ucs_derived_of(tl_md, uct_syncmem_md_t);
    uct_tl_device_resource_t *devices;
    struct ibv_port_attr attr;
    unsigned count = 0;
    uint8_t port;

    devices = ucs_calloc(md->dev_attr.phys_port_cnt, sizeof(*devices),
                         "syncmem_devices");
    if (devices == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    for (port = 1; port <= md->dev_attr.phys_port_cnt; ++port) {
        if (ibv_query_port(md->ctx, port, &attr) ||
            (attr.state != IBV_PORT_ACTIVE)) {
            ucs_debug("syncmem: %s:%u is not active, skipped", md->name, port);
            continue;
        }

        ucs_snprintf_zero(devices[count].name, sizeof(devices[count].name),
                          "%s:%u", md->name, port);
        devices[count].type       = UCT_DEVICE_TYPE_NET;
        devices[count].sys_device = md->sys_dev;
        ++count;
    }

    *devices_p     = devices;
    *num_devices_p = count;
    return UCS_OK;
}
