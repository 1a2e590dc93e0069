// SPDX-License-Identifier: BSD-3-Clause
// The UCX libraries actually loaded at run time are the ones configure
// chose (UCX_LIBDIR): a build against a UCX in its own prefix
// (--with-ucx=PREFIX) that silently runs on the system's UCX, or mixes the
// two, fails here. Holds for the system's UCX too (UCX_LIBDIR is then
// Debian's libdir).
#include <gtest/gtest.h>

#include "test/syncmem_run.h"

#include <uct/api/uct.h>
#include <ucs/type/status.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <string>

namespace {

std::string real_dir(const std::string &path)
{
    char buf[PATH_MAX];
    return realpath(path.c_str(), buf) != nullptr ? std::string(buf) : path;
}

std::string dir_of(const std::string &path)
{
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string base_of(const std::string &path)
{
    return path.substr(path.rfind('/') + 1);
}

// UCX's libraries (libucs.so.0, ...) and its modules (ucx/libuct_ib.so.0,
// ...), but not our own module.
const std::regex ucx_lib("lib(ucs|uct|ucm|ucp)(_signal)?\\.so(\\.[0-9]+)*");
const std::regex ucx_module("lib(ucs|uct|ucm|ucp)_[a-z0-9_]+\\.so(\\.[0-9]+)*");

bool is_ours(const std::string &base)
{
    return base.rfind("libuct_syncmem", 0) == 0;  // .so and _tl.so
}

// Check each UCX object against the libdir and its ucx/ module directory.
// Returns the number of core libraries and modules seen.
void check_paths(const std::set<std::string> &paths, const char *what,
                 int *libs, int *modules)
{
    const std::string libdir = real_dir(UCX_LIBDIR);
    *libs = *modules = 0;
    for (const std::string &path : paths) {
        std::string base = base_of(path);
        if (is_ours(base)) {
            continue;
        }
        std::string dir  = real_dir(dir_of(path));
        std::string want;
        if (std::regex_match(base, ucx_lib)) {
            want = libdir;
            ++*libs;
        } else if (std::regex_match(base, ucx_module)) {
            want = libdir + "/ucx";
            ++*modules;
        } else {
            continue;
        }
        bool ok = (dir == want);
        printf("%s %s: %s from %s\n", ok ? "PASS" : "FAIL", what, base.c_str(),
               dir.c_str());
        EXPECT_EQ(want, dir) << what << " loaded " << path << ", not the copy in "
                             << want << " that configure chose";
    }
}

} // namespace

// This process: libucs and libuct through the test's own link, UCX's
// modules through uct_query_components.
TEST(loader, ucx_libraries_come_from_the_configured_libdir)
{
    uct_component_h *components;
    unsigned num;
    ASSERT_EQ(UCS_OK, uct_query_components(&components, &num));
    uct_release_component_list(components);
    ASSERT_STRNE("", ucs_status_string(UCS_OK));

    std::set<std::string> paths;
    std::ifstream maps("/proc/self/maps");
    ASSERT_TRUE(maps.good()) << "cannot read /proc/self/maps";
    std::string line;
    while (std::getline(maps, line)) {
        size_t slash = line.find('/');
        if (slash != std::string::npos) {
            paths.insert(line.substr(slash));
        }
    }

    int libs, modules;
    check_paths(paths, "mapped", &libs, &modules);
    EXPECT_GE(libs, 2) << "libucs and libuct are not both mapped";
    EXPECT_GE(modules, 1) << "no UCX module (e.g. ucx/libuct_ib.so) was loaded "
                             "from " UCX_LIBDIR "/ucx";
}

// The tools syncmem-run runs (ucx_info, ucx_perftest) are the configured
// UCX's, and with the module preloaded they still load its libraries.
TEST(loader, syncmem_run_uses_the_configured_ucx_tools)
{
    const std::string bindir = real_dir(dir_of(UCX_INFO));
    for (const char *tool : {"ucx_info", "ucx_perftest"}) {
        int status;
        std::string out = syncmem_run(std::string("sh -c 'command -v ") + tool +
                                      "'", &status);
        ASSERT_EQ(0, status) << tool << " not found: " << out;
        while (!out.empty() && out.back() == '\n') {
            out.pop_back();
        }
        std::string dir = real_dir(dir_of(out));
        printf("%s syncmem-run %s: %s\n", dir == bindir ? "PASS" : "FAIL", tool,
               out.c_str());
        EXPECT_EQ(bindir, dir) << "syncmem-run runs " << out;
    }

    // ld.so's own list of what ucx_info loads, the module preloaded.
    int status;
    std::string out = syncmem_run("env LD_TRACE_LOADED_OBJECTS=1 ucx_info",
                                  &status);
    ASSERT_EQ(0, status) << out;
    std::set<std::string> paths;
    std::regex dep("\\s*\\S+ => (/\\S+) \\(0x");
    std::smatch m;
    size_t pos = 0, eol;
    while ((eol = out.find('\n', pos)) != std::string::npos) {
        std::string line = out.substr(pos, eol - pos);
        if (std::regex_search(line, m, dep)) {
            paths.insert(m[1]);
        }
        pos = eol + 1;
    }
    int libs, modules;
    check_paths(paths, "syncmem-run ucx_info", &libs, &modules);
    EXPECT_GE(libs, 2) << out;
}
