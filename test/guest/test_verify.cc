// SPDX-License-Identifier: BSD-3-Clause
// The consistency check (UCX_SYNCMEM_VERIFY=crc, uct_syncmem/syncmem_verify.c)
// and the advice in work completion errors (syncmem_qp.c), on a real device.
// Corruption is injected with VERIFY_INJECT, which flips a byte on the
// checking side just before the check: the real check path runs.
#include "syncmem_test.h"

extern "C" {
#include <uct_syncmem/syncmem_ep.h>
#include <uct_syncmem/syncmem_qp.h>
#include <uct_syncmem/syncmem_hooks.h>
#include <ucs/debug/log_def.h>
}

#include <chrono>
#include <cstdarg>
#include <cstring>

namespace {

// Collects the syncmem log lines while it lives (and keeps them off the
// terminal: the tests provoke them).
class log_capture {
public:
    log_capture() {
        s_lines.clear();
        ucs_log_push_handler(handler);
    }
    ~log_capture() {
        ucs_log_pop_handler();
    }

    // lines containing every one of the words
    static std::vector<std::string>
    find(std::initializer_list<std::string> words) {
        std::vector<std::string> found;
        for (auto &line : s_lines) {
            bool all = true;
            for (auto &w : words) {
                all = all && (line.find(w) != std::string::npos);
            }
            if (all) {
                found.push_back(line);
            }
        }
        return found;
    }

    static std::string all() {
        std::string text;
        for (auto &line : s_lines) {
            text += line + "\n";
        }
        return text;
    }

    static std::vector<std::string> s_lines;

private:
    static ucs_log_func_rc_t
    handler(const char *file, unsigned line, const char *function,
            ucs_log_level_t level, const ucs_log_component_config_t *conf,
            const char *message, va_list ap) {
        char buf[2048];
        va_list copy;
        va_copy(copy, ap);
        vsnprintf(buf, sizeof(buf), message, copy);
        va_end(copy);
        if (strncmp(buf, "syncmem:", 8) != 0) {
            return UCS_LOG_FUNC_RC_CONTINUE;
        }
        s_lines.push_back(buf);
        return UCS_LOG_FUNC_RC_STOP;
    }
};

std::vector<std::string> log_capture::s_lines;

struct am_sink {
    std::vector<std::vector<uint8_t>> msgs;

    static ucs_status_t cb(void *arg, void *data, size_t length,
                           unsigned flags) {
        static_cast<am_sink*>(arg)->msgs.emplace_back((uint8_t*)data,
                                                      (uint8_t*)data + length);
        return UCS_OK;
    }
};

void pattern(std::vector<uint8_t> &v, unsigned seed)
{
    for (size_t i = 0; i < v.size(); ++i) {
        v[i] = (uint8_t)(seed * 7 + i * 13 + 1);
    }
}

size_t pack_vec(void *dest, void *arg)
{
    auto *v = static_cast<std::vector<uint8_t>*>(arg);
    if (!v->empty()) { /* an empty vector may have no data */
        memcpy(dest, v->data(), v->size());
    }
    return v->size();
}

uct_syncmem_verify_counters_t counters(uct_iface_h iface)
{
    uct_syncmem_verify_counters_t c;
    uct_syncmem_iface_verify_counters(iface, &c);
    return c;
}

} // namespace

class syncmem_verify_test : public syncmem_test {
protected:
    static const uint8_t AM_ID = 5;

    struct buffer {
        std::vector<uint8_t> data;
        uct_mem_h            memh = nullptr;
        uct_rkey_bundle_t    rkey = {};
    };

    void TearDown() override {
        for (auto &b : m_buffers) {
            if (b->rkey.rkey != 0) {
                uct_rkey_release(m_component, &b->rkey);
            }
            uct_md_mem_dereg(m_md, b->memh);
        }
        syncmem_test::TearDown();
    }

    // A sender with these settings, a receiver with those, an endpoint.
    void open_pair(const config_mods_t &sender_mods,
                   const config_mods_t &receiver_mods = {}) {
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &m_sender,
                                     sender_mods));
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &m_receiver,
                                     receiver_mods));
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_receiver, AM_ID,
                                                   am_sink::cb, &m_sink, 0));
        ASSERT_EQ(UCS_OK, uct_iface_query(m_sender, &m_attr));
        ASSERT_EQ(UCS_OK, connect(m_sender, m_receiver, &m_ep));
    }

    buffer *alloc(size_t size, uint8_t fill) {
        m_buffers.emplace_back(new buffer);
        buffer *b = m_buffers.back().get();
        b->data.assign(size, fill);
        EXPECT_EQ(UCS_OK, uct_md_mem_reg(m_md, b->data.data(), b->data.size(),
                                         UCT_MD_MEM_ACCESS_ALL, &b->memh));
        std::vector<uint8_t> packed(64);
        EXPECT_EQ(UCS_OK, uct_md_mkey_pack(m_md, b->memh, packed.data()));
        EXPECT_EQ(UCS_OK, uct_rkey_unpack(m_component, packed.data(), &b->rkey));
        return b;
    }

    void progress() {
        uct_worker_progress(m_worker);
    }

    // Progresses until pred() holds; false after 30 s (a test that breaks
    // the check must fail, not hang make check).
    template <typename P> bool wait_until(P pred) {
        auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(30);
        while (!pred()) {
            if (std::chrono::steady_clock::now() > deadline) {
                return false;
            }
            progress();
        }
        return true;
    }

    template <typename F> ucs_status_t retry(F op) {
        ucs_status_t status;
        wait_bound bound("resources to post an operation");
        while (((status = op()) == UCS_ERR_NO_RESOURCE) && bound()) {
            progress();
        }
        return status;
    }

    template <typename F> ssize_t retry_bcopy(F op) {
        ssize_t ret;
        wait_bound bound("resources for a bcopy");
        while (((ret = op()) == UCS_ERR_NO_RESOURCE) && bound()) {
            progress();
        }
        return ret;
    }

    // Flush; returns its status.
    ucs_status_t flush(uct_ep_h ep) {
        uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
        ucs_status_t status   = retry([&] { return uct_ep_flush(ep, 0, &comp); });
        if (status == UCS_INPROGRESS) {
            if (!wait_until([&] { return comp.count == 0; })) {
                ADD_FAILURE() << "flush did not complete";
                abort(); // comp is on this stack
            }
            status = comp.status;
        }
        return status;
    }

    void wait_checked(uint64_t count) {
        ASSERT_TRUE(wait_until([&] {
            return counters(m_receiver).am_checked >= count;
        }));
    }

    am_sink                              m_sink;
    uct_iface_h                          m_sender, m_receiver;
    uct_iface_attr_t                     m_attr;
    uct_ep_h                             m_ep;
    std::vector<std::unique_ptr<buffer>> m_buffers;
};

// The trailer costs 4 bytes of each message size, and one iov of a zcopy.
TEST_F(syncmem_verify_test, am_sizes_shrink_by_the_trailer)
{
    open_pair({{"VERIFY", "crc"}});
    uct_iface_attr_t plain;
    ASSERT_EQ(UCS_OK, uct_iface_query(m_receiver, &plain));

    EXPECT_EQ(plain.cap.am.max_short - 4, m_attr.cap.am.max_short);
    EXPECT_EQ(plain.cap.am.max_bcopy - 4, m_attr.cap.am.max_bcopy);
    EXPECT_EQ(plain.cap.am.max_zcopy - 4, m_attr.cap.am.max_zcopy);
    EXPECT_EQ(plain.cap.am.max_iov - 1, m_attr.cap.am.max_iov);
    EXPECT_EQ(plain.cap.put.max_short, m_attr.cap.put.max_short);
    EXPECT_EQ(plain.cap.put.max_bcopy, m_attr.cap.put.max_bcopy);
}

// Every size up to the largest of each kind arrives intact, without the
// trailer, checked by a receiver whose own VERIFY is none.
TEST_F(syncmem_verify_test, am_with_crc_every_size)
{
    open_pair({{"VERIFY", "crc"}});
    std::vector<std::vector<uint8_t>> sent;

    size_t max_short = m_attr.cap.am.max_short - sizeof(uint64_t);
    for (size_t len = 0; len <= max_short; ++len) {
        std::vector<uint8_t> payload(len);
        pattern(payload, len);
        uint64_t hdr = 0x1122334455667788ull + len;
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_am_short(m_ep, AM_ID, hdr, payload.data(), len);
        })) << len;
        std::vector<uint8_t> msg((uint8_t*)&hdr, (uint8_t*)&hdr + 8);
        msg.insert(msg.end(), payload.begin(), payload.end());
        sent.push_back(msg);
    }

    std::vector<uint8_t> a(5), b(m_attr.cap.am.max_short - 5);
    pattern(a, 1);
    pattern(b, 2);
    uct_iov_t siov[2] = {{a.data(), a.size(), NULL, 0, 1},
                         {b.data(), b.size(), NULL, 0, 1}};
    ASSERT_EQ(UCS_OK, retry([&] {
        return uct_ep_am_short_iov(m_ep, AM_ID, siov, 2);
    }));
    a.insert(a.end(), b.begin(), b.end());
    sent.push_back(a);

    for (size_t len : {(size_t)0, (size_t)1, (size_t)4093, (size_t)4096,
                       m_attr.cap.am.max_bcopy}) {
        std::vector<uint8_t> v(len);
        pattern(v, len + 3);
        ASSERT_EQ((ssize_t)len, retry_bcopy([&] {
            return uct_ep_am_bcopy(m_ep, AM_ID, pack_vec, &v, 0);
        }));
        sent.push_back(v);
    }

    // zcopy: a header and as many iovs as allowed, up to the largest size
    buffer *src = alloc(m_attr.cap.am.max_zcopy, 0);
    pattern(src->data, 9);
    std::vector<uint8_t> header(16);
    pattern(header, 10);
    for (size_t total : {(size_t)100, m_attr.cap.am.max_zcopy}) {
        size_t n = m_attr.cap.am.max_iov, body = total - header.size();
        std::vector<uct_iov_t> iov(n);
        std::vector<uint8_t> msg(header);
        for (size_t i = 0, off = 0; i < n; ++i) {
            size_t len = (i == n - 1) ? body - off : body / n;
            iov[i] = {src->data.data() + off, len, src->memh, 0, 1};
            msg.insert(msg.end(), src->data.begin() + off,
                       src->data.begin() + off + len);
            off += len;
        }
        uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
        ASSERT_EQ(UCS_INPROGRESS, retry([&] {
            return uct_ep_am_zcopy(m_ep, AM_ID, header.data(), header.size(),
                                   iov.data(), n, 0, &comp);
        })) << total;
        ASSERT_TRUE(wait_until([&] { return comp.count == 0; }));
        EXPECT_EQ(UCS_OK, comp.status);
        sent.push_back(msg);
    }

    ASSERT_TRUE(wait_until([&] { return m_sink.msgs.size() >= sent.size(); }))
            << m_sink.msgs.size() << " of " << sent.size();
    for (size_t i = 0; i < sent.size(); ++i) {
        ASSERT_EQ(sent[i], m_sink.msgs[i]) << "message " << i;
    }
    uct_syncmem_verify_counters_t c = counters(m_receiver);
    EXPECT_EQ(sent.size(), c.am_checked);
    EXPECT_EQ(0u, c.am_dropped);
}

// A corrupted message is dropped, counted, and logged with what identifies
// it; the others go through.
TEST_F(syncmem_verify_test, am_corrupted_is_dropped_counted_logged)
{
    open_pair({{"VERIFY", "crc"}}, {{"VERIFY_INJECT", "3"}});
    log_capture logs;
    const unsigned count = 12;

    for (unsigned i = 0; i < count; ++i) {
        std::vector<uint8_t> v(100 + i);
        pattern(v, i);
        if (i % 2) {
            ASSERT_EQ((ssize_t)v.size(), retry_bcopy([&] {
                return uct_ep_am_bcopy(m_ep, AM_ID, pack_vec, &v, 0);
            }));
        } else {
            ASSERT_EQ(UCS_OK, retry([&] {
                return uct_ep_am_short(m_ep, AM_ID, i, v.data(), 16);
            }));
        }
    }
    wait_checked(count);

    uct_syncmem_verify_counters_t c = counters(m_receiver);
    EXPECT_EQ(count, c.am_checked);
    EXPECT_EQ(count / 3, c.am_dropped);
    EXPECT_EQ(count - count / 3, m_sink.msgs.size());

    auto lines = log_capture::find({"dropped", "bytes", "source QP 0x",
                                    "CRC32C expected"});
    EXPECT_EQ(count / 3, lines.size()) << log_capture::all();
    // every 3rd: shorts of 8 + 16 bytes (3rd, 9th), bcopys of 105 and 111
    EXPECT_EQ(2u, log_capture::find({" 24 bytes"}).size()) << log_capture::all();
    EXPECT_EQ(1u, log_capture::find({" 105 bytes"}).size()) << log_capture::all();
    EXPECT_EQ(1u, log_capture::find({" 111 bytes"}).size()) << log_capture::all();
}

// A receiver checks (and, for tests, corrupts) only messages that carry a
// CRC: plain ones pass untouched even where every check would be spoiled.
TEST_F(syncmem_verify_test, am_without_crc_is_not_checked)
{
    open_pair({}, {{"VERIFY_INJECT", "1"}});
    for (uint64_t i = 0; i < 10; ++i) {
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_am_short(m_ep, AM_ID, i, NULL, 0);
        }));
    }
    ASSERT_TRUE(wait_until([&] { return m_sink.msgs.size() >= 10; }));
    EXPECT_EQ(0u, counters(m_receiver).am_checked);
}

// Puts of every kind and size are read back and found equal; a flush
// returns only after the last read of a put larger than SEG_SIZE.
TEST_F(syncmem_verify_test, put_read_back_ok)
{
    open_pair({{"VERIFY", "crc"}});
    const size_t seg = m_attr.cap.put.max_bcopy;
    buffer *dst = alloc(4 * seg + 100, 0);
    buffer *src = alloc(4 * seg + 100, 0);
    pattern(src->data, 77);
    uint64_t puts = 0;

    std::vector<uint8_t> v(m_attr.cap.put.max_short);
    pattern(v, 5);
    ASSERT_EQ(UCS_OK, retry([&] {
        return uct_ep_put_short(m_ep, v.data(), v.size(),
                                (uintptr_t)dst->data.data(), dst->rkey.rkey);
    }));
    ++puts;

    // nothing to compare, but still a write and a read
    std::vector<uint8_t> none;
    ASSERT_EQ(0, retry_bcopy([&] {
        return uct_ep_put_bcopy(m_ep, pack_vec, &none,
                                (uintptr_t)dst->data.data(), dst->rkey.rkey);
    }));
    ++puts;

    std::vector<uint8_t> big(seg);
    pattern(big, 6);
    ASSERT_EQ((ssize_t)seg, retry_bcopy([&] {
        return uct_ep_put_bcopy(m_ep, pack_vec, &big,
                                (uintptr_t)dst->data.data() + 200,
                                dst->rkey.rkey);
    }));
    ++puts;

    // zcopy: one chunk, several chunks (not a multiple of SEG_SIZE), 2 iovs
    size_t len = 3 * seg + 13;
    uct_iov_t iov[2] = {{src->data.data(), 1000, src->memh, 0, 1},
                        {src->data.data() + 1000, len - 1000, src->memh, 0, 1}};
    uct_completion_t comp = { [](uct_completion_t*) {}, 2, UCS_OK };
    ASSERT_EQ(UCS_INPROGRESS, retry([&] {
        return uct_ep_put_zcopy(m_ep, iov, 1, (uintptr_t)dst->data.data() + seg,
                                dst->rkey.rkey, &comp);
    }));
    ASSERT_EQ(UCS_INPROGRESS, retry([&] {
        return uct_ep_put_zcopy(m_ep, iov, 2, (uintptr_t)dst->data.data() + seg,
                                dst->rkey.rkey, &comp);
    }));
    puts += 2;

    ASSERT_EQ(UCS_OK, flush(m_ep));
    EXPECT_EQ(0, comp.count) << "flush completed before the last read-back";
    if (!wait_until([&] { return comp.count == 0; })) {
        ADD_FAILURE() << "zcopy puts did not complete";
        abort(); // comp is on this stack
    }
    EXPECT_EQ(UCS_OK, comp.status);

    EXPECT_EQ(0, memcmp(dst->data.data(), v.data(), v.size()));
    EXPECT_EQ(0, memcmp(dst->data.data() + 200, big.data(), seg - 200));
    EXPECT_EQ(0, memcmp(dst->data.data() + seg, src->data.data(), len));

    uct_syncmem_verify_counters_t c = counters(m_sender);
    EXPECT_EQ(puts, c.put_checked);
    EXPECT_EQ(0u, c.put_failed);
    EXPECT_TRUE(m_errors.empty());
}

// Many verified puts in a row: send queue slots are accounted right (each
// takes two entries, asks for one) and the QP never overflows.
TEST_F(syncmem_verify_test, put_many_fill_the_queue)
{
    open_pair({{"VERIFY", "crc"}, {"TX_QUEUE_LEN", "16"}});
    buffer *dst = alloc(64 * 1024, 0);
    std::vector<uint8_t> v(256);

    for (unsigned i = 0; i < 500; ++i) {
        pattern(v, i);
        ASSERT_EQ((ssize_t)v.size(), retry_bcopy([&] {
            return uct_ep_put_bcopy(m_ep, pack_vec, &v,
                                    (uintptr_t)dst->data.data() +
                                    (i % 200) * 256, dst->rkey.rkey);
        })) << i;
    }
    ASSERT_EQ(UCS_OK, flush(m_ep));
    EXPECT_EQ(500u, counters(m_sender).put_checked);
    EXPECT_EQ(0u, counters(m_sender).put_failed);
    EXPECT_TRUE(m_errors.empty());
}

// A zcopy put read back different: its completion says UCS_ERR_IO_ERROR,
// the log says where; the endpoint goes on.
TEST_F(syncmem_verify_test, put_zcopy_corrupted_fails_the_put)
{
    open_pair({{"VERIFY", "crc"}, {"VERIFY_INJECT", "2"}});
    buffer *dst = alloc(20000, 0);
    buffer *src = alloc(20000, 0);
    pattern(src->data, 3);
    log_capture logs;

    std::vector<ucs_status_t> results;
    for (int i = 0; i < 2; ++i) {
        uct_iov_t iov = {src->data.data(), 20000, src->memh, 0, 1};
        uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
        ASSERT_EQ(UCS_INPROGRESS, retry([&] {
            return uct_ep_put_zcopy(m_ep, &iov, 1, (uintptr_t)dst->data.data(),
                                    dst->rkey.rkey, &comp);
        }));
        if (!wait_until([&] { return comp.count == 0; })) {
            ADD_FAILURE() << "zcopy put did not complete";
            abort(); // comp is on this stack
        }
        results.push_back(comp.status);
    }
    EXPECT_EQ(UCS_OK, results[0]);
    EXPECT_EQ(UCS_ERR_IO_ERROR, results[1]);
    EXPECT_EQ(1u, counters(m_sender).put_failed);

    char addr[32];
    snprintf(addr, sizeof(addr), "0x%" PRIx64, (uint64_t)(uintptr_t)dst->data.data());
    EXPECT_EQ(1u, log_capture::find({"put of 20000 bytes", addr, "read back",
                                     "QP 0x", "to iface 0x"}).size())
            << log_capture::all();
    EXPECT_TRUE(m_errors.empty());
    EXPECT_EQ(UCS_OK, flush(m_ep));
}

// A bcopy put has no completion: a mismatch fails its endpoint with
// UCS_ERR_IO_ERROR through the error handler.
TEST_F(syncmem_verify_test, put_bcopy_corrupted_fails_the_endpoint)
{
    open_pair({{"VERIFY", "crc"}, {"VERIFY_INJECT", "1"}});
    buffer *dst = alloc(4096, 0);
    std::vector<uint8_t> v(1000);
    pattern(v, 8);
    log_capture logs;

    ASSERT_EQ((ssize_t)v.size(), retry_bcopy([&] {
        return uct_ep_put_bcopy(m_ep, pack_vec, &v, (uintptr_t)dst->data.data(),
                                dst->rkey.rkey);
    }));
    ASSERT_TRUE(wait_until([&] { return !m_errors.empty(); }))
            << "the endpoint did not fail";
    ASSERT_EQ(1u, m_errors.size());
    EXPECT_EQ(m_ep, m_errors[0].first);
    EXPECT_EQ(UCS_ERR_IO_ERROR, m_errors[0].second);
    EXPECT_EQ(UCS_ERR_IO_ERROR, uct_ep_put_bcopy(m_ep, pack_vec, &v,
                                                 (uintptr_t)dst->data.data(),
                                                 dst->rkey.rkey));
    EXPECT_EQ(1u, log_capture::find({"put of 1000 bytes", "read back"}).size())
            << log_capture::all();
}

// A remote access error is logged once, with its status, the endpoint's
// QP and peer, what to check, and how many requests were flushed after it.
TEST_F(syncmem_verify_test, advice_for_remote_access_error)
{
    // (room for all four puts and the flush at once: a smaller ring would
    // answer UCS_ERR_NO_RESOURCE until a progress grew it)
    open_pair({{"FAILURE", "error"}, {"TX_RING_MIN", "8"}});
    buffer *dst = alloc(64, 0);
    uint64_t v = 7;
    log_capture logs;

    // far past the end of the registered range
    ASSERT_EQ(UCS_OK, retry([&] {
        return uct_ep_put_short(m_ep, &v, 8, (uintptr_t)dst->data.data() +
                                (1 << 20), dst->rkey.rkey);
    }));
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(UCS_OK, uct_ep_put_short(m_ep, &v, 8,
                                           (uintptr_t)dst->data.data(),
                                           dst->rkey.rkey));
    }
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, flush(m_ep));
    ASSERT_EQ(1u, m_errors.size());

    auto lines = log_capture::find({"IBV_WC_REM_ACCESS_ERR", "QP 0x",
                                    "to iface 0x", "check:", "rkey stale"});
    ASSERT_EQ(1u, lines.size()) << log_capture::all();
    // three puts and the flush's own request were flushed behind it
    EXPECT_NE(std::string::npos, lines[0].find("4 later requests flushed"))
            << lines[0];
    EXPECT_TRUE(log_capture::find({"WR_FLUSH_ERR ("}).empty())
            << log_capture::all();
    EXPECT_EQ(1u, log_capture::s_lines.size()) << log_capture::all();
}
