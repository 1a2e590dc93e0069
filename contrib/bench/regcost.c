/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * regcost: what one memory registration costs on a syncmem memory domain,
 * with the registration cache off (every mem_reg registers: pinning and
 * the HCA's translation tables) and on (a hit: a page-table lookup).
 *
 *   syncmem-run regcost MD_NAME      (contrib/bench.sh runs it in the guest)
 *
 * Prints one line per buffer size: microseconds per mem_reg + mem_dereg,
 * cache off, and per hit, cache on. Buffers are touched first, so page
 * faults are not counted.
 */
#include <uct/api/uct.h>

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

/* Seconds per mem_reg + mem_dereg of buf, over iters rounds. */
static double reg_time(uct_md_h md, void *buf, size_t size, unsigned iters)
{
    struct timespec start, end;
    uct_mem_h memh;
    unsigned i;

    clock_gettime(CLOCK_MONOTONIC, &start);
    for (i = 0; i < iters; ++i) {
        if ((uct_md_mem_reg(md, buf, size, UCT_MD_MEM_ACCESS_ALL, &memh) !=
             UCS_OK) || (uct_md_mem_dereg(md, memh) != UCS_OK)) {
            fprintf(stderr, "regcost: registration of %zu bytes failed\n",
                    size);
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
    printf("%10s %14s %12s\n", "bytes", "register_us", "cache_hit_us");
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        buf = mmap(NULL, sizes[i], PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (buf == MAP_FAILED) {
            perror("regcost: mmap");
            return 1;
        }
        memset(buf, 1, sizes[i]);
        iters = (sizes[i] >= (16 << 20)) ? 3 : 50;
        printf("%10zu %14.1f %12.2f\n", sizes[i],
               reg_time(md_off, buf, sizes[i], iters) * 1e6,
               reg_time(md_on, buf, sizes[i], 1000) * 1e6);
        munmap(buf, sizes[i]);
    }

    uct_md_close(md_on);
    uct_md_close(md_off);
    uct_release_component_list(components);
    return 0;
}
