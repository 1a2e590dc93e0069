// SPDX-License-Identifier: BSD-3-Clause
// The module's view of UCX's structs matches the installed UCX libraries.
//
// The module embeds UCX-internal structs; if it was compiled with headers or
// a config.h that differ from the installed build, layouts differ and the
// first call crashes somewhere unrelated. Here it fails with a name instead.
#include <gtest/gtest.h>

#include "abi_sizes.h"

#include <cstdio>
#include <map>
#include <string>

static std::map<std::string, size_t> installed_sizes()
{
    std::map<std::string, size_t> sizes;
    char line[512], name[256];
    unsigned long size;

    FILE *p = popen(UCX_INFO " -y", "r");
    if (p == NULL) {
        return sizes;
    }
    // "    sizeof(uct_base_iface_t) = ............ 1280"
    while (fgets(line, sizeof(line), p) != NULL) {
        if ((sscanf(line, " sizeof(%255[^)]) = %*[.] %lu", name, &size) == 2)) {
            sizes[name] = size;
        }
    }
    pclose(p);
    return sizes;
}

TEST(abi, struct_sizes_match_installed_ucx)
{
    std::map<std::string, size_t> installed = installed_sizes();

    ASSERT_FALSE(installed.empty()) << UCX_INFO " -y printed no sizes";
    for (const syncmem_abi_size_t *s = syncmem_abi_sizes; s->name; ++s) {
        auto it = installed.find(s->name);
        ASSERT_NE(installed.end(), it)
                << s->name << " is not reported by " UCX_INFO " -y";
        EXPECT_EQ(it->second, s->size)
                << s->name << ": compiled size differs from the installed UCX;"
                   " rebuild against its exact source and config.h";
    }
}
