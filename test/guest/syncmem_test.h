/* SPDX-License-Identifier: BSD-3-Clause */
// Helpers for tests on a real verbs device (inside the guest, or on a host
// with an HCA). The device comes from SYNCMEM_DEV0, which
// contrib/guest/guest.sh sets (e.g. "rxe0:1").
#ifndef SYNCMEM_TEST_GUEST_H_
#define SYNCMEM_TEST_GUEST_H_

#include <gtest/gtest.h>

extern "C" {
#include <uct/api/uct.h>
#include <ucs/async/async.h>

int uct_syncmem_ep_connecting(uct_ep_h ep); /* syncmem_hooks.h */
}

#include <chrono>
#include <cstdarg>
#include <mutex>
#include <cstdlib>
#include <deque>
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

// A hang guard for one wait in a test, not a performance limit: true while
// the wait may go on; once it has lasted SYNCMEM_TEST_WAIT_S seconds
// (default 60), it records a failure that names what was waited for, and is
// false from then on. A wait reads
//     wait_bound bound("the flush's completion");
//     while ((comp.count > 0) && bound()) { progress(); }
class wait_bound {
public:
    explicit wait_bound(std::string what) :
        m_what(std::move(what)), m_seconds(limit()),
        m_deadline(std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::duration<double>(m_seconds))) {
    }

    bool operator()() {
        if (m_expired) {
            return false;
        }
        if (std::chrono::steady_clock::now() < m_deadline) {
            return true;
        }
        m_expired = true;
        ADD_FAILURE() << "gave up waiting for " << m_what << " after "
                      << m_seconds << " s (a hang guard: SYNCMEM_TEST_WAIT_S)";
        return false;
    }

    bool expired() const {
        return m_expired;
    }

    static double limit() {
        const char *s = getenv("SYNCMEM_TEST_WAIT_S");
        double v      = s ? atof(s) : 0;
        return (v > 0) ? v : 60;
    }

private:
    std::string                           m_what;
    double                                m_seconds;
    std::chrono::steady_clock::time_point m_deadline;
    bool                                  m_expired = false;
};

// The warnings (and worse) UCX logs while one exists, each as "file:line
// message": UCX's own tests count one as a failure, and so do ours where a
// failure is expected (a dead peer, a burst of connections). The async
// thread logs too, hence the lock.
class warning_log {
public:
    warning_log() {
        std::lock_guard<std::mutex> guard(lock());
        messages().clear();
        ucs_log_push_handler(record);
    }
    ~warning_log() { ucs_log_pop_handler(); }

    std::vector<std::string> seen() const {
        std::lock_guard<std::mutex> guard(lock());
        return messages();
    }

    // "": none; else how many, and the first
    std::string summary() const {
        std::vector<std::string> m = seen();
        return m.empty() ? "" : std::to_string(m.size()) +
                                " warnings, the first: " + m.front();
    }

private:
    static std::mutex &lock() {
        static std::mutex m;
        return m;
    }
    static std::vector<std::string> &messages() {
        static std::vector<std::string> v;
        return v;
    }
    static ucs_log_func_rc_t record(const char *file, unsigned line,
                                    const char *function,
                                    ucs_log_level_t level,
                                    const ucs_log_component_config_t *comp,
                                    const char *message, va_list ap) {
        char buf[512];
        va_list copy;

        if (level <= UCS_LOG_LEVEL_WARN) {
            va_copy(copy, ap);
            vsnprintf(buf, sizeof(buf), message, copy);
            va_end(copy);
            std::lock_guard<std::mutex> guard(lock());
            messages().push_back(std::string(file) + ":" +
                                 std::to_string(line) + " " + buf);
        }
        return UCS_LOG_FUNC_RC_CONTINUE;
    }
};

class syncmem_test : public testing::Test {
protected:
    void SetUp() override {
        const char *dev = getenv("SYNCMEM_DEV0");
        ASSERT_NE(nullptr, dev)
                << "SYNCMEM_DEV0 is not set: run these tests through"
                   " test/guest.test, or set it to an active port (rxe0:1)";
        m_dev = dev;
        m_md_name = m_dev.substr(0, m_dev.rfind(':'));

        ASSERT_EQ(UCS_OK, ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                                   &m_async));
        ASSERT_EQ(UCS_OK, uct_worker_create(m_async, UCS_THREAD_MODE_SINGLE,
                                            &m_worker));
        m_component = find_component("syncmem");
        ASSERT_NE(nullptr, m_component) << "syncmem component not registered";
        m_md = open_md(m_component, m_md_name, md_config());
        ASSERT_NE(nullptr, m_md);
    }

    void TearDown() override {
        for (uct_ep_h ep : m_eps) {
            uct_ep_destroy(ep);
        }
        for (uct_iface_h iface : m_ifaces) {
            uct_iface_close(iface);
        }
        for (uct_md_h md : m_mds) {
            uct_md_close(md);
        }
        if (m_worker != nullptr) {
            uct_worker_destroy(m_worker);
        }
        if (m_async != nullptr) {
            ucs_async_context_destroy(m_async);
        }
    }

    static uct_component_h find_component(const std::string &name) {
        uct_component_h *components, found = nullptr;
        unsigned count;

        if (uct_query_components(&components, &count) != UCS_OK) {
            return nullptr;
        }
        for (unsigned i = 0; i < count; ++i) {
            uct_component_attr_t attr;
            attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
            if ((uct_component_query(components[i], &attr) == UCS_OK) &&
                (name == attr.name)) {
                found = components[i];
            }
        }
        uct_release_component_list(components);
        return found;
    }

    typedef std::vector<std::pair<std::string, std::string>> config_mods_t;

    // uct_config_modify(NAME): UCX 1.13 takes the name without the table's
    // prefix (RCACHE), later releases the full name (SYNCMEM_RCACHE).
    static ucs_status_t config_modify(void *config, const std::string &name,
                                      const std::string &value) {
        ucs_status_t status = uct_config_modify(config,
                                                (std::string("SYNCMEM_") +
                                                 name).c_str(),
                                                value.c_str());
        if (status == UCS_ERR_NO_ELEM) {
            status = uct_config_modify(config, name.c_str(), value.c_str());
        }
        return status;
    }

    // Opens an MD; mods are NAME=VALUE pairs of its config (RCACHE=n).
    uct_md_h open_md(uct_component_h component, const std::string &name,
                     const config_mods_t &mods = {}) {
        uct_md_config_t *config;
        uct_md_h md = nullptr;

        if (uct_md_config_read(component, NULL, NULL, &config) != UCS_OK) {
            return nullptr;
        }
        for (auto &mod : mods) {
            if (config_modify(config, mod.first, mod.second) != UCS_OK) {
                uct_config_release(config);
                return nullptr;
            }
        }
        if (uct_md_open(component, name.c_str(), config, &md) == UCS_OK) {
            m_mds.push_back(md);
        }
        uct_config_release(config);
        return md;
    }

    // Config of the fixture's MD (m_md); a test class may change it.
    virtual config_mods_t md_config() const {
        return {};
    }

    // Opens tl_name on dev_name; config_mods are NAME=VALUE pairs.
    ucs_status_t open_iface(uct_md_h md, const char *tl_name,
                            const std::string &dev_name, uct_iface_h *iface_p,
                            const config_mods_t &mods = {},
                            uct_iface_params_t params = {},
                            uct_worker_h worker = nullptr) {
        uct_iface_config_t *config;
        ucs_status_t status;

        status = uct_md_iface_config_read(md, tl_name, NULL, NULL, &config);
        if (status != UCS_OK) {
            return status;
        }
        for (auto &mod : mods) {
            status = config_modify(config, mod.first, mod.second);
            if (status != UCS_OK) {
                uct_config_release(config);
                return status;
            }
        }

        params.field_mask          |= UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                      UCT_IFACE_PARAM_FIELD_DEVICE |
                                      UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                                      UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                                      UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
        params.err_handler          = err_handler;
        params.err_handler_arg      = this;
        params.err_handler_flags    = 0;
        params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
        params.mode.device.tl_name  = tl_name;
        params.mode.device.dev_name = dev_name.c_str();
        status = uct_iface_open(md, worker ? worker : m_worker, &params,
                                config, iface_p);
        uct_config_release(config);
        if (status == UCS_OK) {
            m_ifaces.push_back(*iface_p);
            uct_iface_progress_enable(*iface_p, UCT_PROGRESS_SEND |
                                                UCT_PROGRESS_RECV);
        }
        return status;
    }

    // The device and iface addresses of iface.
    static void get_addresses(uct_iface_h iface, std::vector<uint8_t> *dev,
                              std::vector<uint8_t> *ifa) {
        uct_iface_attr_t attr;
        uct_iface_query(iface, &attr);
        dev->resize(attr.device_addr_len);
        ifa->resize(attr.iface_addr_len);
        uct_iface_get_device_address(iface, (uct_device_addr_t*)dev->data());
        uct_iface_get_address(iface, (uct_iface_addr_t*)ifa->data());
    }

    // An endpoint from iface `from` to the iface at these addresses.
    ucs_status_t connect_to_addr(uct_iface_h from,
                                 const std::vector<uint8_t> &dev,
                                 const std::vector<uint8_t> &ifa,
                                 uct_ep_h *ep_p) {
        uct_ep_params_t params = {};
        params.field_mask = UCT_EP_PARAM_FIELD_IFACE |
                            UCT_EP_PARAM_FIELD_DEV_ADDR |
                            UCT_EP_PARAM_FIELD_IFACE_ADDR;
        params.iface      = from;
        params.dev_addr   = (const uct_device_addr_t*)dev.data();
        params.iface_addr = (const uct_iface_addr_t*)ifa.data();
        ucs_status_t status = uct_ep_create(&params, ep_p);
        if (status == UCS_OK) {
            m_eps.push_back(*ep_p);
        }
        return status;
    }

    // An endpoint from one iface to another, connected unless !wait: one
    // that connects takes operations already (kept until CONNECT), but a
    // test of a connected endpoint (its ring, its QP's faults) needs the
    // handshake done.
    ucs_status_t connect(uct_iface_h from, uct_iface_h to, uct_ep_h *ep_p,
                         bool wait = true) {
        std::vector<uint8_t> dev, ifa;
        get_addresses(to, &dev, &ifa);
        ucs_status_t status = connect_to_addr(from, dev, ifa, ep_p);
        if ((status != UCS_OK) || !wait) {
            return status;
        }
        return wait_for("the handshake of a new endpoint", [&] {
                   return !uct_syncmem_ep_connecting(*ep_p);
               }) ? UCS_OK : UCS_ERR_TIMED_OUT;
    }

    // Progresses worker (default: the fixture's) until done() holds; after
    // the hang guard's bound (wait_bound), a failure naming what, and false.
    template <typename P>
    bool wait_for(const std::string &what, P done,
                  uct_worker_h worker = nullptr) {
        wait_bound bound(what);
        while (!done()) {
            if (!bound()) {
                return false;
            }
            uct_worker_progress(worker ? worker : m_worker);
        }
        return true;
    }

    // Endpoint errors reported to the iface error handler, in order.
    static ucs_status_t err_handler(void *arg, uct_ep_h ep,
                                    ucs_status_t status) {
        static_cast<syncmem_test*>(arg)->m_errors.push_back({ep, status});
        return UCS_OK;
    }

    std::vector<std::pair<uct_ep_h, ucs_status_t>> m_errors;
    std::string                m_dev, m_md_name;
    ucs_async_context_t        *m_async  = nullptr;
    uct_worker_h               m_worker  = nullptr;
    uct_component_h            m_component = nullptr;
    uct_md_h                   m_md      = nullptr;
    std::vector<uct_md_h>      m_mds;
    std::vector<uct_iface_h>   m_ifaces;
    std::vector<uct_ep_h>      m_eps;
};

#endif
