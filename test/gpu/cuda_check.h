/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test/gpu/cuda_dmabuf: what its two files share. cuda_dmabuf.c has main(),
 * the driver checks and the UCT checks; cuda_ucp.c the UCP check. Built
 * with -DSYNCMEM_DRIVER_ONLY (driver checks only), it needs just cuda.h.
 */
#ifndef SYNCMEM_TEST_CUDA_CHECK_H_
#define SYNCMEM_TEST_CUDA_CHECK_H_

#include <cuda.h>
#ifndef SYNCMEM_DRIVER_ONLY
#include <uct/api/uct.h>
#endif

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* In cuda_dmabuf.c, next to main() */
extern int num_ok, num_failed;
extern int wait_s;         /* SYNCMEM_TEST_WAIT_S */

/* "ok ...", "SKIP ...: why", "FAIL ..." lines; die() ends the run. */
#define REPORT_FN(_name, _word, _then) \
    static inline void __attribute__((format(printf, 1, 2))) \
    _name(const char *fmt, ...) \
    { \
        va_list ap; \
        va_start(ap, fmt); \
        printf("%s ", _word); \
        vprintf(fmt, ap); \
        printf("\n"); \
        va_end(ap); \
        _then; \
    }
static inline void die(const char *fmt, ...) __attribute__((noreturn));
REPORT_FN(ok,   "ok",   ++num_ok)
REPORT_FN(skip, "SKIP", )
REPORT_FN(fail, "FAIL", ++num_failed)
REPORT_FN(die,  "FAIL", exit(1))    /* no going on: CUDA error, timeout */
#undef REPORT_FN

/* In a check: report a failure and go to the check's cleanup (out:). */
#define EXPECT(_cond, ...) \
    do { \
        if (!(_cond)) { \
            fail(__VA_ARGS__); \
            goto out; \
        } \
    } while (0)

#define CU(_call) \
    do { \
        CUresult _res = (_call); \
        const char *_str = "?"; \
        if (_res != CUDA_SUCCESS) { \
            cuGetErrorString(_res, &_str); \
            die("%s:%d: %s: %s", __FILE__, __LINE__, #_call, _str); \
        } \
    } while (0)

#ifndef SYNCMEM_DRIVER_ONLY
#define CANARY    (-1)   /* the data "seed" of the neighbours: all 0xc5 */

static inline time_t deadline(void)
{
    return time(NULL) + wait_s;
}

/* Past the deadline the run ends: a request still points at the waiter. */
static inline void check_deadline(time_t until, const char *what)
{
    if (time(NULL) > until) {
        die("gave up waiting for %s after %d s (SYNCMEM_TEST_WAIT_S)", what,
            wait_s);
    }
}

/* The test data numbered seed (CANARY: the neighbours' bytes). */
static inline void pattern(uint8_t *buf, size_t size, int seed)
{
    size_t j;

    for (j = 0; j < size; ++j) {
        buf[j] = (seed == CANARY) ? 0xc5 :
                 (uint8_t)((seed + 1) * 0x25 + j * 7 + (j >> 8));
    }
}

/* The UCT component of that name in the UCX loaded, or NULL. */
static inline uct_component_h find_component(const char *name)
{
    uct_component_attr_t attr = { .field_mask = UCT_COMPONENT_ATTR_FIELD_NAME };
    uct_component_h *components, found = NULL;
    unsigned i, count;

    if (uct_query_components(&components, &count) != UCS_OK) {
        return NULL;
    }
    for (i = 0; i < count; ++i) {
        if ((uct_component_query(components[i], &attr) == UCS_OK) &&
            !strcmp(attr.name, name)) {
            found = components[i];
        }
    }
    uct_release_component_list(components);
    return found;
}

/* cuda_ucp.c: tag, put and get between CUDA buffers over UCP on port dev,
 * 8 B .. 64 MiB. */
void ucp_check(const char *dev);
#endif

#endif
