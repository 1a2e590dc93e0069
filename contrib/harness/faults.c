/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * faults: a stream of verified UCP operations between two processes, for
 * the fault bench (contrib/harness/faults.sh), which breaks the wire under it.
 *
 *   faults server DIR                  the target
 *   faults client DIR SECONDS [BATCH]  the stream, then the verdict
 *
 * (BATCH must be the same on both sides: it sizes the target's memory.)
 *
 * DIR is a directory both see (/dev/shm in the guest). The target's memory
 * and its record of active messages live in files there (DIR/mem,
 * DIR/amcount), mapped shared, so that they outlive a server killed with
 * kill -9 and a restarted server carries on with them, and so that the
 * client can check the outcome itself at the end. The server publishes its
 * worker address and packed rkey in DIR/addr (replaced atomically by each
 * new server); the client reads it again on every (re)connection.
 * The client streams for SECONDS from its first completed batch (it
 * creates DIR/streaming then, for the script to time its faults by).
 *
 * The client issues batches of BATCH (default 8) rounds; each round is a
 * put of a self-describing pattern into its own slot, a get of a slot put
 * in the previous batch, an atomic fetch-add of 1 on one counter and an
 * active message carrying a sequence number; a flush of the endpoint ends
 * the batch. An operation counts as ok when it is known to have completed
 * at the target: a get or fetch-add that completed without error; a put
 * or AM that completed without error in a batch whose flush completed
 * without error. Everything else issued counts as failed (its outcome is
 * unknown). On an endpoint error the client closes the endpoint, creates a
 * new one (an application-level reconnect) and goes on until SECONDS are
 * up. Then, with the wire healthy again, it checks:
 *  lost       ok puts whose slot holds an older put's pattern (in-stream
 *             gets and the final memory), ok fetch-adds missing from the
 *             counter (counter < ok adds), ok AMs never received;
 *  duplicated counter > ok + failed adds (an add applied twice), AMs
 *             received more than once;
 *  corrupted  a get or final slot that is no put's pattern, a get that
 *             left its buffer untouched, an AM whose payload is wrong.
 * An AM that was ok but sent to a server that was then killed, and that
 * comes after the last AM that server processed, died with the process
 * (the transport delivered it): reported as such, not as lost.
 *
 * Prints "stall START END" (realtime seconds) for every gap of more than
 * 100 ms between batches that completed ops ("stall START END open" if the
 * stream ended in one), "streamed START END" (the stream's first completed
 * batch and its end: a fault outside it was not measured), and last one
 * "result ..." line of key=value pairs (every column of the fault bench's
 * row that this process measures; faults_events.h adds an "event ..." line
 * for each of syncmem's reconnects as it happens). contrib/harness/faults.py
 * reads these lines, and only these. Exits 0 when lost, duplicated and
 * corrupted are 0; 1 when not; 3 when an operation or the close of an
 * endpoint did not complete within 60 s (a hang).
 */
#include "faults_events.h"

#include <ucp/api/ucp.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define AM_ID        7
#define NSLOTS_MUL   4          /* slots = BATCH * 4: a get reads the last batch */
#define SLOT_SIZE    2048       /* two or more packets at rxe's MTU */
#define AM_WORDS     8
#define MAX_SEQ      (4u << 20) /* AMs per run; byte-sized counts at the target */
#define HANG_SEC     60.0 /* > the longest flap (30 s) and its recovery */
#define STALL_SEC    0.1
#define MAX_BATCH    64

/* The head of DIR/mem; the slots follow at SLOT_SIZE each. */
typedef struct {
    uint64_t counter;        /* target of the fetch-adds */
    uint64_t am_bad;         /* AMs whose payload did not check */
    uint64_t am_received;
    uint64_t pad[5];
} faults_head_t;

enum { SLOT_EMPTY, SLOT_UNKNOWN, SLOT_OK };
enum { AM_UNUSED, AM_OK, AM_FAILED };

static const char *dir;
static ucp_context_h context;
static ucp_worker_h worker;
/* ok and failed puts, gets, fetch-adds, AMs (global: a hang reports them) */
static uint64_t ok[4], failed[4];

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, ucs_status_t status)
{
    fprintf(stderr, "faults: %s: %s\n", what,
            (status == UCS_OK) ? strerror(errno) : ucs_status_string(status));
    exit(2);
}

static char *path(const char *name)
{
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];

    snprintf(p, sizeof(buf[0]), "%s/%s", dir, name);
    return p;
}

/* Maps DIR/name shared, creating it (zeroed) if needed. */
static void *map_file(const char *name, size_t size)
{
    void *p;
    int fd;

    fd = open(path(name), O_RDWR | O_CREAT, 0644);
    if ((fd < 0) || (ftruncate(fd, size) != 0)) {
        die(path(name), UCS_OK);
    }
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        die(path(name), UCS_OK);
    }
    close(fd);
    return p;
}

static size_t mem_size(unsigned batch)
{
    return sizeof(faults_head_t) + (size_t)batch * NSLOTS_MUL * SLOT_SIZE;
}

static size_t slot_offset(unsigned slot)
{
    return sizeof(faults_head_t) + (size_t)slot * SLOT_SIZE;
}

static uint64_t *slot_ptr(void *mem, unsigned slot)
{
    return (uint64_t*)((char*)mem + slot_offset(slot));
}

/* Word j of the pattern of put (or AM) id into slot. Word 0 is the id and
 * word 1 the slot, so a buffer says which put it claims to be. */
static uint64_t pattern(uint64_t id, unsigned slot, unsigned j)
{
    if (j == 0) {
        return id;
    } else if (j == 1) {
        return slot;
    }
    return (id * 0x9e3779b97f4a7c15ull) ^ (j * 0xc2b2ae3d27d4eb4full) ^ slot;
}

static void fill(uint64_t *p, size_t words, uint64_t id, unsigned slot)
{
    size_t j;

    for (j = 0; j < words; ++j) {
        p[j] = pattern(id, slot, j);
    }
}

static int matches(const uint64_t *p, size_t words, uint64_t id, unsigned slot)
{
    size_t j;

    for (j = 0; j < words; ++j) {
        if (p[j] != pattern(id, slot, j)) {
            return 0;
        }
    }
    return 1;
}

/* A slot expected to hold put 'id': 0 if it does, 'l' if it holds an older
 * put's whole pattern (the newer one was lost, or an old one landed again),
 * 'c' if anything else. */
static char check_slot(const uint64_t *p, uint64_t id, unsigned slot)
{
    const size_t words = SLOT_SIZE / 8;

    if (matches(p, words, id, slot)) {
        return 0;
    }
    if ((p[0] < id) && matches(p, words, p[0], slot)) {
        return 'l';
    }
    return 'c';
}

static void init_ucp(void)
{
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features   = UCP_FEATURE_RMA | UCP_FEATURE_AMO64 | UCP_FEATURE_AM
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

/* --- server ------------------------------------------------------------- */

static faults_head_t *srv_head;
static uint8_t *srv_amcount;

static ucs_status_t am_cb(void *arg, const void *header, size_t header_length,
                          void *data, size_t length,
                          const ucp_am_recv_param_t *param)
{
    const uint64_t *w = data;
    uint64_t seq;

    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        (length != AM_WORDS * 8) || (w[0] >= MAX_SEQ) ||
        !matches(w, AM_WORDS, w[0], 0)) {
        ++srv_head->am_bad;
        return UCS_OK;
    }
    seq = w[0];
    if (srv_amcount[seq] < 255) {
        ++srv_amcount[seq];
    }
    ++srv_head->am_received;
    return UCS_OK;
}

static int server(unsigned batch)
{
    ucp_mem_map_params_t mparams;
    ucp_am_handler_param_t aparams = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                      UCP_AM_HANDLER_PARAM_FIELD_CB,
        .id         = AM_ID,
        .cb         = am_cb
    };
    ucp_address_t *addr;
    size_t addr_len, rkey_len;
    ucp_mem_h memh;
    void *rkey, *mem;
    uint32_t lens[2];
    double drain_end = 0;
    unsigned n = 0;
    FILE *f;
    ucs_status_t status;

    mem         = map_file("mem", mem_size(batch));
    srv_head    = mem;
    srv_amcount = map_file("amcount", MAX_SEQ);
    init_ucp();

    mparams.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                         UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mparams.address    = mem;
    mparams.length     = mem_size(batch);
    status = ucp_mem_map(context, &mparams, &memh);
    if (status != UCS_OK) {
        die("ucp_mem_map", status);
    }
    status = ucp_rkey_pack(context, memh, &rkey, &rkey_len);
    if (status != UCS_OK) {
        die("ucp_rkey_pack", status);
    }
    status = ucp_worker_set_am_recv_handler(worker, &aparams);
    if (status != UCS_OK) {
        die("ucp_worker_set_am_recv_handler", status);
    }
    status = ucp_worker_get_address(worker, &addr, &addr_len);
    if (status != UCS_OK) {
        die("ucp_worker_get_address", status);
    }

    /* DIR/addr: lengths, the address, the rkey, the target's base address */
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
    printf("server: listening, pid %d\n", (int)getpid());
    fflush(stdout);

    /* Until the client says it is done; then 300 ms more, so that every AM
     * the client's last flush saw delivered is processed. */
    for (;;) {
        ucp_worker_progress(worker);
        if ((++n % 4096) != 0) {
            continue;
        }
        if (drain_end == 0) {
            if (access(path("done"), F_OK) == 0) {
                drain_end = now() + 0.3;
            }
        } else if (now() > drain_end) {
            break;
        }
    }
    f = fopen(path("server-done"), "w");
    if (f != NULL) {
        fclose(f);
    }
    /* The client may still hold an endpoint to us: leave without closing
     * anything gracefully (the process exit releases it all). */
    printf("server: done, %" PRIu64 " AMs received\n", srv_head->am_received);
    return 0;
}

/* --- client ------------------------------------------------------------- */

typedef struct {
    void         *req;
    ucs_status_t status;
} op_t;

typedef struct {
    unsigned first_seq, end_seq;   /* the AMs sent in this epoch */
    uint64_t gen;                  /* which server (DIR/addr's inode+mtime) */
} epoch_t;

static ucp_ep_h ep;
static ucp_rkey_h rkey;
static uint64_t remote_base;
static ucs_status_t ep_error = UCS_OK;

static void err_cb(void *arg, ucp_ep_h e, ucs_status_t status)
{
    ep_error = status;
}

/* Start: keep the request, or the immediate outcome. */
static void op_start(op_t *op, ucs_status_ptr_t sp)
{
    op->req    = NULL;
    op->status = UCS_OK;
    if (UCS_PTR_IS_ERR(sp)) {
        op->status = UCS_PTR_STATUS(sp);
    } else if (sp != NULL) {
        op->req    = sp;
        op->status = UCS_INPROGRESS;
    }
}

/* Progress until every op is done; exits 3 past HANG_SEC (a hang). */
static void op_wait(op_t *ops, unsigned n, const char *what)
{
    double deadline = now() + HANG_SEC;
    unsigned i, busy;

    do {
        ucp_worker_progress(worker);
        busy = 0;
        for (i = 0; i < n; ++i) {
            if (ops[i].req == NULL) {
                continue;
            }
            ops[i].status = ucp_request_check_status(ops[i].req);
            if (ops[i].status == UCS_INPROGRESS) {
                ++busy;
            } else {
                ucp_request_free(ops[i].req);
                ops[i].req = NULL;
            }
        }
        if (busy && (now() > deadline)) {
            /* which kinds (a batch: put, get, fetch-add, AM per round, then
             * the flush), for the post-mortem */
            unsigned kinds[5] = {0};
            for (i = 0; i < n; ++i) {
                if (ops[i].req != NULL) {
                    ++kinds[(n > 1) && (i == n - 1) ? 4 : i % 4];
                }
            }
            if (n > 1) {
                printf("note: pending put %u get %u fetch-add %u am %u"
                       " flush %u\n", kinds[0], kinds[1], kinds[2], kinds[3],
                       kinds[4]);
            }
            printf("result hang=1 what=%s pending=%u ops_ok=%" PRIu64
                   " ops_failed=%" PRIu64 "\n", what, busy,
                   ok[0] + ok[1] + ok[2] + ok[3],
                   failed[0] + failed[1] + failed[2] + failed[3] + busy);
            fflush(stdout);
            _exit(3);
        }
    } while (busy);
}

static uint64_t addr_gen(void)
{
    struct stat st;

    if (stat(path("addr"), &st) != 0) {
        return 0;
    }
    return ((uint64_t)st.st_ino << 32) ^ (uint64_t)st.st_mtim.tv_nsec ^
           ((uint64_t)st.st_mtim.tv_sec << 20);
}

/* Reads DIR/addr (waiting up to 60 s for it) and creates ep and rkey;
 * *gen says which server that was. Fails when the peer is unreachable
 * (e.g. tcp while the server is down), and the caller tries again. */
static ucs_status_t client_connect(uint64_t *gen_p)
{
    ucp_ep_params_t params;
    uint32_t lens[2];
    void *addr = NULL, *packed = NULL;
    double deadline = now() + 60;
    uint64_t gen;
    FILE *f;
    ucs_status_t status;

    for (;;) {
        gen = addr_gen();
        f   = fopen(path("addr"), "r");
        if ((f != NULL) && (fread(lens, sizeof(lens), 1, f) == 1) &&
            ((addr = malloc(lens[0])) != NULL) &&
            ((packed = malloc(lens[1])) != NULL) &&
            (fread(addr, lens[0], 1, f) == 1) &&
            (fread(packed, lens[1], 1, f) == 1) &&
            (fread(&remote_base, sizeof(remote_base), 1, f) == 1)) {
            fclose(f);
            break;
        }
        if (f != NULL) {
            fclose(f);
        }
        free(addr);
        free(packed);
        addr = packed = NULL;
        if (now() > deadline) {
            fprintf(stderr, "faults: no server address in %s\n", path("addr"));
            exit(2);
        }
        usleep(50000);
    }

    params.field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                             UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                             UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address         = addr;
    params.err_mode        = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb  = err_cb;
    params.err_handler.arg = NULL;
    ep_error               = UCS_OK;
    status                 = ucp_ep_create(worker, &params, &ep);
    if (status != UCS_OK) {
        printf("ucp_ep_create: %s\n", ucs_status_string(status));
        ep = NULL;
        goto out;
    }
    status = ucp_ep_rkey_unpack(ep, packed, &rkey);
    if (status != UCS_OK) {
        die("ucp_ep_rkey_unpack", status);
    }
    *gen_p = gen;
out:
    free(addr);
    free(packed);
    return status;
}

static void client_disconnect(void)
{
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
        .flags        = UCP_EP_CLOSE_FLAG_FORCE
    };
    op_t op;

    ucp_rkey_destroy(rkey);
    op_start(&op, ucp_ep_close_nbx(ep, &param));
    op_wait(&op, 1, "ep_close");
    ep = NULL;
}

/*
 * Wait for a new endpoint's wireup (a get of the counter: an empty flush
 * does not wait for it) before any atomic: if the endpoint fails while
 * UCP 1.13 still holds requests for its wireup, the purge of that queue
 * never completes a fetching atomic (its count starts at 1 and the purge
 * only calls the completion at 0), and the application waits for ever.
 * Puts, gets, AMs and flushes do complete. A failed wireup closes the
 * endpoint, and the caller tries again.
 */
static ucs_status_t client_wired(void)
{
    ucp_request_param_t none = { .op_attr_mask = 0 };
    uint64_t counter;
    op_t op;

    op_start(&op, ucp_get_nbx(ep, &counter, sizeof(counter), remote_base,
                              rkey, &none));
    op_wait(&op, 1, "wireup");
    if ((op.status == UCS_OK) && (ep_error == UCS_OK)) {
        return UCS_OK;
    }
    printf("new endpoint failed: %s\n",
           ucs_status_string((ep_error != UCS_OK) ? ep_error : op.status));
    fflush(stdout);
    client_disconnect();
    return UCS_ERR_UNREACHABLE;
}

static void touch(const char *name)
{
    FILE *f = fopen(path(name), "w");

    if (f != NULL) {
        fclose(f);
    }
}

static int client(double seconds, unsigned batch)
{
    const unsigned nslots    = batch * NSLOTS_MUL;
    const size_t slot_words  = SLOT_SIZE / 8;
    ucp_request_param_t none = { .op_attr_mask = 0 };
    ucp_request_param_t fetch;
    /* per round: put, get, fetch-add, AM; then the flush */
    op_t ops[MAX_BATCH * 4 + 1];
    uint64_t (*putbuf)[SLOT_SIZE / 8], (*getbuf)[SLOT_SIZE / 8];
    uint64_t amdata[MAX_BATCH][AM_WORDS], fetched[MAX_BATCH], one = 1;
    uint64_t *slot_id, put_id = 0;
    uint8_t *slot_state, *am_state, *amcount;
    unsigned get_slot[MAX_BATCH], get_expect[MAX_BATCH];
    epoch_t *epochs = NULL;
    unsigned nepochs = 0, seq = 0, b = 0, i, s;
    uint64_t lost = 0, dup = 0, corrupt = 0, died = 0, untouched = 0;
    uint64_t adds_ok, adds_failed, recreated = 0, stalls = 0;
    uint64_t connect_failed = 0, final_gen;
    double end, t, last_ok, max_stall = 0, stream_start = 0;
    faults_head_t *head;
    int streaming = 0;
    char c;

    putbuf     = calloc(batch, SLOT_SIZE);
    getbuf     = calloc(batch, SLOT_SIZE);
    slot_id    = calloc(nslots, sizeof(*slot_id));
    slot_state = calloc(nslots, 1);
    am_state   = calloc(MAX_SEQ, 1);
    if (!putbuf || !getbuf || !slot_id || !slot_state || !am_state) {
        die("calloc", UCS_OK);
    }
    fetch.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE |
                         UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    fetch.datatype     = ucp_dt_make_contig(8);

    init_ucp();
    /* SECONDS count from the first batch that completes: the fault script
     * times its faults from then (DIR/streaming) */
    end     = now() + 120 + seconds;
    last_ok = now();
    while (now() < end) {
        if (ep == NULL) {
            epochs = realloc(epochs, (nepochs + 1) * sizeof(*epochs));
            if ((client_connect(&epochs[nepochs].gen) != UCS_OK) ||
                (client_wired() != UCS_OK)) {
                ++connect_failed;
                usleep(100000);
                continue;
            }
            epochs[nepochs].first_seq = seq;
            epochs[nepochs].end_seq   = seq;
            ++nepochs;
        }
        if (seq + batch > MAX_SEQ) {
            printf("note: %u AMs sent, the most one run records; stopping\n",
                   seq);
            break;
        }

        /* Batch b: puts to slot group b % 4, gets of group (b - 1) % 4 */
        for (i = 0; i < batch; ++i) {
            s = (b % NSLOTS_MUL) * batch + i;
            fill(putbuf[i], slot_words, ++put_id, s);
            slot_id[s]    = put_id;
            slot_state[s] = SLOT_UNKNOWN;
            op_start(&ops[4 * i],
                     ucp_put_nbx(ep, putbuf[i], SLOT_SIZE,
                                 remote_base + slot_offset(s), rkey, &none));

            get_slot[i] = ((b + NSLOTS_MUL - 1) % NSLOTS_MUL) * batch + i;
            get_expect[i] = (slot_state[get_slot[i]] == SLOT_OK);
            memset(getbuf[i], 0xa5, SLOT_SIZE); /* poison: "untouched" */
            op_start(&ops[4 * i + 1],
                     ucp_get_nbx(ep, getbuf[i], SLOT_SIZE,
                                 remote_base + slot_offset(get_slot[i]), rkey,
                                 &none));

            fetch.reply_buffer = &fetched[i];
            op_start(&ops[4 * i + 2],
                     ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_ADD, &one, 1,
                                       remote_base, rkey, &fetch));

            fill(amdata[i], AM_WORDS, seq, 0);
            am_state[seq++] = AM_FAILED; /* until known otherwise */
            op_start(&ops[4 * i + 3],
                     ucp_am_send_nbx(ep, AM_ID, NULL, 0, amdata[i],
                                     sizeof(amdata[i]), &none));
        }
        epochs[nepochs - 1].end_seq = seq;
        op_start(&ops[4 * batch], ucp_ep_flush_nbx(ep, &none));
        op_wait(ops, 4 * batch + 1, "batch");

        /* Account: gets and adds stand alone; puts and AMs need the flush */
        t = now();
        for (i = 0; i < batch; ++i) {
            s = (b % NSLOTS_MUL) * batch + i;
            if ((ops[4 * i].status == UCS_OK) &&
                (ops[4 * batch].status == UCS_OK)) {
                ++ok[0];
                slot_state[s] = SLOT_OK;
            } else {
                ++failed[0];
            }
            if (ops[4 * i + 1].status == UCS_OK) {
                ++ok[1];
                if (get_expect[i]) {
                    c = check_slot(getbuf[i], slot_id[get_slot[i]],
                                   get_slot[i]);
                    if ((c == 'c') && (getbuf[i][0] == 0xa5a5a5a5a5a5a5a5ull)) {
                        ++untouched;
                    }
                    if (c != 0) {
                        printf("get of slot %u (put %" PRIu64 "): %s, "
                               "holds put %" PRIu64 "\n", get_slot[i],
                               slot_id[get_slot[i]],
                               (c == 'l') ? "stale" : "corrupted",
                               getbuf[i][0]);
                    }
                    lost    += (c == 'l');
                    corrupt += (c == 'c');
                }
            } else {
                ++failed[1];
            }
            if (ops[4 * i + 2].status == UCS_OK) {
                ++ok[2];
            } else {
                ++failed[2];
            }
            if ((ops[4 * i + 3].status == UCS_OK) &&
                (ops[4 * batch].status == UCS_OK)) {
                ++ok[3];
                am_state[seq - batch + i] = AM_OK;
            } else {
                ++failed[3];
            }
        }
        if (ops[4 * batch].status == UCS_OK) {
            if (streaming && (t - last_ok > STALL_SEC)) {
                printf("stall %.3f %.3f\n", last_ok, t);
                ++stalls;
                if (t - last_ok > max_stall) {
                    max_stall = t - last_ok;
                }
            }
            last_ok = t;
            if (!streaming) {
                end          = t + seconds;
                stream_start = t;
                touch("streaming");
                streaming = 1;
            }
        }
        ++b;

        if (ep_error != UCS_OK) {
            printf("ep error at %.3f: %s (flush: %s); new endpoint\n", t,
                   ucs_status_string(ep_error),
                   ucs_status_string(ops[4 * batch].status));
            fflush(stdout);
            client_disconnect();
            ++recreated;
            usleep(100000); /* not a busy loop of failures while it is down */
        } else if (ops[4 * batch].status != UCS_OK) {
            /* A flush can fail on a live endpoint: syncmem's, after a
             * reconnect, for atomics whose outcome is unknown. The batch's
             * puts and AMs count as failed; the endpoint goes on. */
            printf("flush failed at %.3f: %s; the endpoint is alive\n", t,
                   ucs_status_string(ops[4 * batch].status));
        }
    }
    t = now();
    if (streaming && (t - last_ok > STALL_SEC)) {
        printf("stall %.3f %.3f open\n", last_ok, t);
    }
    if (streaming) {
        printf("streamed %.3f %.3f\n", stream_start, t);
    }
    if (ep != NULL) {
        client_disconnect();
    }

    /* The server drains what is in flight and says so */
    touch("done");
    t = now() + 30;
    while ((access(path("server-done"), F_OK) != 0) && (now() < t)) {
        usleep(20000);
    }
    if (access(path("server-done"), F_OK) != 0) {
        printf("note: the server did not confirm it drained its AMs\n");
    }

    /* The verdict, from the target's own memory */
    final_gen = addr_gen();
    head    = map_file("mem", mem_size(batch));
    amcount = map_file("amcount", MAX_SEQ);
    adds_ok = ok[2];
    adds_failed = failed[2];
    if (head->counter < adds_ok) {
        printf("counter %" PRIu64 " < %" PRIu64 " fetch-adds ok\n",
               head->counter, adds_ok);
        lost += adds_ok - head->counter;
    } else if (head->counter > adds_ok + adds_failed) {
        printf("counter %" PRIu64 " > %" PRIu64 " fetch-adds issued\n",
               head->counter, adds_ok + adds_failed);
        dup += head->counter - adds_ok - adds_failed;
    }
    for (s = 0; s < nslots; ++s) {
        if (slot_state[s] == SLOT_OK) {
            c = check_slot(slot_ptr(head, s), slot_id[s], s);
            if (c != 0) {
                printf("slot %u (put %" PRIu64 "): %s at the end\n", s,
                       slot_id[s], (c == 'l') ? "stale" : "corrupted");
            }
            lost    += (c == 'l');
            corrupt += (c == 'c');
        }
    }
    for (i = 0; i < nepochs; ++i) {
        /* Was this epoch's server replaced later (killed)? Then the AMs
         * after the last one it processed died with it. */
        unsigned last_seen = epochs[i].first_seq, q;
        int replaced       = 0;

        /* (a server that was replaced, whether or not the client got to
         * the new one before the stream ended) */
        replaced = (epochs[i].gen != final_gen);
        for (q = epochs[i].first_seq; q < epochs[i].end_seq; ++q) {
            if (amcount[q] != 0) {
                last_seen = q + 1;
            }
        }
        for (q = epochs[i].first_seq; q < epochs[i].end_seq; ++q) {
            if (amcount[q] > 1) {
                dup += amcount[q] - 1;
            }
            if ((am_state[q] != AM_OK) || (amcount[q] != 0)) {
                continue;
            }
            if (replaced && (q >= last_seen)) {
                ++died;
            } else {
                ++lost;
                if (lost < 20) {
                    printf("AM %u ok but never received\n", q);
                }
            }
        }
    }
    corrupt += head->am_bad;

    printf("result hang=0 ops_ok=%" PRIu64 " ops_failed=%" PRIu64
           " lost=%" PRIu64 " duplicated=%" PRIu64 " corrupted=%" PRIu64
           " ep_recreated=%" PRIu64 " stalls=%" PRIu64 " max_stall_ms=%.0f"
           " put=%" PRIu64 "/%" PRIu64 " get=%" PRIu64 "/%" PRIu64
           " fadd=%" PRIu64 "/%" PRIu64 " am=%" PRIu64 "/%" PRIu64
           " counter=%" PRIu64 " am_received=%" PRIu64
           " am_died_with_peer=%" PRIu64 " get_untouched=%" PRIu64
           " connect_failed=%" PRIu64 "\n",
           ok[0] + ok[1] + ok[2] + ok[3],
           failed[0] + failed[1] + failed[2] + failed[3], lost, dup, corrupt,
           recreated, stalls, max_stall * 1000, ok[0], failed[0], ok[1],
           failed[1], ok[2], failed[2], ok[3], failed[3], head->counter,
           head->am_received, died, untouched, connect_failed);
    return (lost || dup || corrupt) ? 1 : 0;
}

int main(int argc, char **argv)
{
    unsigned batch = 8;

    setvbuf(stdout, NULL, _IOLBF, 0);
    faults_events_watch();
    if ((argc >= 3) && !strcmp(argv[1], "server")) {
        dir = argv[2];
        if (argc > 3) {
            batch = atoi(argv[3]);
        }
    } else if ((argc >= 4) && !strcmp(argv[1], "client")) {
        dir = argv[2];
        if (argc > 4) {
            batch = atoi(argv[4]);
        }
    } else {
        fprintf(stderr, "usage: faults server DIR [BATCH]\n"
                        "       faults client DIR SECONDS [BATCH]\n");
        return 2;
    }
    if ((batch == 0) || (batch > MAX_BATCH)) {
        fprintf(stderr, "faults: BATCH must be 1..%d\n", MAX_BATCH);
        return 2;
    }
    return (argv[1][0] == 's') ? server(batch) : client(atof(argv[3]), batch);
}
