/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test/gpu/cuda_reg: syncmem's CUDA registration path (syncmem_cuda.c) on
 * a GPU machine, with the HCA replaced by reg_stub.c: what it hands to
 * ibv_reg_dmabuf_mr for each kind of CUDA memory, its cache by buffer id,
 * how it lets go of freed buffers, and what it costs.
 *
 * The first two cases run before the program has initialised CUDA:
 * syncmem must not load the driver into a process that has not (host
 * memory goes to the host path without a driver call), nor initialise it
 * in one that has loaded it, so that the process's fork children can
 * still use CUDA. The program then initialises the driver itself, as an
 * application does, and runs the rest (cuda_reg_memory.c, cuda_reg_vmm.c,
 * then cuda_reg_cache.c).
 *
 * Each case prints "ok <case>: ..." or "FAIL <case>: ..." lines, and every
 * case runs; one that cannot run on this GPU prints "SKIP <case>: why".
 * With no driver or no GPU: "SKIP gpu: why" and exit 77; a driver that
 * fails otherwise, or a GPU that cannot export dma-bufs, is a failure.
 * Otherwise exit 1 if a case failed, else 0. A case still running after
 * CUDA_REG_TIMEOUT seconds fails, and ends the program.
 *
 * usage: cuda_reg   (test/gpu/cuda-reg.test runs it; test/gpu/pack.sh
 *                    takes it to a GPU machine)
 */
#include "cuda_reg.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


struct cuda_reg_driver cu;
CUdevice cuda_reg_dev;
size_t   cuda_reg_page;

/* The case running. */
static struct {
    const char      *name;
    unsigned        failed;      /* checks failed */
    int             skipped;
    unsigned        live;        /* MRs at its start */
    char            detail[512];
    pthread_mutex_t lock;        /* a case's threads fail it too */
} cuda_reg_case = {
    .lock = PTHREAD_MUTEX_INITIALIZER
};

#define CUDA_REG_MAX_FAILS 20  /* FAIL lines a case prints */

static unsigned cuda_reg_passed, cuda_reg_failed, cuda_reg_skipped;


void cuda_reg_fail(const char *fmt, ...)
{
    int saved_errno = errno;   /* for %m */
    va_list ap;

    pthread_mutex_lock(&cuda_reg_case.lock);
    /* a bug hit in a loop would say the same a thousand times */
    if (cuda_reg_case.failed < CUDA_REG_MAX_FAILS) {
        printf("FAIL %s: ", cuda_reg_case.name);
        errno = saved_errno;
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
    } else if (cuda_reg_case.failed == CUDA_REG_MAX_FAILS) {
        printf("FAIL %s: more failures, not shown\n", cuda_reg_case.name);
    }
    ++cuda_reg_case.failed;
    pthread_mutex_unlock(&cuda_reg_case.lock);
}

void cuda_reg_skip(const char *fmt, ...)
{
    va_list ap;

    printf("SKIP %s: ", cuda_reg_case.name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    cuda_reg_case.skipped = 1;
}

void cuda_reg_detail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(cuda_reg_case.detail, sizeof(cuda_reg_case.detail), fmt, ap);
    va_end(ap);
}

static void cuda_reg_write(const char *str)
{
    if (write(STDOUT_FILENO, str, strlen(str)) < 0) {
        /* nowhere to say it */
    }
}

/* A case that hangs (a lock never released, a driver call that never
 * returns) cannot be unwound: say which, and end the program. */
static void cuda_reg_timeout(int signo)
{
    cuda_reg_write("FAIL ");
    cuda_reg_write(cuda_reg_case.name);
    cuda_reg_write(": still running after " UCS_PP_MAKE_STRING(
                   CUDA_REG_TIMEOUT) " s\n");
    _exit(1);
}

static void cuda_reg_case_begin(const char *name)
{
    cuda_reg_case.name      = name;
    cuda_reg_case.failed    = 0;
    cuda_reg_case.skipped   = 0;
    cuda_reg_case.detail[0] = '\0';
    cuda_reg_case.live      = reg_stub_live();
    reg_stub_want_access    = 0;
    alarm(CUDA_REG_TIMEOUT);
}

static void cuda_reg_case_end(void)
{
    alarm(0);
    /* every case closes its MDs: their MRs must all be gone */
    EXPECT(reg_stub_live() == cuda_reg_case.live, "%u MR(s) left registered"
           " after the case closed its MDs",
           reg_stub_live() - cuda_reg_case.live);
    if (cuda_reg_case.failed) {
        ++cuda_reg_failed;
    } else if (cuda_reg_case.skipped) {
        ++cuda_reg_skipped;
    } else {
        printf("ok %s: %s\n", cuda_reg_case.name, cuda_reg_case.detail);
        ++cuda_reg_passed;
    }
}

static void cuda_reg_run(const cuda_reg_case_t *c)
{
    cuda_reg_case_begin(c->name);
    c->run();
    cuda_reg_case_end();
}

int cuda_reg_cu_ok(CUresult res, const char *what)
{
    const char *str = NULL;

    if (res == CUDA_SUCCESS) {
        return 1;
    }
    if ((cu.cuGetErrorString == NULL) ||
        (cu.cuGetErrorString(res, &str) != CUDA_SUCCESS) || (str == NULL)) {
        str = "unknown error";
    }
    cuda_reg_fail("%s: %s (%d)", what, str, res);
    return 0;
}

int cuda_reg_dev_attr(CUdevice_attribute attr)
{
    int value = 0;

    return (cu.cuDeviceGetAttribute(&value, attr, cuda_reg_dev) ==
            CUDA_SUCCESS) ? value : 0;
}

int cuda_reg_range(CUdeviceptr ptr, CUdeviceptr *start, size_t *size,
                   unsigned long long *buffer_id)
{
    return CU(cu.cuPointerGetAttribute(start,
                                       CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                       ptr)) &&
           CU(cu.cuPointerGetAttribute(size, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                       ptr)) &&
           CU(cu.cuPointerGetAttribute(buffer_id,
                                       CU_POINTER_ATTRIBUTE_BUFFER_ID, ptr));
}

size_t cuda_reg_mem_back(size_t want, size_t slack)
{
    size_t free_bytes = cuda_reg_mem_free();
    int i;

    for (i = 0; (i < 200) && (free_bytes + slack < want); ++i) {
        usleep(10000);
        free_bytes = cuda_reg_mem_free();
    }
    return free_bytes;
}

int cuda_reg_alloc_range(CUdeviceptr ptr, CUdeviceptr *base, size_t *size)
{
    return CU(cu.cuMemGetAddressRange(base, size, ptr));
}

int cuda_reg_mr_is(const uct_syncmem_mem_t *memh, CUdeviceptr start,
                   size_t size, const char *what)
{
    return EXPECT(((uintptr_t)memh->mr->addr == start) &&
                  (memh->mr->length == size), "%s: the MR is 0x%lx+%zu,"
                  " not 0x%llx+%zu", what, (uintptr_t)memh->mr->addr,
                  memh->mr->length, start, size);
}

size_t cuda_reg_mem_free(void)
{
    size_t free_bytes = 0, total;

    return CU(cu.cuMemGetInfo(&free_bytes, &total)) ? free_bytes : 0;
}

uct_syncmem_md_t *cuda_reg_md_open(unsigned max_unused,
                                   size_t max_unused_bytes,
                                   enum ibv_atomic_cap atomic_cap)
{
    uct_syncmem_md_t *md = calloc(1, sizeof(*md));
    ucs_status_t status;

    if (!EXPECT(md != NULL, "out of memory")) {
        return NULL;
    }
    snprintf(md->name, sizeof(md->name), "fake0");
    md->dmabuf              = 1;
    md->peermem             = 0;
    md->dev_attr.atomic_cap = atomic_cap;
    status = uct_syncmem_cuda_init(md, max_unused, max_unused_bytes);
    if (!EXPECT(status == UCS_OK, "uct_syncmem_cuda_init: %s",
                ucs_status_string(status))) {
        free(md);
        return NULL;
    }
    return md;
}

void cuda_reg_md_close(uct_syncmem_md_t *md)
{
    if (md != NULL) {
        uct_syncmem_cuda_cleanup(md);
        free(md);
    }
}

ucs_status_t cuda_reg_try(uct_syncmem_md_t *md, CUdeviceptr ptr,
                          size_t length, uct_syncmem_mem_t **memh_p)
{
    /* the cases expect the errors they ask for: no log */
    return uct_syncmem_cuda_reg(md, cuda_reg_ptr(ptr), length,
                                UCS_LOG_LEVEL_DEBUG, memh_p);
}

/* Registers ptr+length: 1 if it worked, and the MR covers the buffer. */
int cuda_reg_reg(uct_syncmem_md_t *md, CUdeviceptr ptr, size_t length,
                 uct_syncmem_mem_t **memh_p)
{
    ucs_status_t status;
    struct ibv_mr *mr;

    *memh_p = NULL;
    status  = uct_syncmem_cuda_reg(md, cuda_reg_ptr(ptr), length,
                                   UCS_LOG_LEVEL_ERROR, memh_p);
    if (!EXPECT(status == UCS_OK, "reg 0x%llx+%zu: %s", ptr, length,
                ucs_status_string(status))) {
        *memh_p = NULL;
        return 0;
    }
    mr = (*memh_p)->mr;
    return EXPECT((*memh_p)->flags & UCT_SYNCMEM_MEM_FLAG_CUDA, "memh of"
                  " 0x%llx has flags 0x%x, not CUDA's", ptr,
                  (*memh_p)->flags) &&
           EXPECT((ptr >= (uintptr_t)mr->addr) &&
                  (ptr + length <= (uintptr_t)mr->addr + mr->length),
                  "the MR 0x%lx+%zu does not cover 0x%llx+%zu",
                  (uintptr_t)mr->addr, mr->length, ptr, length);
}

void cuda_reg_dereg(uct_syncmem_md_t *md, uct_syncmem_mem_t **memh_p)
{
    if (*memh_p != NULL) {
        uct_syncmem_cuda_dereg(md, *memh_p);
        *memh_p = NULL;
    }
}

void cuda_reg_free(CUdeviceptr *dptr)
{
    if (*dptr != 0) {
        CU(cu.cuMemFree(*dptr));
        *dptr = 0;
    }
}

static int cuda_reg_libcuda_loaded(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

    if (lib == NULL) {
        return 0;
    }
    dlclose(lib);
    return 1;
}

#define CUDA_REG_STR(_x)    #_x
#define CUDA_REG_SYM(_name) CUDA_REG_STR(_name)  /* after cuda.h's mapping */

/* Loads the driver and makes GPU 0's primary context current: 0, or 77
 * (no driver, no GPU) or 1 (the driver fails) with why. */
static int cuda_reg_driver_open(char *why, size_t max)
{
    const char *str = "unknown error";
    CUcontext ctx;
    CUresult res;
    int count;
    void *lib;

    lib = dlopen("libcuda.so.1", RTLD_NOW);  /* never closed */
    if (lib == NULL) {
        snprintf(why, max, "no CUDA driver: %s", dlerror());
        return 77;
    }

#define CUDA_REG_LOAD(_name) \
    if ((cu._name == NULL) && \
        ((cu._name = dlsym(lib, CUDA_REG_SYM(_name))) == NULL)) { \
        snprintf(why, max, "libcuda.so.1 has no %s (a driver older than" \
                 " the CUDA 13 headers this was built with?)", \
                 CUDA_REG_SYM(_name)); \
        return 1; \
    }
    /* a driver with no GPU may have little else */
    CUDA_REG_LOAD(cuInit)
    CUDA_REG_LOAD(cuGetErrorString)
    CUDA_REG_LOAD(cuDeviceGetCount)
    res = cu.cuInit(0);
    if (res != CUDA_SUCCESS) {
        cu.cuGetErrorString(res, &str);
        snprintf(why, max, "cuInit(): %s", str);
        /* no GPU is a skip; a driver that fails otherwise is not */
        return (res == CUDA_ERROR_NO_DEVICE) ? 77 : 1;
    }
    count = 0;
    res   = cu.cuDeviceGetCount(&count);
    if (res != CUDA_SUCCESS) {
        cu.cuGetErrorString(res, &str);
        snprintf(why, max, "cuDeviceGetCount(): %s", str);
        return 1;
    }
    if (count == 0) {
        snprintf(why, max, "the CUDA driver sees no GPU");
        return 77;
    }
    CUDA_REG_FUNCS(CUDA_REG_LOAD)
#undef CUDA_REG_LOAD

    res = cu.cuDeviceGet(&cuda_reg_dev, 0);
    if (res == CUDA_SUCCESS) {
        res = cu.cuDevicePrimaryCtxRetain(&ctx, cuda_reg_dev);
    }
    if (res == CUDA_SUCCESS) {
        res = cu.cuCtxSetCurrent(ctx);
    }
    if (res != CUDA_SUCCESS) {
        cu.cuGetErrorString(res, &str);
        snprintf(why, max, "GPU 0's primary context: %s", str);
        return 1;
    }
    return 0;
}

/* Before the program loads libcuda: host memory is not CUDA memory, and
 * asking costs no driver: syncmem leaves libcuda unloaded. What asking
 * costs is what every mem_reg of a process without CUDA pays. */
static void cuda_reg_case_no_driver(void)
{
    char host[64];
    uct_syncmem_cuda_info_t info;
    uct_syncmem_mem_t *memh;
    uct_syncmem_md_t *md;
    struct timespec t[2];
    ucs_status_t status;
    unsigned i;

    md = cuda_reg_md_open(16, UCS_GBYTE, IBV_ATOMIC_HCA);
    if (md == NULL) {
        return;
    }
    EXPECT(!uct_syncmem_cuda_in_use(), "in use before libcuda was loaded");
    EXPECT(uct_syncmem_cuda_can_reg(md), "can_reg 0 on an MD that takes"
           " dma-bufs, before the driver is loaded");
    EXPECT(!uct_syncmem_cuda_owns(host), "owns a host buffer");
    clock_gettime(CLOCK_MONOTONIC, &t[0]);
    for (i = 0; i < 10000; ++i) {
        uct_syncmem_cuda_owns(host);
    }
    clock_gettime(CLOCK_MONOTONIC, &t[1]);
    status = uct_syncmem_cuda_reg(md, host, sizeof(host), UCS_LOG_LEVEL_ERROR,
                                  &memh);
    EXPECT(status == UCS_ERR_NO_ELEM, "reg of a host buffer: %s, not %s",
           ucs_status_string(status), ucs_status_string(UCS_ERR_NO_ELEM));
    status = uct_syncmem_cuda_mem_info(host, &info);
    EXPECT(status == UCS_ERR_NO_ELEM, "mem_info of a host buffer: %s",
           ucs_status_string(status));
    cuda_reg_md_close(md);

    EXPECT(!cuda_reg_libcuda_loaded(), "syncmem loaded libcuda.so.1 into a"
           " process that had not");
    cuda_reg_detail("a host buffer is NO_ELEM, and libcuda.so.1 stays"
                    " unloaded; owns takes %.0f ns",
                    ((t[1].tv_sec - t[0].tv_sec) * 1e9 +
                     (t[1].tv_nsec - t[0].tv_nsec)) / 10000);
}

/* The process loads libcuda (as one linked with -lcuda, or CuPy, has it)
 * and uses syncmem, but not CUDA: syncmem must leave the driver
 * uninitialised, and a fork child must be able to use CUDA. 0 if it
 * could; 77 with why when there is no driver or no GPU here. */
static int cuda_reg_case_fork(char *why, size_t max)
{
    static char host[64];
    CUresult (*get_count)(int *count);
    uct_syncmem_mem_t *memh;
    uct_syncmem_md_t *md;
    CUdeviceptr dptr;
    int fds[2], status, rc, i, count;
    ucs_status_t reg;
    ssize_t len;
    pid_t pid;
    void *lib;

    lib = dlopen("libcuda.so.1", RTLD_NOW);  /* never closed */
    if (lib == NULL) {
        snprintf(why, max, "no CUDA driver: %s", dlerror());
        cuda_reg_case.skipped = 1;   /* main says why: "SKIP gpu" */
        return 77;
    }
    get_count = dlsym(lib, "cuDeviceGetCount");
    md        = cuda_reg_md_open(16, UCS_GBYTE, IBV_ATOMIC_HCA);
    if ((md == NULL) || !EXPECT(get_count != NULL, "no cuDeviceGetCount")) {
        cuda_reg_md_close(md);
        return 1;
    }
    EXPECT(!uct_syncmem_cuda_in_use(), "in use before the program"
           " initialised CUDA");
    reg = uct_syncmem_cuda_reg(md, host, sizeof(host), UCS_LOG_LEVEL_ERROR,
                               &memh);
    EXPECT(reg == UCS_ERR_NO_ELEM, "a host buffer: %s, not NO_ELEM",
           ucs_status_string(reg));
    cuda_reg_md_close(md);
    /* the driver's documented answer before cuInit() */
    EXPECT(get_count(&count) == CUDA_ERROR_NOT_INITIALIZED, "the driver is"
           " initialised: syncmem called cuInit()");

    if (!EXPECT(pipe(fds) == 0, "pipe: %m")) {
        return 1;
    }
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        close(fds[0]);
        rc = cuda_reg_driver_open(why, max);
        if ((rc == 0) && (cu.cuMemAlloc(&dptr, UCS_MBYTE) != CUDA_SUCCESS)) {
            snprintf(why, max, "cuMemAlloc() failed");
            rc = 1;
        } else if ((rc == 0) && (cu.cuMemFree(dptr) != CUDA_SUCCESS)) {
            snprintf(why, max, "cuMemFree() failed");
            rc = 1;
        }
        if (write(fds[1], why, strlen(why)) < 0) {
            rc = 1;
        }
        _exit(rc);
    }
    close(fds[1]);
    if (!EXPECT(pid > 0, "fork: %m")) {
        close(fds[0]);
        return 1;
    }

    /* the child's driver may hang: wait for it only so long */
    for (i = 0; (i < 100 * (CUDA_REG_TIMEOUT - 5)) &&
                (waitpid(pid, &status, WNOHANG) == 0); ++i) {
        usleep(10000);
    }
    if (i == 100 * (CUDA_REG_TIMEOUT - 5)) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        cuda_reg_fail("the child still ran after %d s: killed",
                      CUDA_REG_TIMEOUT - 5);
        close(fds[0]);
        return 1;
    }
    len = read(fds[0], why, max - 1);
    why[(len > 0) ? len : 0] = '\0';
    close(fds[0]);

    rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (rc == 77) {
        cuda_reg_case.skipped = 1;   /* main says why: "SKIP gpu" */
        return 77;
    }
    if (EXPECT(rc == 0, "the child could not use CUDA (exit %d): %s", rc,
               why)) {
        cuda_reg_detail("libcuda loaded and syncmem used, not initialised;"
                        " a fork child allocated and freed CUDA memory");
    }
    return rc;
}

static void cuda_reg_summary(void)
{
    printf("cuda_reg: %u passed, %u failed, %u skipped\n", cuda_reg_passed,
           cuda_reg_failed, cuda_reg_skipped);
}

int main(void)
{
    char why[256] = "", name[128] = "";
    const cuda_reg_case_t *c;
    int rc, fork_rc, version = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    cuda_reg_page = ucs_get_page_size();
    signal(SIGALRM, cuda_reg_timeout);

    cuda_reg_case_begin("no-driver");
    cuda_reg_case_no_driver();
    cuda_reg_case_end();

    cuda_reg_case_begin("fork");
    rc = cuda_reg_case_fork(why, sizeof(why));
    cuda_reg_case_end();

    fork_rc = rc;
    rc      = cuda_reg_driver_open(why, sizeof(why));
    if ((rc == 0) && (fork_rc == 77)) {
        printf("FAIL fork: the child saw no GPU, this process does\n");
        ++cuda_reg_failed;
    }
    if ((rc == 0) &&
        !cuda_reg_dev_attr(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)) {
        snprintf(why, sizeof(why), "GPU 0 cannot export dma-bufs (the NVIDIA"
                 " open kernel modules can), which is all syncmem registers"
                 " without a peer-memory module");
        rc = 1;
    }
    if (rc != 0) {
        printf("%s gpu: %s\n", (rc == 77) ? "SKIP" : "FAIL", why);
        cuda_reg_failed += rc != 77;
        cuda_reg_summary();
        return cuda_reg_failed ? 1 : 77;
    }

    cu.cuDeviceGetName(name, sizeof(name), cuda_reg_dev);
    cu.cuDriverGetVersion(&version);
    printf("# GPU 0: %s, CUDA driver %d.%d, host page %zu bytes\n", name,
           version / 1000, (version % 1000) / 10, cuda_reg_page);

    for (c = cuda_reg_memory_cases; c->name != NULL; ++c) {
        cuda_reg_run(c);
    }
    for (c = cuda_reg_vmm_cases; c->name != NULL; ++c) {
        cuda_reg_run(c);
    }
    for (c = cuda_reg_cache_cases; c->name != NULL; ++c) {
        cuda_reg_run(c);
    }
    cuda_reg_summary();
    return cuda_reg_failed ? 1 : 0;
}
