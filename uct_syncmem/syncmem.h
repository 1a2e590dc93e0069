/*
 * syncmem - UCT transport over ibverbs: shared definitions.
 *
 * Objects: one component ("syncmem"), one memory domain per verbs device
 * (named after it, e.g. "rxe0"), one transport ("syncmem") with one UCT
 * device per active port (e.g. "rxe0:1").
 */
#ifndef UCT_SYNCMEM_H_
#define UCT_SYNCMEM_H_

#include "compat.h"

#include <uct/base/uct_md.h>
#include <uct/base/uct_iface.h>
#include <ucs/sys/string.h>
#include <infiniband/verbs.h>

#define UCT_SYNCMEM_NAME         "syncmem"
#define UCT_SYNCMEM_CONFIG_PREFIX "SYNCMEM_"


/* What a peer needs to know about one of our ports; see syncmem_addr.c. */
typedef struct uct_syncmem_port {
    uint8_t       num;         /* port number, 1-based */
    uint8_t       link_layer;  /* IBV_LINK_LAYER_INFINIBAND or _ETHERNET */
    uint8_t       gid_index;   /* local GID table index used for traffic */
    uint8_t       mtu;         /* enum ibv_mtu: active MTU, capped by config */
    uint16_t      lid;         /* InfiniBand only */
    uint8_t       active_speed;
    uint8_t       active_width;
    union ibv_gid gid;
} uct_syncmem_port_t;


typedef struct uct_syncmem_md_config {
    uct_md_config_t super;
} uct_syncmem_md_config_t;


typedef struct uct_syncmem_md {
    uct_md_t               super;
    struct ibv_context     *ctx;
    struct ibv_pd          *pd;
    struct ibv_device_attr dev_attr;
    char                   name[UCT_MD_NAME_MAX];  /* verbs device name */
} uct_syncmem_md_t;


typedef struct uct_syncmem_iface_config {
    uct_iface_config_t super;
    unsigned long      gid_index;  /* UCS_ULUNITS_AUTO: pick RoCE v2 IPv4 */
    unsigned long      mtu;        /* UCS_ULUNITS_AUTO: the port's active MTU */
} uct_syncmem_iface_config_t;


typedef struct uct_syncmem_iface {
    uct_base_iface_t   super;
    uct_syncmem_port_t port;
    uint64_t           id;        /* tells our own iface address from others */
} uct_syncmem_iface_t;


extern uct_component_t uct_syncmem_component;
extern ucs_config_field_t uct_syncmem_iface_config_table[];

/* syncmem_device.c */
ucs_status_t uct_syncmem_device_parse_name(const uct_syncmem_md_t *md,
                                           const char *dev_name,
                                           uint8_t *port_num_p);
ucs_status_t uct_syncmem_port_open(uct_syncmem_md_t *md, uint8_t port_num,
                                   const uct_syncmem_iface_config_t *config,
                                   uct_syncmem_port_t *port);
double uct_syncmem_port_bandwidth(const uct_syncmem_port_t *port);
ucs_status_t uct_syncmem_query_tl_devices(uct_md_h md,
                                          uct_tl_device_resource_t **devices_p,
                                          unsigned *num_devices_p);

#endif
