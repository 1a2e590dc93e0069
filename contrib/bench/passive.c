/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * passive: the passive-target atomics bench (contrib/bench.sh, section
 * 'passive'). The target process computes and enters UCX only between
 * slices of compute; the origin meanwhile issues 64-bit atomics on the
 * target's memory, one at a time, and times each:
 *
 *   passive target DIR
 *   passive origin DIR [PHASE_MS]
 *   passive gups DIR [PHASE_MS]      (an origin of the random-update bench)
 *
 * The question is what the origin's latency becomes when the target's CPU
 * is busy. A transport that does the atomics on the device answers without
 * the target's CPU; when UCP emulates them with active messages (the
 * transports lack some of the 64-bit set, e.g. rc_verbs has no swap), each
 * waits for the target's next ucp_worker_progress, at the end of its slice.
 * ucx_perftest cannot show this: it progresses both sides all the time.
 *
 * DIR is a directory both see (/dev/shm): the target publishes its worker
 * address, packed rkey and remote address in DIR/addr, and the two agree on
 * phases through DIR/ctl, a small shared mapping (out of band, so that the
 * target's compute loop touches no UCX state).
 *
 * The origin runs, for slices of 0 (the target progresses all the time,
 * as under ucx_perftest), 1 and 10 ms, a baseline phase (the target's
 * slices with no traffic) and then one phase per operation (fetch-add,
 * compare-swap, swap), each PHASE_MS long (default 600) counted in slices.
 * A slice is a fixed amount of work, calibrated at start to take that
 * long on the idle target, followed by ucp_worker_progress until it finds
 * nothing. Per phase it prints one line:
 *
 *   phase op=fadd slice_ms=1 ops=N median_us=.. p99_us=.. slowdown=.. compute=..
 *
 * slowdown: the target's wall time for its slices (compute and progress)
 * with the origin's traffic over that without (the baseline); compute: the
 * same for the compute part alone (time the kernel took from it). Each
 * fetched value is checked against a local mirror of the target word (one
 * origin); exit status 1 if one was wrong, 2 on an error.
 *
 * 'passive gups' is the random-update bench (contrib/bench/gups.h) against
 * the same target: ucp_atomic_op_nbx XOR to random words of a table behind
 * the target word, GUPS_WINDOW in flight (then ucp_ep_flush_nbx, or a wait
 * for the fetches), for PHASE_MS while the target waits in
 * ucp_worker_progress (idle) and while it computes in GUPS_BUSY_US slices
 * (busy; its slowdown against a baseline phase without traffic); the table
 * read back at the end must match the origin's mirror.
 */
#include <ucp/api/ucp.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "passive.h"
#include "gups.h"

/* The target's memory: the word of the passive bench, then gups's table */
#define TABLE_OFFSET 4096
#define MEM_SIZE     (TABLE_OFFSET + GUPS_WORDS * sizeof(uint64_t))

enum { CMD_NONE, CMD_BASELINE, CMD_TRAFFIC, CMD_QUIT };

/* DIR/ctl. The origin writes cmd, slice_us, slices, then cmd_seq; the
 * target acknowledges with ack_seq when it starts and done_seq, after
 * writing its times, when it has finished. */
typedef struct {
    unsigned cmd_seq, cmd, slice_us, slices;
    unsigned ack_seq, done_seq, ready;
    double   wall_sec, compute_sec;
} passive_ctl_t;

static const char *dir;
static passive_ctl_t *ctl;
static ucp_context_h context;
static ucp_worker_h worker;

static void die(const char *what, ucs_status_t status)
{
    fprintf(stderr, "passive: %s: %s\n", what,
            (status == UCS_OK) ? strerror(errno) : ucs_status_string(status));
    exit(2);
}

static char *path(const char *name)
{
    static char buf[2][512];
    static int next;
    char *p = buf[next++ % 2];

    snprintf(p, sizeof(buf[0]), "%s/%s", dir, name);
    return p;
}

static unsigned load(const unsigned *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void store(unsigned *p, unsigned v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static void init_ucp(void)
{
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features   = UCP_FEATURE_RMA | UCP_FEATURE_AMO64
    };
    ucp_worker_params_t wparams = {
        .field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE
    };
    ucs_status_t status;

    status = ucp_init(&params, NULL, &context);
    if (status != UCS_OK) {
        die("ucp_init", status);
    }
    status = ucp_worker_create(context, &wparams, &worker);
    if (status != UCS_OK) {
        die("ucp_worker_create", status);
    }
}

/* --- target ------------------------------------------------------------- */

/* Work that the compiler cannot drop or shorten: a dependent chain. */
static void progress_all(void)
{
    while (ucp_worker_progress(worker) != 0) {
    }
}

/* (at 0 ms the target waits in the library, as under ucx_perftest) */
static void run_slices(unsigned slice_us, unsigned slices, double per_us)
{
    double t[2];

    target_slices(slice_us, slices, per_us, progress_all, t);
    ctl->wall_sec    = t[0];
    ctl->compute_sec = t[1];
}

static int target(void)
{
    ucp_mem_map_params_t mparams;
    ucp_address_t *addr;
    size_t addr_len, rkey_len;
    ucp_mem_h memh;
    void *rkey, *mem;
    uint32_t lens[2];
    unsigned seen = 0, seq, i;
    double per_us;
    FILE *f;
    ucs_status_t status;

    if (posix_memalign(&mem, 4096, MEM_SIZE) != 0) {
        die("posix_memalign", UCS_OK);
    }
    memset(mem, 0, TABLE_OFFSET);
    for (i = 0; i < GUPS_WORDS; ++i) {
        ((uint64_t*)((char*)mem + TABLE_OFFSET))[i] = gups_initial(i);
    }
    init_ucp();
    mparams.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                         UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mparams.address    = mem;
    mparams.length     = MEM_SIZE;
    status = ucp_mem_map(context, &mparams, &memh);
    if (status != UCS_OK) {
        die("ucp_mem_map", status);
    }
    status = ucp_rkey_pack(context, memh, &rkey, &rkey_len);
    if (status != UCS_OK) {
        die("ucp_rkey_pack", status);
    }
    status = ucp_worker_get_address(worker, &addr, &addr_len);
    if (status != UCS_OK) {
        die("ucp_worker_get_address", status);
    }

    /* calibrated before the origin exists: nothing else runs yet */
    per_us = calibrate();

    lens[0] = addr_len;
    lens[1] = rkey_len;
    f       = fopen(path("addr.tmp"), "w");
    if ((f == NULL) || (fwrite(lens, sizeof(lens), 1, f) != 1) ||
        (fwrite(addr, addr_len, 1, f) != 1) ||
        (fwrite(rkey, rkey_len, 1, f) != 1) ||
        (fwrite(&mem, sizeof(mem), 1, f) != 1) || (fclose(f) != 0) ||
        (rename(path("addr.tmp"), path("addr")) != 0)) {
        die(path("addr"), UCS_OK);
    }
    store(&ctl->ready, 1);

    /* Between phases the target progresses, so that the origin's wireup,
     * warm-up and close complete. */
    for (;;) {
        seq = load(&ctl->cmd_seq);
        if (seq == seen) {
            ucp_worker_progress(worker);
            continue;
        }
        seen = seq;
        if (ctl->cmd == CMD_QUIT) {
            break;
        }
        store(&ctl->ack_seq, seq);
        run_slices(ctl->slice_us, ctl->slices, per_us);
        store(&ctl->done_seq, seq);
    }

    ucp_worker_release_address(worker, addr);
    ucp_rkey_buffer_release(rkey);
    ucp_mem_unmap(context, memh);
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
    free(mem);
    return 0;
}

/* --- origin ------------------------------------------------------------- */

static ucp_ep_h ep;
static ucp_rkey_h rkey;
static uint64_t remote_addr;

static void connect_target(void)
{
    ucp_ep_params_t params;
    uint32_t lens[2];
    void *addr, *packed;
    FILE *f;
    ucs_status_t status;

    while (!load(&ctl->ready)) {
        usleep(10000);
    }
    f = fopen(path("addr"), "r");
    if ((f == NULL) || (fread(lens, sizeof(lens), 1, f) != 1) ||
        ((addr = malloc(lens[0])) == NULL) ||
        ((packed = malloc(lens[1])) == NULL) ||
        (fread(addr, lens[0], 1, f) != 1) ||
        (fread(packed, lens[1], 1, f) != 1) ||
        (fread(&remote_addr, sizeof(remote_addr), 1, f) != 1)) {
        die(path("addr"), UCS_OK);
    }
    fclose(f);

    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    params.address    = addr;
    status            = ucp_ep_create(worker, &params, &ep);
    if (status != UCS_OK) {
        die("ucp_ep_create", status);
    }
    status = ucp_ep_rkey_unpack(ep, packed, &rkey);
    if (status != UCS_OK) {
        die("ucp_ep_rkey_unpack", status);
    }
    free(addr);
    free(packed);
}

static ucs_status_t wait_req(void *req)
{
    ucs_status_t status;

    if (req == NULL) {
        return UCS_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        return UCS_PTR_STATUS(req);
    }
    do {
        ucp_worker_progress(worker);
        status = ucp_request_check_status(req);
    } while (status == UCS_INPROGRESS);
    ucp_request_free(req);
    return status;
}

/* One atomic on the target word, to completion; checks the fetched value
 * and advances the mirror (each op adds 1 in effect). */
static void one_op(int op)
{
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE |
                        UCP_OP_ATTR_FIELD_REPLY_BUFFER,
        .datatype     = ucp_dt_make_contig(sizeof(uint64_t))
    };
    static const ucp_atomic_op_t ucp_ops[] = {
        UCP_ATOMIC_OP_ADD, UCP_ATOMIC_OP_CSWAP, UCP_ATOMIC_OP_SWAP
    };
    uint64_t value, result;
    ucs_status_t status;

    /* cswap: buffer holds the compare value, the reply buffer the new one
     * going in (ucp.h's table of atomic operations) */
    value              = (op == OP_FADD) ? 1 : (op == OP_CSWAP) ? mirror : mirror + 1;
    result             = mirror + 1;
    param.reply_buffer = &result;
    status = wait_req(ucp_atomic_op_nbx(ep, ucp_ops[op], &value, 1,
                                        remote_addr, rkey, &param));
    if (status != UCS_OK) {
        die(op_names[op], status);
    }
    check_fetched("passive", op, result);
}

static unsigned command(unsigned cmd, unsigned slice_us, unsigned slices)
{
    unsigned seq = load(&ctl->cmd_seq) + 1;

    ctl->cmd      = cmd;
    ctl->slice_us = slice_us;
    ctl->slices   = slices;
    store(&ctl->cmd_seq, seq);
    return seq;
}

/* A phase of the target's slices, with op (or, for OP_NONE, no traffic at
 * all: the origin sleeps). Returns the target's wall time; *lat and *n_p
 * get the latencies in usec. */
static double phase(int op, unsigned slice_us, unsigned slices,
                    double *lat, unsigned *n_p, double *compute_p)
{
    unsigned seq, n = 0;
    double t;

    seq = command((op == OP_NONE) ? CMD_BASELINE : CMD_TRAFFIC, slice_us,
                  slices);
    while (load(&ctl->ack_seq) != seq) {
    }
    while (load(&ctl->done_seq) != seq) {
        if (op == OP_NONE) {
            usleep(1000);
            continue;
        }
        t = now();
        one_op(op);
        if (n < MAX_OPS) {
            lat[n++] = (now() - t) * 1e6;
        }
    }
    *n_p       = n;
    *compute_p = ctl->compute_sec;
    return ctl->wall_sec;
}

static void print_atomics(void)
{
    char *buf = NULL, *line;
    size_t size;
    FILE *f = open_memstream(&buf, &size);

    if (f == NULL) {
        return;
    }
    ucp_worker_print_info(worker, f);
    fclose(f);
    /* which transports UCP does the atomics on; none: emulated over AM */
    line = strstr(buf, "atomics:");
    if (line != NULL) {
        line[strcspn(line, "\n")] = '\0';
        printf("%s%s\n", line,
               (line[strspn(line + 8, " ") + 8] == '\0') ?
               "none (UCP emulates them with active messages)" : "");
    }
    free(buf);
    /* the lanes, for the log (stderr) */
    ucp_ep_print_info(ep, stderr);
}

/* Connects to the target, and warms up (wireup, keys) while it
 * progresses. */
static void origin_open(void)
{
    unsigned i;

    init_ucp();
    connect_target();
    for (i = 0; i < 20; ++i) {
        one_op(i % OP_NONE);
    }
    print_atomics();
}

static void origin_close(void)
{
    ucp_request_param_t cparam = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
        .flags        = 0
    };
    ucs_status_t status;

    status = wait_req(ucp_ep_close_nbx(ep, &cparam));
    if (status != UCS_OK) {
        fprintf(stderr, "passive: ep close: %s\n", ucs_status_string(status));
    }
    command(CMD_QUIT, 0, 0);
    ucp_rkey_destroy(rkey);
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
}

static int origin(unsigned phase_ms)
{
    static const unsigned slices_us[] = { 0, 1000, 10000 };
    double *lat, base_wall = 0, base_compute = 0, wall, comp;
    unsigned s, n, slices;
    int op;

    lat = malloc(MAX_OPS * sizeof(*lat));
    if (lat == NULL) {
        die("malloc", UCS_OK);
    }
    origin_open();

    for (s = 0; s < sizeof(slices_us) / sizeof(slices_us[0]); ++s) {
        slices = slices_us[s] ? (phase_ms * 1000 / slices_us[s]) : phase_ms;
        if (slices_us[s] != 0) {
            base_wall = phase(OP_NONE, slices_us[s], slices, lat, &n,
                              &base_compute);
        }
        for (op = 0; op < OP_NONE; ++op) {
            wall = phase(op, slices_us[s], slices, lat, &n, &comp);
            if (n == 0) {
                fprintf(stderr, "passive: no %s completed\n", op_names[op]);
                return 2;
            }
            qsort(lat, n, sizeof(*lat), cmp_double);
            printf("phase op=%s slice_ms=%u ops=%u median_us=%.1f p99_us=%.1f",
                   op_names[op], slices_us[s] / 1000, n,
                   (n % 2) ? lat[n / 2] : (lat[n / 2 - 1] + lat[n / 2]) / 2,
                   lat[(n * 99) / 100]);
            if (slices_us[s] != 0) {
                printf(" slowdown=%.3f compute=%.3f", wall / base_wall,
                       comp / base_compute);
            }
            printf("\n");
            fflush(stdout);
        }
    }

    origin_close();
    free(lat);
    printf("result wrong=%lu\n", wrong);
    return wrong ? 1 : 0;
}

/* --- the random-update bench (gups.h) ----------------------------------- */

/* One batch of n XORs on the table, all in flight, then waited for: the
 * fetches' replies, or (post) a flush of the endpoint, which completes once
 * the target has every update. */
static void gups_batch(gups_t *g, int op, unsigned n)
{
    static const ucp_request_param_t none = { .op_attr_mask = 0 };
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE,
        .datatype     = ucp_dt_make_contig(sizeof(uint64_t))
    };
    uint64_t val[GUPS_WINDOW], result[GUPS_WINDOW];
    unsigned idx[GUPS_WINDOW], i;
    void *req[GUPS_WINDOW];
    ucs_status_t status;

    gups_plan(g, n, idx, val);
    for (i = 0; i < n; ++i) {
        if (op == GUPS_FETCH) {
            param.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
            param.reply_buffer  = &result[i];
        }
        req[i] = ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_XOR, &val[i], 1,
                                   remote_addr + TABLE_OFFSET +
                                   idx[i] * sizeof(uint64_t), rkey, &param);
    }
    for (i = 0; i < n; ++i) {
        status = wait_req(req[i]);
        if (status != UCS_OK) {
            die(gups_op_names[op], status);
        }
    }
    if (op == GUPS_POST) {
        status = wait_req(ucp_ep_flush_nbx(ep, &none));
        if (status != UCS_OK) {
            die("ucp_ep_flush_nbx", status);
        }
    }
    gups_done(g, "passive gups", n, idx, val,
              (op == GUPS_FETCH) ? result : NULL);
}

/* The table, read back (after the last flush). */
static void gups_read_table(gups_t *g)
{
    ucp_request_param_t param = { .op_attr_mask = 0 };
    static uint64_t table[GUPS_WORDS];
    ucs_status_t status;

    status = wait_req(ucp_get_nbx(ep, table, sizeof(table),
                                  remote_addr + TABLE_OFFSET, rkey, &param));
    if (status != UCS_OK) {
        die("ucp_get_nbx", status);
    }
    gups_check_table(g, "passive gups", table);
}

static int gups_origin(unsigned phase_ms)
{
    static const unsigned slices_us[] = { 0, GUPS_BUSY_US };
    static gups_t g;
    unsigned long n;
    unsigned s, slices, seq;
    double t, base = 0;
    int op;

    gups_init(&g);
    origin_open();
    for (s = 0; s < sizeof(slices_us) / sizeof(slices_us[0]); ++s) {
        slices = slices_us[s] ? (phase_ms * 1000 / slices_us[s]) : phase_ms;
        if (slices_us[s] != 0) {
            seq = command(CMD_BASELINE, slices_us[s], slices);
            while (load(&ctl->done_seq) != seq) {
                usleep(1000);
            }
            base = ctl->wall_sec;
        }
        for (op = 0; op < GUPS_OPS; ++op) {
            seq = command(CMD_TRAFFIC, slices_us[s], slices);
            while (load(&ctl->ack_seq) != seq) {
            }
            t = now();
            for (n = 0; load(&ctl->done_seq) != seq; n += GUPS_WINDOW) {
                gups_batch(&g, op, GUPS_WINDOW);
            }
            gups_print(op, slices_us[s], GUPS_WINDOW, n, now() - t,
                       slices_us[s] ? ctl->wall_sec / base : 0);
        }
    }
    gups_read_table(&g);
    origin_close();
    printf("result wrong=%lu\n", g.wrong);
    return g.wrong ? 1 : 0;
}

int main(int argc, char **argv)
{
    int fd, is_target;

    if ((argc < 3) || (strcmp(argv[1], "target") && strcmp(argv[1], "origin") &&
                       strcmp(argv[1], "gups"))) {
        fprintf(stderr, "usage: passive target DIR | passive origin|gups DIR [PHASE_MS]\n");
        return 2;
    }
    is_target = !strcmp(argv[1], "target");
    dir       = argv[2];
    /* the target creates DIR/ctl afresh; the origin waits for it */
    if (is_target) {
        unlink(path("addr"));
        fd = open(path("ctl"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    } else {
        while ((fd = open(path("ctl"), O_RDWR)) < 0) {
            usleep(10000);
        }
    }
    if ((fd < 0) || (ftruncate(fd, sizeof(*ctl)) != 0)) {
        die(path("ctl"), UCS_OK);
    }
    ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ctl == MAP_FAILED) {
        die("mmap", UCS_OK);
    }
    close(fd);
    if (is_target) {
        return target();
    }
    return (!strcmp(argv[1], "gups") ? gups_origin : origin)(
            (argc > 3) ? atoi(argv[3]) : 600);
}
