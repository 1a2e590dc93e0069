// SPDX-License-Identifier: BSD-3-Clause
// When syncmem_cuda_driver.c starts using the CUDA driver: only once the process
// has loaded it and initialised it itself. syncmem never runs cuInit() (so
// CUDA works in the fork() children of a process that loaded it), and a
// process that never loads it pays no driver call for host registrations. Run in a child process each, against a stand-in driver
// (cuda_stand_in.c) that counts cuInit(); the real driver's turn is
// test/gpu/cuda_reg.c.
#include <gtest/gtest.h>

extern "C" {
#include "uct_syncmem/syncmem_ep.h"
#include "uct_syncmem/syncmem_qp.h"
#include "uct_syncmem/syncmem_hooks.h"
}

#include <cstring>
#include <string>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

const char *stand_in = SYNCMEM_BUILDDIR "/test/stand-in/libcuda.so.1";

// Runs fn in a child; what it returns is the child's exit status (0: ok).
int in_child(int (*fn)())
{
    pid_t pid = fork();
    if (pid == 0) {
        _exit(fn());
    }
    int status = -1;
    EXPECT_EQ(pid, waitpid(pid, &status, 0));   // the child never waits
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int libcuda_loaded()
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib != nullptr) {
        dlclose(lib);
    }
    return lib != nullptr;
}

// An MD's CUDA part and host memory asked about: no driver loaded.
int never_loaded()
{
    static char host[4096];
    uct_syncmem_md_t md = {};
    uct_syncmem_mem_t *memh;

    if (uct_syncmem_cuda_init(&md, 16, 1ul << 30) != UCS_OK) {
        return 1;
    }
    if (uct_syncmem_cuda_owns(host) || uct_syncmem_cuda_in_use()) {
        return 2;
    }
    if (uct_syncmem_cuda_reg(&md, host, sizeof(host), UCS_LOG_LEVEL_DEBUG,
                             &memh) != UCS_ERR_NO_ELEM) {
        return 3;
    }
    if (libcuda_loaded()) {
        return 4;   // syncmem loaded it
    }
    uct_syncmem_cuda_cleanup(&md);
    return 0;
}

typedef int (*cu_init_t)(unsigned);

// The process loads the driver after the MD was opened, and initialises it
// later still: syncmem uses it from then on, and never initialises it.
int loaded_later()
{
    static char host[4096];
    uct_syncmem_md_t md = {};

    if (uct_syncmem_cuda_init(&md, 16, 1ul << 30) != UCS_OK) {
        return 1;
    }
    if (uct_syncmem_cuda_in_use()) {
        return 2;
    }
    void *lib = dlopen(stand_in, RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) {
        return 3;
    }
    int *inits       = (int*)dlsym(lib, "syncmem_stand_in_inits");
    cu_init_t cuinit = (cu_init_t)dlsym(lib, "cuInit");
    if ((inits == nullptr) || (cuinit == nullptr) || (*inits != 0)) {
        return 4;
    }
    // loaded, not initialised: no CUDA memory exists, none is asked for
    if (uct_syncmem_cuda_in_use() || uct_syncmem_cuda_owns(host) ||
        (*inits != 0)) {
        return 5;
    }
    if (cuinit(0) != 0) {   // the application's
        return 6;
    }
    // used from now on; host memory is still host memory
    if (!uct_syncmem_cuda_in_use() || uct_syncmem_cuda_owns(host) ||
        !uct_syncmem_cuda_in_use() || (*inits != 1)) {
        return 7;
    }
    uct_syncmem_cuda_cleanup(&md);
    return 0;
}

// A process that loads the driver and opens an MD, then forks before it
// uses CUDA: the child can initialise CUDA and use it (CuPy, -lcuda). The
// stand-in, as the driver, refuses cuInit() in the child of a process that
// had initialised it.
int forked_before_use()
{
    uct_syncmem_md_t md = {};

    void *lib = dlopen(stand_in, RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) {
        return 1;
    }
    cu_init_t cuinit = (cu_init_t)dlsym(lib, "cuInit");
    if ((cuinit == nullptr) ||
        (uct_syncmem_cuda_init(&md, 16, 1ul << 30) != UCS_OK) ||
        uct_syncmem_cuda_in_use()) {
        return 2;
    }
    pid_t pid = fork();
    if (pid == 0) {
        _exit(((cuinit(0) == 0) && uct_syncmem_cuda_in_use()) ? 0 : 3);
    }
    int status = -1;
    if ((waitpid(pid, &status, 0) != pid) || !WIFEXITED(status)) {
        return 4;
    }
    uct_syncmem_cuda_cleanup(&md);
    return WEXITSTATUS(status);
}

} // namespace

// Where the driver can be found (the stand-in on LD_LIBRARY_PATH, which a
// process reads as it starts: so this test runs itself again with it).
TEST(cuda_load, not_by_a_process_that_never_loads_it)
{
    if (getenv("SYNCMEM_TEST_CUDA_LOAD_CHILD") != nullptr) {
        ASSERT_EQ(0, never_loaded());
        return;
    }

    ASSERT_EQ(0, access(stand_in, R_OK)) << stand_in << ": not built";
    std::string path(stand_in, strrchr(stand_in, '/'));
    const char *ld_path = getenv("LD_LIBRARY_PATH");  // libtool's, say
    if (ld_path != nullptr) {
        path = path + ":" + ld_path;
    }
    std::string cmd = "env SYNCMEM_TEST_CUDA_LOAD_CHILD=1 LD_LIBRARY_PATH='" +
                      path + "' /proc/" + std::to_string(getpid()) +
                      "/exe --gtest_filter=" +
                      testing::UnitTest::GetInstance()->current_test_info()
                              ->test_suite_name() + "." +
                      testing::UnitTest::GetInstance()->current_test_info()
                              ->name() + " 2>&1";
    std::string out;
    char buf[4096];
    size_t n;
    FILE *p = popen(cmd.c_str(), "r");
    ASSERT_NE(nullptr, p);
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) {
        out.append(buf, n);
    }
    EXPECT_EQ(0, pclose(p)) << out;
    // it ran (one test, passed), and the driver was findable there
    EXPECT_NE(std::string::npos, out.find("[  PASSED  ] 1 test.")) << out;
}

TEST(cuda_load, once_the_process_has_loaded_and_initialised_it)
{
    ASSERT_EQ(0, access(stand_in, R_OK)) << stand_in << ": not built";
    ASSERT_EQ(0, in_child(loaded_later));
}

TEST(cuda_load, a_fork_child_of_a_process_that_loaded_it_can_use_it)
{
    ASSERT_EQ(0, access(stand_in, R_OK)) << stand_in << ": not built";
    ASSERT_EQ(0, in_child(forked_before_use));
}
