/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the memory domain: one per verbs device, owning its context
 * and protection domain; registrations (syncmem_mr.c), their cache
 * (syncmem_rcache.c), CUDA memory (syncmem_cuda.c) and the device's async
 * events (syncmem_port.c).
 */
#ifndef UCT_SYNCMEM_MD_H_
#define UCT_SYNCMEM_MD_H_

#include "syncmem.h"

typedef struct uct_syncmem_md_config {
    uct_md_config_t        super;
    int                    rcache_mode;  /* ucs_ternary_auto_value_t */
    uct_syncmem_rcache_config_t rcache;
    size_t                 reg_align;    /* UCS_MEMUNITS_AUTO: page size */
    unsigned               cuda_reg_cache; /* unused CUDA registrations kept */
    size_t                 cuda_reg_cache_size; /* ...and their bytes */
    int                    mw_mode;      /* ucs_ternary_auto_value_t */
} uct_syncmem_md_config_t;


/* What the registration cache did, since the MD was opened. */
typedef struct uct_syncmem_rcache_counters {
    uint64_t hits;          /* mem_reg served by a cached registration */
    uint64_t misses;        /* mem_reg that registered memory */
    uint64_t evictions;     /* unused registrations dropped by LRU limits */
    uint64_t invalidations; /* dropped because unmapped, or merged away */
} uct_syncmem_rcache_counters_t;


typedef struct uct_syncmem_cuda_cache uct_syncmem_cuda_cache_t;
typedef struct uct_syncmem_mw_domain uct_syncmem_mw_domain_t;

struct uct_syncmem_md {
    uct_md_t               super;
    struct ibv_context     *ctx;
    struct ibv_pd          *pd;
    struct ibv_device_attr dev_attr;
    char                   name[UCT_MD_NAME_MAX];  /* verbs device name */
    ucs_rcache_t           *rcache;   /* NULL: every mem_reg registers */
    ucs_linear_func_t      reg_cost;  /* what mem_reg costs, for UCP */
    uct_syncmem_cuda_cache_t *cuda;   /* NULL: no CUDA driver */
    uct_syncmem_mw_domain_t *mw;      /* NULL: no memory windows */
    int                    mr_access; /* added to every writable host MR */
    ucs_mpool_t            memh_mp;   /* syncmem_memh.c's handles */
    ucs_spinlock_t         memh_lock; /* ...taken by any thread */
    int                    dmabuf;    /* the device takes dma-buf MRs */
    int                    peermem;   /* a peer-memory module is loaded */
    size_t                 reg_align;
    size_t                 rcache_align; /* of every cached region */
    int                    closing;
    uct_syncmem_rcache_counters_t rcache_counters;
    ucs_list_link_t        ifaces;       /* uct_syncmem_iface_t, port events */
    ucs_spinlock_t         iface_lock;   /* ...taken by the async thread */
    int                    async_events; /* the async fd has a handler */
    ucs_sys_device_t       sys_dev;      /* the HCA's PCI function */
};


#define UCT_SYNCMEM_RKEY_MAGIC 0x5d

/* What a peer needs to access our memory: the verbs rkey. The magic byte
 * and CRC make a garbled or foreign key an error at unpack time. */
typedef struct UCS_S_PACKED uct_syncmem_packed_rkey {
    uint8_t  magic;
    uint32_t rkey;
    uint16_t crc;
} uct_syncmem_packed_rkey_t;


/* A registration, perhaps shared by several memory handles
 * (syncmem_memh.c). */
typedef struct uct_syncmem_mem {
    struct ibv_mr *mr;
    unsigned      flags;  /* UCT_SYNCMEM_MEM_FLAG_* */
} uct_syncmem_mem_t;

enum {
    UCT_SYNCMEM_MEM_FLAG_CACHED = UCS_BIT(0), /* in a uct_syncmem_rregion_t */
    UCT_SYNCMEM_MEM_FLAG_CUDA   = UCS_BIT(1)  /* in a
                                                 uct_syncmem_cuda_region_t */
};


/* syncmem_mr.c */
int uct_syncmem_mr_access(unsigned flags);
ucs_status_t uct_syncmem_mr_reg(uct_syncmem_md_t *md, void *address,
                                size_t length, int access,
                                ucs_log_level_t level, struct ibv_mr **mr_p);
ucs_status_t uct_syncmem_mr_reg_dmabuf(uct_syncmem_md_t *md, int fd,
                                       uint64_t offset, size_t length,
                                       uintptr_t iova, int access,
                                       ucs_log_level_t level,
                                       struct ibv_mr **mr_p);
void uct_syncmem_mr_dereg(struct ibv_mr *mr);

/* syncmem_memh.c: memory handles and remote keys (the md's ops) */
ucs_status_t uct_syncmem_memh_init(uct_syncmem_md_t *md);
void uct_syncmem_memh_cleanup(uct_syncmem_md_t *md);
/* Whether this UCX has CUDA support of its own (cuda_copy) */
int uct_syncmem_memh_ucx_has_cuda(void);
ucs_status_t uct_syncmem_memh_mem_reg(uct_md_h tl_md, void *address,
                                      size_t length, UCT_SYNCMEM_MEM_REG_ARGS,
                                      uct_mem_h *memh_p);
ucs_status_t uct_syncmem_memh_mem_dereg(uct_md_h tl_md,
                                        const uct_md_mem_dereg_params_t *params);
ucs_status_t uct_syncmem_memh_mkey_pack(uct_md_h tl_md, uct_mem_h tl_memh,
                                        UCT_SYNCMEM_MKEY_PACK_REGION_ARGS
                                        const uct_md_mkey_pack_params_t *params,
                                        void *rkey_buffer);
ucs_status_t uct_syncmem_memh_rkey_unpack(uct_component_t *component,
                                          const void *rkey_buffer,
                                          UCT_SYNCMEM_RKEY_UNPACK_PARAMS_ARG
                                          uct_rkey_t *rkey_p, void **handle_p);
/* Registers length bytes at offset of dma-buf fd, which the caller has
 * mapped at address (the address remote keys refer to). A syncmem
 * extension: UCX 1.13's UCT has no dma-buf in its API. */
ucs_status_t uct_syncmem_md_mem_reg_dmabuf(uct_md_h md, int fd,
                                           uint64_t offset, size_t length,
                                           void *address, unsigned flags,
                                           uct_mem_h *memh_p);
/* The lkey of a memory handle, for the data path. */
static UCS_F_ALWAYS_INLINE uint32_t uct_syncmem_memh_lkey(uct_mem_h memh)
{
    /* every handle starts with its MR (syncmem_memh.c) */
    return (*(struct ibv_mr**)memh)->lkey;
}

/* syncmem_cuda.c, syncmem_cuda_driver.c (the driver) */
/* What the driver says of an address in CUDA device memory. */
typedef struct uct_syncmem_cuda_info {
    uintptr_t base;      /* the mapped piece that holds it */
    size_t    size;
    int       ordinal;   /* its GPU */
    ucs_sys_device_t sys_dev;
} uct_syncmem_cuda_info_t;

ucs_status_t uct_syncmem_cuda_init(uct_syncmem_md_t *md, unsigned max_unused,
                                   size_t max_unused_bytes);
void uct_syncmem_cuda_cleanup(uct_syncmem_md_t *md);
/* The process has loaded the CUDA driver (only then can it hold CUDA
 * memory), and it works; loads ours on the first call that sees it. */
int uct_syncmem_cuda_in_use(void);
/* Whether address is CUDA device memory (not managed memory), or
 * reserved for it. */
int uct_syncmem_cuda_owns(const void *address);
int uct_syncmem_cuda_can_reg(const uct_syncmem_md_t *md);
/* The verbs access every CUDA registration of md gets. */
int uct_syncmem_cuda_access(const uct_syncmem_md_t *md);
/* UCS_ERR_NO_ELEM: not CUDA memory. Registers with every access. */
ucs_status_t uct_syncmem_cuda_reg(uct_syncmem_md_t *md, void *address,
                                  size_t length, ucs_log_level_t level,
                                  uct_syncmem_mem_t **memh_p);
void uct_syncmem_cuda_dereg(uct_syncmem_md_t *md, uct_syncmem_mem_t *memh);
/* memh's memory registered again: an MR of the caller's own */
ucs_status_t uct_syncmem_cuda_reg_again(uct_syncmem_md_t *md,
                                        const uct_syncmem_mem_t *memh,
                                        struct ibv_mr **mr_p);
/* UCS_ERR_NO_ELEM: not CUDA memory. */
ucs_status_t uct_syncmem_cuda_mem_info(const void *address,
                                       uct_syncmem_cuda_info_t *info);
ucs_status_t uct_syncmem_cuda_detect(uct_md_h md, const void *address,
                                     size_t length,
                                     ucs_memory_type_t *mem_type_p);

/* syncmem_rcache.c */
ucs_status_t uct_syncmem_rcache_init(uct_syncmem_md_t *md,
                                     const uct_syncmem_md_config_t *config);
void uct_syncmem_rcache_cleanup(uct_syncmem_md_t *md);
ucs_status_t uct_syncmem_rcache_reg(uct_syncmem_md_t *md, void *address,
                                    size_t length, int access,
                                    ucs_log_level_t level,
                                    uct_syncmem_mem_t **memh_p);
void uct_syncmem_rcache_dereg(uct_syncmem_md_t *md, uct_syncmem_mem_t *memh);

/* syncmem_port.c: the device's async events */
ucs_status_t uct_syncmem_port_events_init(uct_syncmem_md_t *md);
void uct_syncmem_port_events_cleanup(uct_syncmem_md_t *md);

#endif
