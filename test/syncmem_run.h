/* SPDX-License-Identifier: BSD-3-Clause */
// Run a command with the module loaded the documented way (syncmem-run).
#ifndef SYNCMEM_TEST_RUN_H_
#define SYNCMEM_TEST_RUN_H_

#include <cstdio>
#include <string>

// Output (stdout and stderr) of 'syncmem-run CMD'; exit status in *status_p.
static inline std::string syncmem_run(const std::string &cmd,
                                      int *status_p = nullptr)
{
    std::string full = "'" SYNCMEM_BUILDDIR "/contrib/tools/syncmem-run' " +
                       cmd + " 2>&1";
    std::string out;
    char buf[4096];
    size_t n;

    FILE *p = popen(full.c_str(), "r");
    if (p == nullptr) {
        return out;
    }
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) {
        out.append(buf, n);
    }
    int status = pclose(p);
    if (status_p != nullptr) {
        *status_p = status;
    }
    return out;
}

#endif
