// SPDX-License-Identifier: BSD-3-Clause
// The installed UCX's own tools see the module when loaded as documented.
#include "syncmem_test.h"
#include "test/syncmem_run.h"

extern "C" {
#include <uct_syncmem/syncmem_ep.h>
#include <uct_syncmem/syncmem_qp.h>
#include <uct_syncmem/syncmem_hooks.h>
}

#include <regex>

TEST_F(syncmem_test, ucx_info_lists_syncmem_on_the_port)
{
    int status;
    std::string out = syncmem_run(UCX_INFO " -d", &status);

    ASSERT_EQ(0, status) << out;
    std::regex listed("Component: syncmem[^]*Transport: syncmem\\s*\n#\\s*"
                      "Device: " + m_dev + "\\s*\n#\\s*Type: network");
    EXPECT_TRUE(std::regex_search(out, listed)) << out;
}

TEST_F(syncmem_test, ucx_info_shows_every_config_variable_with_its_doc)
{
    int status;
    std::string out = syncmem_run(UCX_INFO " -c -f", &status);
    ASSERT_EQ(0, status) << out;

    for (ucs_config_field_t *f = uct_syncmem_iface_config_table; f->name; ++f) {
        if (f->name[0] == '\0') {
            // embedded UCT base table: its variables carry our prefix too
            for (ucs_config_field_t *b = (ucs_config_field_t*)f->parser.arg;
                 b->name; ++b) {
                // deprecated UCX settings are hidden by ucx_info
                if (b->name[0] && (b->doc != NULL) &&
                    (b->offset != UCS_CONFIG_DEPRECATED_FIELD_OFFSET)) {
                    EXPECT_NE(std::string::npos,
                              out.find(std::string("UCX_SYNCMEM_") + b->name +
                                       "="))
                            << b->name;
                }
            }
            continue;
        }
        std::string doc_line(f->doc, strcspn(f->doc, "\n"));
        EXPECT_NE(std::string::npos,
                  out.find(std::string("UCX_SYNCMEM_") + f->name + "="))
                << f->name;
        EXPECT_NE(std::string::npos, out.find(doc_line)) << doc_line;
    }
}

// UCP selects syncmem devices through UCX_NET_DEVICES like any network
// transport: the port is used when named, and a missing name is reported.
TEST_F(syncmem_test, ucp_honours_net_devices)
{
    int status;
    std::string out = syncmem_run("env UCX_TLS=syncmem UCX_NET_DEVICES=" + m_dev +
                                  " " UCX_INFO " -e -u t -n 1", &status);
    ASSERT_EQ(0, status) << out;
    EXPECT_NE(std::string::npos, out.find("syncmem/" + m_dev)) << out;

    out = syncmem_run("env UCX_TLS=syncmem UCX_NET_DEVICES=nosuch:1 "
                      UCX_INFO " -e -u t -n 1", &status);
    EXPECT_NE(std::string::npos,
              out.find("network device 'nosuch:1' is not available")) << out;
    EXPECT_NE(std::string::npos, out.find("'" + m_dev + "'(syncmem)")) << out;
    EXPECT_NE(std::string::npos, out.find("no usable transports")) << out;
}

// UCP gives an endpoint with peer error handling ('-u te') an rma_bw lane
// on an iface-connected transport only if its md can invalidate memory
// (UCT_MD_FLAG_INVALIDATE): without the lane, every rendezvous is copied
// through active messages, and CUDA memory cannot move at all.
TEST_F(syncmem_test, ucp_peer_error_handling_keeps_the_rma_bw_lane)
{
    for (const char *mode : {"t", "te"}) {
        SCOPED_TRACE(std::string("ucx_info -u ") + mode);
        int status;
        std::string out = syncmem_run(std::string("env UCX_TLS=syncmem"
                                                  " UCX_NET_DEVICES=") +
                                      m_dev + " " UCX_INFO " -e -u " + mode +
                                      " -n 1", &status);
        ASSERT_EQ(0, status) << out;
        std::regex lane("lane\\[[0-9]+\\]:[^\n]*syncmem/" + m_dev +
                        "[^\n]*rma_bw#0");
        EXPECT_TRUE(std::regex_search(out, lane)) << out;
    }
}
