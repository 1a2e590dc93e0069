/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mpi_scale: MPI over many endpoints (contrib/bench.sh, section
 * 'mpi_scale'). Every rank talks to every other, so a job of P ranks has
 * P * (P - 1) connections in each of Open MPI's two UCX users (pml ucx for
 * the collectives, osc ucx for the window); what they cost in time and
 * memory is measured in one run:
 *
 *   mpirun -np P ... mpi_scale [-r REPS] [-w WARMUP] [-s BYTES[,BYTES...]]
 *                              [-k ROUNDS] [-b SECONDS]
 *   mpi_scale -L      the ops a run reports, 'op unit' a line (no MPI)
 *
 *  - alltoall_BYTES: MPI_Alltoall of BYTES a pair (default 8, 1024 and
 *    16384), WARMUP calls (default 3) then REPS timed ones (default 20),
 *    each after a barrier, so that the ranks start it together. Every
 *    word of every block says who sent it, to whom, in which call, and
 *    where in the block it is: each received block is checked whole, warm-up
 *    calls included (a block not as sent is an error).
 *  - fetch_and_op: a window of one 64-bit counter a rank; inside one
 *    MPI_Win_lock_all epoch each rank adds 1 to every other rank's counter
 *    (MPI_Fetch_and_op, MPI_SUM), ROUNDS times (default 20), an
 *    MPI_Win_flush after each, so that each is timed to its completion at
 *    the target; the first round (connections, keys) is not timed. The
 *    values a rank fetched from one target must rise strictly (one that
 *    does not is an add lost or done twice), and after a barrier each
 *    counter must be (P - 1) * ROUNDS.
 *  - rss_init, rss_end, hwm_end: each rank's VmRSS from /proc/self/status
 *    after MPI_Init and after the tests (the window freed), and its peak
 *    (VmHWM) then, in kB.
 *
 * For a time, a rank's number is the median of its calls; rank 0 prints,
 * per op, the median and the largest of the ranks' numbers (for memory,
 * of the ranks' values), and a line per rank (its device, its memory):
 *
 *   mpi_scale np=P op=alltoall_8 unit=us median=.. max=.. reps=R errors=0
 *   mpi_scale np=P op=fetch_and_op unit=us median=.. max=.. ops=N errors=0
 *   mpi_scale np=P op=rss_end unit=kB median=.. max=..
 *   mpi_scale np=P rank=3 dev=rxe1:1 host=.. rss_init_kb=.. ... hwm_end_kb=..
 *   result ok                     (or: result FAIL what was wrong)
 *
 * An op line comes when the op is done and checked; errors= counts what
 * was wrong in it across the ranks. Exit status 0 when everything was
 * right, 1 when something was wrong, 2 on a bad call, 3 when the time
 * budget ran out. Every wait is bounded: a rank still running BUDGET
 * seconds (default 300) after it started says where it was on stderr and
 * calls MPI_Abort (from SIGALRM: Open MPI's blocking calls cannot be
 * polled, and a hung job is the case it is for); if even that hangs, the
 * next alarm, 10 s later, ends the process.
 */
#include <mpi.h>

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SIZES      8
#define HOST_LEN       32
#define DEV_LEN        32
#define ABORT_GRACE_S  10

static int rank = -1, nprocs;

/* --- the time budget --------------------------------------------------- */

/* The alarm's message, built outside the handler (which only writes it):
 * two buffers, so that a phase changing under the alarm gives the old
 * message or the new, never half of each. */
static char alarm_msg[2][256];
static volatile sig_atomic_t alarm_cur, mpi_up;
static unsigned budget_s = 300;

static void phase(const char *what)
{
    int next = !alarm_cur;

    if (rank < 0) {   /* (MPI_Init has not returned: no rank, no MPI_Abort) */
        snprintf(alarm_msg[next], sizeof(alarm_msg[next]),
                 "mpi_scale: pid %d: still running after the time budget of "
                 "%u s, in %s; exit\n", (int)getpid(), budget_s, what);
    } else {
        snprintf(alarm_msg[next], sizeof(alarm_msg[next]),
                 "mpi_scale: rank %d of %d: still running after the time "
                 "budget of %u s, in %s; MPI_Abort\n", rank, nprocs, budget_s,
                 what);
    }
    alarm_cur = next;
}

static void on_alarm(int sig)
{
    const char *m = alarm_msg[alarm_cur];
    ssize_t rc;

    (void)sig;
    rc = write(STDERR_FILENO, m, strlen(m));
    (void)rc;
    /* (SA_RESETHAND: this alarm, should MPI_Abort hang too, kills) */
    alarm(ABORT_GRACE_S);
    if (mpi_up) {
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    _exit(3);
}

static void arm_budget(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_alarm;
    sa.sa_flags   = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    phase("MPI_Init");
    alarm(budget_s);
}

/* --- numbers ------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}

/* Median of V[0..N) (sorts V); N > 0 */
static double median(double *v, int n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return (n % 2) ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Rank 0 gets every rank's VALUE and prints the op's line: the median and
 * the largest of them, and EXTRA ("reps=20 errors=0"; "" for none). */
static void report(const char *op, const char *unit, double value,
                   const char *extra)
{
    double *all = (rank == 0) ? malloc(nprocs * sizeof(*all)) : NULL;

    if ((rank == 0) && (all == NULL)) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Gather(&value, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double max = all[0];
        int i, nan = 0;

        for (i = 0; i < nprocs; ++i) {
            nan |= isnan(all[i]);
            max = (all[i] > max) ? all[i] : max;
        }
        /* (a rank without a number makes the op's numbers none) */
        if (nan) {
            printf("mpi_scale np=%d op=%s unit=%s median=nan max=nan%s%s\n",
                   nprocs, op, unit, *extra ? " " : "", extra);
        } else {
            printf("mpi_scale np=%d op=%s unit=%s median=%.2f max=%.2f%s%s\n",
                   nprocs, op, unit, median(all, nprocs), max,
                   *extra ? " " : "", extra);
        }
        fflush(stdout);
        free(all);
    }
}

/* Errors of all ranks, at rank 0 (0 elsewhere) */
static long sum_at_0(long mine)
{
    long all = 0;

    MPI_Reduce(&mine, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    return all;
}

/* --- memory ------------------------------------------------------------- */

/* VmRSS and VmHWM of this process in kB; -1 where /proc has none */
static void mem_kb(double *rss, double *hwm)
{
    char line[128];
    FILE *f = fopen("/proc/self/status", "r");
    long v;

    *rss = *hwm = -1;
    while ((f != NULL) && (fgets(line, sizeof(line), f) != NULL)) {
        if (sscanf(line, "VmRSS: %ld kB", &v) == 1) {
            *rss = v;
        } else if (sscanf(line, "VmHWM: %ld kB", &v) == 1) {
            *hwm = v;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
}

/* --- MPI_Alltoall ------------------------------------------------------- */

/* Word I of the block SRC sends DST in call CALL: all four in it, so that
 * a block from the wrong rank, call or place is seen. 16 bits each: the
 * caller keeps ranks, calls and words a block below 65536. */
static uint64_t a2a_word(int src, int dst, unsigned call, size_t i)
{
    return ((uint64_t)src << 48) | ((uint64_t)dst << 32) |
           ((uint64_t)(call & 0xffff) << 16) | (uint64_t)(i & 0xffff);
}

/* One size: WARMUP + REPS calls; this rank's median call time (usec), the
 * blocks it received wrong in *errors. */
static double alltoall(size_t bytes, unsigned warmup, unsigned reps,
                       long *errors)
{
    size_t words = bytes / sizeof(uint64_t), i;
    uint64_t *out = malloc(nprocs * bytes), *in = malloc(nprocs * bytes);
    double *lat = malloc(reps * sizeof(*lat)), t, med;
    unsigned call;
    int p;

    if ((out == NULL) || (in == NULL) || (lat == NULL)) {
        fprintf(stderr, "mpi_scale: rank %d: no memory for %zu B a pair\n",
                rank, bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (call = 0; call < warmup + reps; ++call) {
        for (p = 0; p < nprocs; ++p) {
            for (i = 0; i < words; ++i) {
                out[p * words + i] = a2a_word(rank, p, call, i);
            }
        }
        /* (no valid word has all bits set: src < 65535) */
        memset(in, 0xff, nprocs * bytes);
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        MPI_Alltoall(out, (int)bytes, MPI_BYTE, in, (int)bytes, MPI_BYTE,
                     MPI_COMM_WORLD);
        t = MPI_Wtime() - t;
        if (call >= warmup) {
            lat[call - warmup] = t * 1e6;
        }
        for (p = 0; p < nprocs; ++p) {
            for (i = 0; (i < words) &&
                        (in[p * words + i] == a2a_word(p, rank, call, i)); ++i) {
            }
            if ((i < words) && ((*errors)++ < 3)) {
                fprintf(stderr, "mpi_scale: rank %d: alltoall %zu B, call %u: "
                        "the block from rank %d is not as sent (word %zu is "
                        "%#llx, not %#llx)\n", rank, bytes, call, p, i,
                        (unsigned long long)in[p * words + i],
                        (unsigned long long)a2a_word(p, rank, call, i));
            }
        }
    }
    med = median(lat, (int)reps);
    free(out);
    free(in);
    free(lat);
    return med;
}

/* --- MPI_Fetch_and_op --------------------------------------------------- */

/* ROUNDS adds to every other rank's counter; this rank's median op time
 * (usec), what it found wrong in *errors. */
static double fetch_and_op(unsigned rounds, long *errors)
{
    unsigned ops = (rounds - 1) * (nprocs - 1), n = 0, k;
    const uint64_t one = 1, want = (uint64_t)(nprocs - 1) * rounds;
    uint64_t *counter, got, *last = calloc(nprocs, sizeof(*last));
    double *lat = malloc(ops * sizeof(*lat)), t, med;
    volatile uint64_t *mine;
    MPI_Win win;
    int j, dst;

    if ((last == NULL) || (lat == NULL)) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    phase("MPI_Win_allocate");
    MPI_Win_allocate(sizeof(*counter), sizeof(*counter), MPI_INFO_NULL,
                     MPI_COMM_WORLD, &counter, &win);
    *counter = 0;
    /* (every counter 0 before any rank adds) */
    MPI_Barrier(MPI_COMM_WORLD);
    phase("MPI_Win_lock_all");
    MPI_Win_lock_all(0, win);
    phase("the fetch-and-op rounds (MPI_Fetch_and_op, MPI_Win_flush)");
    for (k = 0; k < rounds; ++k) {
        /* (each rank starts at its right-hand neighbour: the targets
         * spread, rather than all adding to rank 0 first) */
        for (j = 1; j < nprocs; ++j) {
            dst = (rank + j) % nprocs;
            t   = MPI_Wtime();
            MPI_Fetch_and_op(&one, &got, MPI_UINT64_T, dst, 0, MPI_SUM, win);
            MPI_Win_flush(dst, win);
            t = MPI_Wtime() - t;
            if (k > 0) {
                lat[n++] = t * 1e6;
            }
            /* this rank's earlier adds to DST all completed: a fetched
             * value not above the last is an add lost or done twice */
            if ((got >= want) || ((k > 0) && (got <= last[dst]))) {
                if ((*errors)++ < 3) {
                    fprintf(stderr, "mpi_scale: rank %d: fetch-and-op %u on "
                            "rank %d fetched %llu (the last %llu, the "
                            "counter ends at %llu)\n", rank, k, dst,
                            (unsigned long long)got,
                            (unsigned long long)last[dst],
                            (unsigned long long)want);
                }
            }
            last[dst] = got;
        }
    }
    phase("MPI_Win_flush_all and the barrier after the rounds");
    MPI_Win_flush_all(win);
    /* every rank's adds done; MPI_Win_sync makes them visible to this
     * rank's loads (the unified model osc ucx has) */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_sync(win);
    mine = counter;
    if (*mine != want) {
        ++*errors;
        fprintf(stderr, "mpi_scale: rank %d: its counter is %llu after the "
                "rounds, not %llu ((P - 1) * %u)\n", rank,
                (unsigned long long)*mine, (unsigned long long)want, rounds);
    }
    phase("MPI_Win_unlock_all, MPI_Win_free");
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
    med = median(lat, (int)ops);
    free(lat);
    free(last);
    return med;
}

/* --- main --------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: mpirun -np P mpi_scale [-r REPS] [-w WARMUP] "
            "[-s BYTES[,BYTES...]] [-k ROUNDS] [-b SECONDS]; mpi_scale -L\n");
    exit(2);
}

static unsigned number(const char *s, unsigned min, unsigned max)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);

    if ((*s == '\0') || (*end != '\0') || (v < min) || (v > max)) {
        fprintf(stderr, "mpi_scale: '%s': a number from %u to %u\n", s, min, max);
        usage();
    }
    return (unsigned)v;
}

int main(int argc, char **argv)
{
    unsigned reps = 20, warmup = 3, rounds = 20, n_sizes = 3, s;
    size_t sizes[MAX_SIZES] = { 8, 1024, 16384 };
    double rss_init, hwm_init, rss_end, hwm_end, v;
    long errors, a2a_errors = 0, fop_errors = 0, all;
    char extra[64], host[HOST_LEN] = "", dev[DEV_LEN], *tok, *list = NULL;
    int opt, list_only = 0;

    while ((opt = getopt(argc, argv, "r:w:s:k:b:L")) != -1) {
        switch (opt) {
        case 'r': reps     = number(optarg, 1, 10000); break;
        case 'w': warmup   = number(optarg, 0, 10000); break;
        case 'k': rounds   = number(optarg, 2, 100000); break;
        case 'b': budget_s = number(optarg, 1, 86400); break;
        case 's': list     = optarg; break;
        case 'L': list_only = 1; break;
        default:  usage();
        }
    }
    if (optind != argc) {
        usage();
    }
    if (list != NULL) {
        /* (a block's words are numbered in 16 bits: up to 512 KiB) */
        for (n_sizes = 0, tok = strtok(list, ","); tok != NULL;
             tok = strtok(NULL, ",")) {
            if (n_sizes == MAX_SIZES) {
                usage();
            }
            sizes[n_sizes++] = number(tok, 8, 524288);
            if (sizes[n_sizes - 1] % 8) {
                fprintf(stderr, "mpi_scale: -s %s: a multiple of 8\n", tok);
                usage();
            }
        }
    }
    if (list_only) {
        for (s = 0; s < n_sizes; ++s) {
            printf("alltoall_%zu us\n", sizes[s]);
        }
        printf("fetch_and_op us\nrss_init kB\nrss_end kB\nhwm_end kB\n");
        return 0;
    }

    arm_budget();
    MPI_Init(&argc, &argv);
    mpi_up = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    phase("the start");
    if ((nprocs < 2) || (nprocs > 65534) || (warmup + reps > 65535)) {
        if (rank == 0) {
            fprintf(stderr, "mpi_scale: 2 to 65534 ranks, and WARMUP + REPS "
                    "below 65536 (the checked words number them in 16 bits)\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    mem_kb(&rss_init, &hwm_init);

    for (s = 0; s < n_sizes; ++s) {
        char op[32];

        snprintf(op, sizeof(op), "alltoall_%zu", sizes[s]);
        phase(op);
        errors = 0;
        v      = alltoall(sizes[s], warmup, reps, &errors);
        a2a_errors += errors;
        snprintf(extra, sizeof(extra), "reps=%u errors=%ld", reps,
                 sum_at_0(errors));
        report(op, "us", v, extra);
    }

    errors = 0;
    v      = fetch_and_op(rounds, &errors);
    fop_errors = errors;
    phase("the reports");
    snprintf(extra, sizeof(extra), "ops=%u errors=%ld",
             (rounds - 1) * (nprocs - 1), sum_at_0(errors));
    report("fetch_and_op", "us", v, extra);

    /* memory: after the tests, the window freed; what MPI_Init left */
    mem_kb(&rss_end, &hwm_end);
    report("rss_init", "kB", (rss_init < 0) ? NAN : rss_init, "");
    report("rss_end", "kB", (rss_end < 0) ? NAN : rss_end, "");
    report("hwm_end", "kB", (hwm_end < 0) ? NAN : hwm_end, "");
    {
        double mem[4] = { rss_init, hwm_init, rss_end, hwm_end }, *all_mem;
        char *all_dev, *all_host;
        const char *d = getenv("UCX_NET_DEVICES");
        int r;

        snprintf(dev, sizeof(dev), "%s", (d != NULL) ? d : "-");
        gethostname(host, sizeof(host) - 1);
        all_mem  = malloc(nprocs * sizeof(mem));
        all_dev  = malloc(nprocs * DEV_LEN);
        all_host = malloc(nprocs * HOST_LEN);
        if ((all_mem == NULL) || (all_dev == NULL) || (all_host == NULL)) {
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        MPI_Gather(mem, 4, MPI_DOUBLE, all_mem, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        MPI_Gather(dev, DEV_LEN, MPI_CHAR, all_dev, DEV_LEN, MPI_CHAR, 0,
                   MPI_COMM_WORLD);
        MPI_Gather(host, HOST_LEN, MPI_CHAR, all_host, HOST_LEN, MPI_CHAR, 0,
                   MPI_COMM_WORLD);
        for (r = 0; (rank == 0) && (r < nprocs); ++r) {
            printf("mpi_scale np=%d rank=%d dev=%.*s host=%.*s rss_init_kb=%.0f "
                   "hwm_init_kb=%.0f rss_end_kb=%.0f hwm_end_kb=%.0f\n", nprocs,
                   r, DEV_LEN, &all_dev[r * DEV_LEN], HOST_LEN,
                   &all_host[r * HOST_LEN], all_mem[4 * r], all_mem[4 * r + 1],
                   all_mem[4 * r + 2], all_mem[4 * r + 3]);
        }
        free(all_mem);
        free(all_dev);
        free(all_host);
    }

    /* the verdict, the same on every rank (so every rank's exit says it) */
    errors = a2a_errors + fop_errors;
    MPI_Allreduce(&errors, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    a2a_errors = sum_at_0(a2a_errors);
    fop_errors = sum_at_0(fop_errors);
    if (rank == 0) {
        if (all == 0) {
            printf("result ok\n");
        } else {
            printf("result FAIL %ld alltoall blocks not as sent, %ld wrong "
                   "fetch-and-op values or counters (stderr has the first)\n",
                   a2a_errors, fop_errors);
        }
        fflush(stdout);
    }
    phase("MPI_Finalize");
    MPI_Finalize();
    return (all != 0) ? 1 : 0;
}
