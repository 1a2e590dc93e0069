/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * regcost: what one memory registration costs on a syncmem memory domain,
 * with the registration cache off (every mem_reg registers: pinning and
 * the HCA's translation tables) and on (a hit: a page-table lookup).
 *
 *   syncmem-run regcost MD_NAME      (contrib/bench.sh runs it in the guest)
 *
 * Prints one line per buffer size: microseconds per mem_reg + mem_dereg,
 * cache off, and per hit, cache on; then, cache on, per hit with its key
 * packed (mkey_pack), packed for invalidation (what UCP does for each
 * rendezvous with peer error handling: a memory window bound and revoked),
 * and the same with an invalidating dereg. Buffers are touched first, so
 * page faults are not counted.
 */
#include <uct/api/uct.h>
#include <uct/api/v2/uct_v2.h>
#include "uct_syncmem/compat.h"  /* mkey_pack_v2 and its flags by release */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static uct_md_h open_md(uct_component_h component, const char *name,
                        const char *rcache)
{
    uct_md_config_t *config;
    uct_md_h md;

    if ((uct_md_config_read(component, NULL, NULL, &config) != UCS_OK) ||
        (uct_config_modify(config, "RCACHE", rcache) != UCS_OK) ||
        (uct_md_open(component, name, config, &md) != UCS_OK)) {
        fprintf(stderr, "regcost: cannot open syncmem md %s\n", name);
        exit(1);
    }
    uct_config_release(config);
    return md;
}

enum {
    NO_PACK = -1   /* reg_time's pack: mem_reg + mem_dereg only */
};

static void invalidated(uct_completion_t *comp)
{
}

/* Seconds per mem_reg (+ mkey_pack with pack flags, unless NO_PACK) +
 * mem_dereg (with dereg flags) of buf, over iters rounds. */
static double reg_time(uct_md_h md, void *buf, size_t size, unsigned iters,
                       int pack, unsigned dereg)
{
    uct_md_mkey_pack_params_t pack_params = {
        .field_mask = UCT_MD_MKEY_PACK_FIELD_FLAGS,
        .flags      = (pack == NO_PACK) ? 0 : pack
    };
    uct_completion_t comp = { .func = invalidated };
    uct_md_mem_dereg_params_t dereg_params = {
        .field_mask = UCT_MD_MEM_DEREG_FIELD_MEMH |
                      UCT_MD_MEM_DEREG_FIELD_FLAGS |
                      UCT_MD_MEM_DEREG_FIELD_COMPLETION,
        .flags      = dereg,
        .comp       = &comp
    };
    struct timespec start, end;
    char rkey[256];
    uct_mem_h memh;
    unsigned i;

    clock_gettime(CLOCK_MONOTONIC, &start);
    for (i = 0; i < iters; ++i) {
        comp.count        = 1;
        dereg_params.memh = NULL;
        if ((uct_md_mem_reg(md, buf, size, UCT_MD_MEM_ACCESS_ALL, &memh) !=
             UCS_OK) ||
            ((pack != NO_PACK) &&
             (uct_syncmem_mkey_pack_v2(md, memh, &pack_params, rkey) !=
              UCS_OK)) ||
            ((dereg_params.memh = memh),
             (uct_md_mem_dereg_v2(md, &dereg_params) != UCS_OK)) ||
            ((dereg & UCT_MD_MEM_DEREG_FLAG_INVALIDATE) &&
             (comp.count != 0))) {
            fprintf(stderr, "regcost: registration of %zu bytes (pack 0x%x,"
                    " dereg 0x%x) failed\n", size, pack, dereg);
            exit(1);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    return ((end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) * 1e-9) /
           iters;
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = { 4096, 65536, 1 << 20, 16 << 20,
                                    256 << 20 };
    uct_component_h *components, syncmem = NULL;
    uct_component_attr_t attr = { .field_mask = UCT_COMPONENT_ATTR_FIELD_NAME };
    uct_md_h md_off, md_on;
    unsigned i, count, iters;
    void *buf;

    if (argc != 2) {
        fprintf(stderr, "usage: regcost MD_NAME (e.g. rxe0)\n");
        return 2;
    }
    if (uct_query_components(&components, &count) != UCS_OK) {
        return 1;
    }
    for (i = 0; i < count; ++i) {
        if ((uct_component_query(components[i], &attr) == UCS_OK) &&
            !strcmp(attr.name, "syncmem")) {
            syncmem = components[i];
        }
    }
    if (syncmem == NULL) {
        fprintf(stderr, "regcost: no syncmem component (run it through"
                " syncmem-run)\n");
        return 1;
    }

    md_off = open_md(syncmem, argv[1], "n");
    md_on  = open_md(syncmem, argv[1], "y");
    printf("%10s %14s %12s %12s %12s %14s\n", "bytes", "register_us",
           "cache_hit_us", "hit_pack_us", "hit_inv_us", "inv_dereg_us");
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        buf = mmap(NULL, sizes[i], PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (buf == MAP_FAILED) {
            perror("regcost: mmap");
            return 1;
        }
        memset(buf, 1, sizes[i]);
        iters = (sizes[i] >= (16 << 20)) ? 3 : 50;
        printf("%10zu %14.1f %12.2f %12.2f %12.2f %14.2f\n", sizes[i],
               reg_time(md_off, buf, sizes[i], iters, NO_PACK, 0) * 1e6,
               reg_time(md_on, buf, sizes[i], 1000, NO_PACK, 0) * 1e6,
               reg_time(md_on, buf, sizes[i], 1000, 0, 0) * 1e6,
               reg_time(md_on, buf, sizes[i], 1000,
                        UCT_SYNCMEM_PACK_INVALIDATE, 0) * 1e6,
               reg_time(md_on, buf, sizes[i], 1000,
                        UCT_SYNCMEM_PACK_INVALIDATE,
                        UCT_MD_MEM_DEREG_FLAG_INVALIDATE) * 1e6);
        munmap(buf, sizes[i]);
    }

    uct_md_close(md_on);
    uct_md_close(md_off);
    uct_release_component_list(components);
    return 0;
}
