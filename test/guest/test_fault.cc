// SPDX-License-Identifier: BSD-3-Clause
// Fault recovery on one host (syncmem_reconnect.c, syncmem_replay.c): flush with cancel in every
// state, reconnect after a QP error, operation deadlines. Across a wire
// (packet loss, a dead link) see test_wire.cc.
#include "syncmem_rma_test.h"

#include <algorithm>

extern "C" {
#include "uct_syncmem/syncmem_ep.h"
#include "uct_syncmem/syncmem_qp.h"
#include "uct_syncmem/syncmem_hooks.h"
}

#include <functional>
#include <map>

namespace {

const uint8_t AM_ID = 7;

// Counts active messages by the sequence number in their first 8 bytes.
struct am_counter {
    std::map<uint64_t, unsigned> seen;

    static ucs_status_t cb(void *arg, void *data, size_t length,
                           unsigned flags) {
        uint64_t seq;
        memcpy(&seq, data, sizeof(seq));
        ++static_cast<am_counter*>(arg)->seen[seq];
        return UCS_OK;
    }

    // messages 0..count-1 each exactly once
    testing::AssertionResult exactly_once(uint64_t count) const {
        for (uint64_t i = 0; i < count; ++i) {
            auto it = seen.find(i);
            if ((it == seen.end()) || (it->second != 1)) {
                return testing::AssertionFailure()
                       << "message " << i << " delivered "
                       << ((it == seen.end()) ? 0 : it->second) << " times";
            }
        }
        if (seen.size() != count) {
            return testing::AssertionFailure() << seen.size() << " distinct"
                                               << " messages, sent " << count;
        }
        return testing::AssertionSuccess();
    }
};

size_t pack_u64(void *dest, void *arg)
{
    memcpy(dest, arg, 8);
    return 8;
}

} // namespace

class syncmem_fault_test : public syncmem_rma_test {
protected:
    void TearDown() override {
        // endpoints and ifaces first: some live on the extra workers
        for (uct_ep_h ep : m_eps) {
            uct_ep_destroy(ep);
        }
        m_eps.clear();
        for (uct_iface_h iface : m_ifaces) {
            uct_iface_close(iface);
        }
        m_ifaces.clear();
        for (uct_worker_h w : m_workers) {
            uct_worker_destroy(w);
        }
        for (ucs_async_context_t *async : m_asyncs) {
            ucs_async_context_destroy(async);
        }
        syncmem_rma_test::TearDown();
    }

    // A worker; on an async context of its own if asked (async_p), which
    // the test may hold (UCS_ASYNC_BLOCK) to keep the iface's handshake
    // from answering.
    uct_worker_h new_worker(ucs_async_context_t **async_p = nullptr) {
        ucs_async_context_t *async = m_async;
        uct_worker_h w;
        if (async_p != nullptr) {
            EXPECT_EQ(UCS_OK, ucs_async_context_create(
                    UCS_ASYNC_MODE_THREAD_SPINLOCK, async_p));
            m_asyncs.push_back(*async_p);
            async = *async_p;
        }
        EXPECT_EQ(UCS_OK, uct_worker_create(async, UCS_THREAD_MODE_SINGLE,
                                            &w));
        m_workers.push_back(w);
        return w;
    }

    // A sender (RC_STALL_TIMEOUT stall) and a receiver of 16 buffers on a
    // worker of its own, which nobody progresses until receiver_runs_again;
    // active messages 0..count-1 from one to the other.
    struct stuck_receiver {
        const uint64_t count = 64;
        am_counter     ams;
        uct_worker_h   worker;
        uct_ep_h       ep;
    };
    void stuck_receiver_start(const config_mods_t &sender_mods,
                              stuck_receiver *r,
                              ucs_async_context_t **async_p = nullptr) {
        uct_iface_h sender, stuck;
        r->worker = new_worker(async_p);
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &sender,
                                     sender_mods));
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &stuck,
                                     {{"RX_QUEUE_LEN", "16"}}, {}, r->worker));
        uct_iface_set_am_handler(stuck, AM_ID, am_counter::cb, &r->ams, 0);
        r->ep = connect(sender, stuck);
        post_ams(r->ep, r->count);
    }

    // Active messages 0..count-1 on ep, each as soon as it has room.
    void post_ams(uct_ep_h ep, uint64_t count) {
        for (uint64_t i = 0; i < count; ++i) {
            ASSERT_EQ(UCS_OK, retry([&] {
                return uct_ep_am_short(ep, AM_ID, i, NULL, 0);
            })) << i;
        }
    }

    // The stuck receiver runs again (its worker progresses): the sender's
    // flush completes, and each of its messages arrives once.
    void receiver_runs_again(const stuck_receiver &r) {
        uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
        ucs_status_t status   = retry([&] {
            return uct_ep_flush(r.ep, 0, &comp);
        });
        if (status == UCS_INPROGRESS) {
            for (long i = 0; (i < 2000000) && (comp.count > 0); ++i) {
                progress();
                uct_worker_progress(r.worker);
            }
            status = (comp.count > 0) ? UCS_ERR_TIMED_OUT : comp.status;
        }
        EXPECT_EQ(UCS_OK, status);
        for (long i = 0; (i < 1000000) && (r.ams.seen.size() < r.count);
             ++i) {
            uct_worker_progress(r.worker);
        }
        EXPECT_TRUE(r.ams.exactly_once(r.count));
    }

    // Calls flush until it is done (bounded, so that a hang is a failure).
    ucs_status_t flush_until_done(std::function<ucs_status_t()> flush) {
        ucs_status_t status = UCS_INPROGRESS;
        for (long i = 0; (i < 2000000) && (status == UCS_INPROGRESS ||
                                           status == UCS_ERR_NO_RESOURCE);
             ++i) {
            status = flush();
            if ((status == UCS_INPROGRESS) || (status == UCS_ERR_NO_RESOURCE)) {
                progress();
            }
        }
        return status;
    }

    // Progresses until comp is done (bounded); its status.
    ucs_status_t wait(uct_completion_t *comp) {
        for (long i = 0; (i < 2000000) && (comp->count > 0); ++i) {
            progress();
        }
        return (comp->count > 0) ? UCS_ERR_TIMED_OUT : comp->status;
    }

    ucs_status_t flush_wait(uct_ep_h ep) {
        uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
        ucs_status_t status = retry([&] { return uct_ep_flush(ep, 0, &comp); });
        return (status == UCS_INPROGRESS) ? wait(&comp) : status;
    }

    ssize_t put_bcopy(uct_ep_h ep, uint64_t v, buffer *dst, size_t index) {
        ssize_t len;
        wait_bound bound("resources for a put_bcopy");
        while (((len = uct_ep_put_bcopy(ep, pack_u64, &v,
                                       (uintptr_t)dst->data.data() + index * 8,
                                       dst->rkey.rkey)) == UCS_ERR_NO_RESOURCE) && bound()) {
            progress();
        }
        return len;
    }

    uint64_t word(buffer *b, size_t index) {
        uint64_t v;
        memcpy(&v, b->data.data() + index * 8, 8);
        return v;
    }

    // An endpoint to m_receiver whose first put (1 at word 0) is done;
    // then m_receiver's QPs refuse RDMA writes (persist: its later ones
    // too), a second put (2 at word 1) is flushed (*status_p), and the
    // endpoint has reconnected once.
    void put_refused(int persist, uct_ep_h *ep_p, buffer **dst_p,
                     ucs_status_t *status_p) {
        uct_iface_h iface;
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface, {}));
        *ep_p  = connect(iface, m_receiver);
        *dst_p = alloc(64, 0);
        ASSERT_EQ(8, put_bcopy(*ep_p, 1, *dst_p, 0));
        ASSERT_EQ(UCS_OK, flush_wait(*ep_p));
        ASSERT_EQ(UCS_OK, uct_syncmem_iface_inject_refusal(m_receiver,
                                                           persist));
        ASSERT_EQ(8, put_bcopy(*ep_p, 2, *dst_p, 1));
        *status_p = flush_wait(*ep_p);
        EXPECT_EQ(1u, uct_syncmem_ep_reconnects(*ep_p));
    }

    std::vector<uct_worker_h> m_workers;
    std::vector<ucs_async_context_t*> m_asyncs;
};

// The defect this file began with: the put completed (unsignalled, so no
// completion says so), and a cancel flush never returned UCS_OK.
TEST_F(syncmem_fault_test, flush_cancel_after_completed_put_returns)
{
    buffer *dst = alloc(64, 0);
    ASSERT_EQ(8, put_bcopy(m_ep, 0x1234, dst, 0));
    wait_bound bound("the put of 0x1234 to land");
    while ((word(dst, 0) != 0x1234) && bound()) {
        progress(); // landed
    }

    EXPECT_EQ(UCS_OK, flush_until_done([&] {
        return uct_ep_flush(m_ep, UCT_FLUSH_FLAG_CANCEL, NULL);
    }));
    EXPECT_TRUE(m_errors.empty()) << "cancel is not a peer failure";
    EXPECT_EQ(UCS_ERR_CANCELED, put_bcopy(m_ep, 1, dst, 0));
}

TEST_F(syncmem_fault_test, flush_cancel_with_completion_after_completed_put)
{
    buffer *dst = alloc(64, 0);
    ASSERT_EQ(8, put_bcopy(m_ep, 0x5678, dst, 0));
    wait_bound bound("the put of 0x5678 to land");
    while ((word(dst, 0) != 0x5678) && bound()) {
        progress();
    }

    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    ucs_status_t status = uct_ep_flush(m_ep, UCT_FLUSH_FLAG_CANCEL, &comp);
    ASSERT_TRUE((status == UCS_OK) || (status == UCS_INPROGRESS))
            << ucs_status_string(status);
    if (status == UCS_INPROGRESS) {
        status = wait(&comp);
        EXPECT_TRUE((status == UCS_OK) || (status == UCS_ERR_CANCELED))
                << ucs_status_string(status);
    }
    // and without a completion it now says done
    EXPECT_EQ(UCS_OK, uct_ep_flush(m_ep, UCT_FLUSH_FLAG_CANCEL, NULL));
}

TEST_F(syncmem_fault_test, flush_cancel_of_idle_and_connecting_endpoints)
{
    EXPECT_EQ(UCS_OK, flush_wait(m_ep)); // connected, nothing outstanding
    EXPECT_EQ(UCS_OK, uct_ep_flush(m_ep, UCT_FLUSH_FLAG_CANCEL, NULL));

    uct_ep_h fresh = connect(m_sender, m_receiver); // handshake not done
    ASSERT_NE(nullptr, fresh);
    EXPECT_EQ(UCS_OK, flush_until_done([&] {
        return uct_ep_flush(fresh, UCT_FLUSH_FLAG_CANCEL, NULL);
    }));
    uint64_t v = 1;
    EXPECT_EQ(UCS_ERR_CANCELED, uct_ep_put_short(fresh, &v, 8, 0, 0));
    EXPECT_TRUE(m_errors.empty());
}

TEST_F(syncmem_fault_test, flush_cancel_after_the_endpoint_failed)
{
    buffer *dst = alloc(64, 0);
    uint64_t v = 7;
    ASSERT_EQ(UCS_OK, retry([&] { // outside any registration
        return uct_ep_put_short(m_ep, &v, 8,
                                (uintptr_t)dst->data.data() + (1 << 20),
                                dst->rkey.rkey);
    }));
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, flush_wait(m_ep));
    ASSERT_EQ(1u, m_errors.size());

    EXPECT_EQ(UCS_OK, flush_until_done([&] {
        return uct_ep_flush(m_ep, UCT_FLUSH_FLAG_CANCEL, NULL);
    }));
    EXPECT_EQ(1u, m_errors.size());
}

// iface flush with cancel cancels every endpoint, with or without a
// completion, with work outstanding on each.
TEST_F(syncmem_fault_test, iface_flush_cancel_covers_every_endpoint)
{
    uct_iface_h third;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &third));
    uct_ep_h ep2 = connect(m_sender, third);
    const size_t size = 256 * 1024;
    buffer *src = alloc(size, 1), *d1 = alloc(size, 0), *d2 = alloc(size, 0);
    uct_iov_t iov = { src->data.data(), size, src->memh, 0, 1 };
    uct_completion_t ops = { [](uct_completion_t*) {}, 1, UCS_OK };

    for (int i = 0; i < 4; ++i) {
        for (auto t : { std::make_pair(m_ep, d1), std::make_pair(ep2, d2) }) {
            ASSERT_EQ(UCS_INPROGRESS, retry([&] {
                return uct_ep_put_zcopy(t.first, &iov, 1,
                                        (uintptr_t)t.second->data.data(),
                                        t.second->rkey.rkey, &ops);
            }));
            ++ops.count;
        }
    }
    --ops.count;

    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    ucs_status_t status = uct_iface_flush(m_sender, UCT_FLUSH_FLAG_CANCEL,
                                          &comp);
    ASSERT_TRUE((status == UCS_OK) || (status == UCS_INPROGRESS))
            << ucs_status_string(status);
    if (status == UCS_INPROGRESS) {
        wait(&comp);
        EXPECT_EQ(0, comp.count);
    }
    EXPECT_NE(UCS_ERR_TIMED_OUT, wait(&ops)) << "operations never completed";
    EXPECT_TRUE((ops.status == UCS_OK) || (ops.status == UCS_ERR_CANCELED));
    EXPECT_EQ(UCS_OK, flush_until_done([&] {
        return uct_iface_flush(m_sender, UCT_FLUSH_FLAG_CANCEL, NULL);
    }));
    uint64_t v = 1;
    EXPECT_EQ(UCS_ERR_CANCELED, uct_ep_put_short(ep2, &v, 8, 0, 0));
    EXPECT_TRUE(m_errors.empty());
}

// A QP moved to the error state (as a port event or a broken link would)
// is replaced; every put lands, every AM arrives once, the user hears of
// nothing, and the endpoint goes on working.
TEST_F(syncmem_fault_test, reconnect_after_qp_error_loses_nothing)
{
    const uint64_t count = 600;
    am_counter ams;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_receiver, AM_ID,
                                               am_counter::cb, &ams, 0));
    buffer *dst = alloc(count * 8, 0), *got = alloc(count * 8, 0);

    for (uint64_t i = 0; i < count; ++i) {
        uint64_t v = i + 1;
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_put_short(m_ep, &v, 8,
                                    (uintptr_t)dst->data.data() + i * 8,
                                    dst->rkey.rkey);
        })) << i;
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_am_short(m_ep, AM_ID, i, NULL, 0);
        })) << i;
        if ((i == 100) || (i == 101) || (i == 400)) {
            // (twice in a row on the same broken QP is no different)
            ASSERT_EQ(UCS_OK, uct_syncmem_ep_inject_qp_error(m_ep));
        }
    }
    EXPECT_EQ(UCS_OK, flush_wait(m_ep));
    EXPECT_TRUE(m_errors.empty());
    EXPECT_GE(uct_syncmem_ep_reconnects(m_ep), 2u);

    // read it all back through the same (reconnected) endpoint
    uct_iov_t iov = { got->data.data(), count * 8, got->memh, 0, 1 };
    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    ucs_status_t status = retry([&] {
        return uct_ep_get_zcopy(m_ep, &iov, 1, (uintptr_t)dst->data.data(),
                                dst->rkey.rkey, &comp);
    });
    ASSERT_EQ(UCS_INPROGRESS, status);
    ASSERT_EQ(UCS_OK, wait(&comp));
    for (uint64_t i = 0; i < count; ++i) {
        ASSERT_EQ(i + 1, word(dst, i)) << i;
        ASSERT_EQ(i + 1, word(got, i)) << i;
    }
    for (long i = 0; (i < 1000000) && (ams.seen.size() < count); ++i) {
        progress();
    }
    EXPECT_TRUE(ams.exactly_once(count));
}

// UCX_SYNCMEM_FAULT_QP_ERROR, the fault bench's qp_error row: the iface's
// async timer moves every connected endpoint's QP to the error state again
// and again, and each time the endpoint reconnects; puts made all along
// land, each in its place, and no endpoint fails. An iface without the
// knob is never touched.
TEST_F(syncmem_fault_test, fault_qp_error_timer_breaks_and_recovers)
{
    const unsigned want_reconnects = 3;
    const size_t slots             = 4096;
    uct_iface_h sender;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &sender,
                                 {{"FAULT_QP_ERROR", "100ms"}}));
    uct_ep_h ep = connect(sender, m_receiver);
    ASSERT_NE(nullptr, ep);
    buffer *dst = alloc(slots * 8, 0);

    uint64_t n = 0;
    wait_bound bound("the FAULT_QP_ERROR timer to break the QP 3 times");
    while ((uct_syncmem_ep_reconnects(ep) < want_reconnects) && bound()) {
        uint64_t v = ++n;
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_put_short(ep, &v, 8,
                                    (uintptr_t)dst->data.data() +
                                    ((v - 1) % slots) * 8, dst->rkey.rkey);
        })) << v;
        progress();
    }
    ASSERT_GE(uct_syncmem_ep_reconnects(ep), want_reconnects)
            << n << " puts posted";
    ASSERT_EQ(UCS_OK, flush_wait(ep));
    EXPECT_TRUE(m_errors.empty());

    // the last put to each slot is what it holds
    for (size_t i = 0; i < std::min<uint64_t>(n, slots); ++i) {
        uint64_t last = n - ((n - 1 - i) % slots);
        ASSERT_EQ(last, word(dst, i)) << "slot " << i << " of " << n
                                      << " puts";
    }
    EXPECT_EQ(0u, uct_syncmem_ep_reconnects(m_ep)) << "an iface without"
                                                      " the knob";
    printf("%lu puts, %u reconnects\n", (unsigned long)n,
           uct_syncmem_ep_reconnects(ep));
}

// count fetch-adds of 1 on a counter, with ep's QP forced to the error
// state every 50 of them (inject_qp_error); what they fetched and how
// they completed.
struct fetch_adds {
    std::vector<uint64_t> results;
    int                   ok = 0, reset = 0, other = 0;
    uint64_t              total = 0;   /* the counter afterwards */
    ucs_status_t          flush = UCS_OK;
};

struct fetch_add_comp {
    uct_completion_t comp;
    fetch_adds       *f;
};

static void fetch_add_done(uct_completion_t *c)
{
    fetch_adds *f = ucs_container_of(c, fetch_add_comp, comp)->f;
    ++((c->status == UCS_OK) ? f->ok :
       (c->status == UCS_ERR_CONNECTION_RESET) ? f->reset : f->other);
}

class syncmem_fault_amo_test : public syncmem_fault_test {
protected:
    // Forces ep's QP to the error state once every request posted before
    // the last time (*sn: the last then) has completed, so that each time
    // fails a later request: one failing again right after its resume
    // gets a new QP (syncmem_reconnect.c), and these tests count on
    // resumes.
    void inject_qp_error(uct_ep_h ep, int *injected, uint16_t *sn) {
        uint16_t posted, acked;

        uct_syncmem_ep_tx_sns(ep, &posted, &acked);
        for (long n = 0; *injected && ((int16_t)(acked - *sn) < 0) &&
                         (n < 1000000); ++n) {
            progress();
            uct_syncmem_ep_tx_sns(ep, &posted, &acked);
        }
        ASSERT_TRUE(!*injected || ((int16_t)(acked - *sn) >= 0))
                << "request " << *sn << " never completed (last "
                << acked << ")";
        *injected = 1;
        *sn       = posted;
        ASSERT_EQ(UCS_OK, uct_syncmem_ep_inject_qp_error(ep));
    }

    void run(uct_ep_h ep, buffer *counter, int count, fetch_adds &f) {
        std::vector<fetch_add_comp> comps(count);
        int injected = 0;
        uint16_t sn  = 0;

        f.results.assign(count, 0);
        for (int i = 0; i < count; ++i) {
            comps[i] = { { fetch_add_done, 1, UCS_OK }, &f };
            ucs_status_t status = retry([&] {
                return uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_ADD, 1,
                                             &f.results[i],
                                             (uintptr_t)counter->data.data(),
                                             counter->rkey.rkey,
                                             &comps[i].comp);
            });
            if (status == UCS_OK) {
                ++f.ok;
            } else {
                ASSERT_EQ(UCS_INPROGRESS, status);
            }
            if ((i % 50) == 10) {
                ASSERT_NO_FATAL_FAILURE(inject_qp_error(ep, &injected, &sn));
            }
        }
        f.flush = flush_wait(ep);
        for (long i = 0; (i < 1000000) && (f.ok + f.reset + f.other < count);
             ++i) {
            progress();
        }
        ASSERT_EQ(count, f.ok + f.reset + f.other);
        f.total = word(counter, 0);
    }

    // count posted adds of 1, with ep's QP forced to error every 50
    void post_adds(uct_ep_h ep, buffer *counter, uint64_t count) {
        int injected = 0;
        uint16_t sn  = 0;

        for (uint64_t i = 0; i < count; ++i) {
            ASSERT_EQ(UCS_OK, retry([&] {
                return uct_ep_atomic64_post(ep, UCT_ATOMIC_OP_ADD, 1,
                                            (uintptr_t)counter->data.data(),
                                            counter->rkey.rkey);
            })) << i;
            if ((i % 50) == 10) {
                ASSERT_NO_FATAL_FAILURE(inject_qp_error(ep, &injected, &sn));
            }
        }
    }

    // a fetch-add of 0 on a working endpoint: what the counter holds
    void check_alive(uct_ep_h ep, buffer *counter, uint64_t expect) {
        uint64_t v         = 0;
        uct_completion_t c = { [](uct_completion_t*) {}, 1, UCS_OK };
        ucs_status_t status = retry([&] {
            return uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_ADD, 0, &v,
                                         (uintptr_t)counter->data.data(),
                                         counter->rkey.rkey, &c);
        });
        if (status == UCS_INPROGRESS) {
            status = wait(&c);
        }
        EXPECT_EQ(UCS_OK, status);
        EXPECT_EQ(expect, v);
    }

    // an endpoint that connects a new QP on a reconnect, never resumes
    uct_ep_h ep_without_resume() {
        uct_iface_h iface;
        EXPECT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface,
                                     {{"RECONNECT_RESUME", "n"}}));
        return connect(iface, m_receiver);
    }
};

// The peer's QP outlives a failure of ours (here forced; a link outage
// does the same): ours is resumed at the PSN where it stopped, so the
// peer's responder answers a replayed atomic it already ran from its
// resources. Every fetch-add succeeds, runs once, and fetches a value no
// other one fetched.
TEST_F(syncmem_fault_amo_test, reconnect_resumes_and_runs_every_atomic_once)
{
    buffer *counter = alloc(8, 0);
    const int count = 200;
    fetch_adds f;

    run(m_ep, counter, count, f);
    EXPECT_EQ(UCS_OK, f.flush) << ucs_status_string(f.flush);
    EXPECT_EQ(count, f.ok) << f.reset << " reset, " << f.other << " other";
    EXPECT_EQ((uint64_t)count, f.total);
    EXPECT_GE(uct_syncmem_ep_reconnects(m_ep), 1u);
    std::vector<uint64_t> sorted = f.results;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < count; ++i) {
        ASSERT_EQ((uint64_t)i, sorted[i]) << "fetched twice or never";
    }
    EXPECT_TRUE(m_errors.empty());
    check_alive(m_ep, counter, count);
}

// Without resume (a new QP), an atomic whose outcome the reconnect lost
// fails with UCS_ERR_CONNECTION_RESET, none runs twice, and the counter
// agrees with what succeeded.
TEST_F(syncmem_fault_amo_test, reconnect_never_runs_an_atomic_twice)
{
    buffer *counter = alloc(8, 0);
    uct_ep_h ep     = ep_without_resume();
    fetch_adds f;

    run(ep, counter, 200, f);
    // each lost add reported itself: the flush has nothing to add
    EXPECT_EQ(UCS_OK, f.flush) << ucs_status_string(f.flush);
    EXPECT_EQ(0, f.other);
    EXPECT_GE(f.total, (uint64_t)f.ok) << "an add that succeeded is missing";
    EXPECT_LE(f.total, (uint64_t)(f.ok + f.reset)) << "an add ran twice";
    EXPECT_GE(uct_syncmem_ep_reconnects(ep), 1u);
    EXPECT_TRUE(m_errors.empty());
    check_alive(ep, counter, f.total);
}

// Without resume, a posted atomic (no completion) whose outcome a reconnect
// lost can only be reported by the next flush, once; none runs twice.
TEST_F(syncmem_fault_amo_test, reconnect_reports_lost_posted_atomics_in_the_flush)
{
    buffer *counter = alloc(8, 0);
    uct_ep_h ep     = ep_without_resume();
    const uint64_t count = 200;

    post_adds(ep, counter, count);
    ucs_status_t status = flush_wait(ep);
    uint64_t total      = word(counter, 0);
    EXPECT_GE(uct_syncmem_ep_reconnects(ep), 1u);
    EXPECT_LE(total, count) << "an add ran twice";
    if (total < count) {
        EXPECT_EQ(UCS_ERR_CONNECTION_RESET, status)
                << (count - total) << " adds did not run and nothing said so";
    }
    EXPECT_EQ(UCS_OK, flush_wait(ep)) << "reported more than once";
    EXPECT_TRUE(m_errors.empty());
}

// Resumed, posted atomics all run, once, and the flush reports nothing.
TEST_F(syncmem_fault_amo_test, reconnect_resumes_posted_atomics)
{
    buffer *counter = alloc(8, 0);
    const uint64_t count = 200;

    post_adds(m_ep, counter, count);
    EXPECT_EQ(UCS_OK, flush_wait(m_ep));
    EXPECT_EQ(count, word(counter, 0));
    EXPECT_GE(uct_syncmem_ep_reconnects(m_ep), 1u);
    EXPECT_TRUE(m_errors.empty());
}

// With UCX_SYNCMEM_RECONNECT=n the same error fails the endpoint, once.
TEST_F(syncmem_fault_test, without_reconnect_a_qp_error_fails_the_endpoint)
{
    uct_iface_h iface;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface,
                                 {{"RECONNECT", "n"}}));
    uct_ep_h ep = connect(iface, m_receiver);
    buffer *dst = alloc(64, 0);
    EXPECT_EQ(UCS_OK, flush_until_done([&] { // connected
        return uct_iface_flush(iface, 0, NULL);
    }));

    ASSERT_EQ(UCS_OK, uct_syncmem_ep_inject_qp_error(ep));
    ASSERT_EQ(8, put_bcopy(ep, 1, dst, 0));
    EXPECT_NE(UCS_OK, flush_wait(ep));
    ASSERT_EQ(1u, m_errors.size());
    EXPECT_EQ(ep, m_errors[0].first);
    EXPECT_EQ(0u, uct_syncmem_ep_reconnects(ep));
}

// A peer that refuses a valid request as invalid (IBV_WC_REM_INV_REQ_ERR;
// Soft-RoCE 6.1 does it after re-sending a packet its netdev dropped, here
// the peer's QP stops taking RDMA writes): the endpoint reconnects once,
// the put is done on the new QP, and the user hears of nothing.
TEST_F(syncmem_fault_test, a_refused_request_is_done_on_a_new_qp)
{
    uct_ep_h ep;
    buffer *dst;
    ucs_status_t status;
    ASSERT_NO_FATAL_FAILURE(put_refused(0, &ep, &dst, &status));
    EXPECT_EQ(UCS_OK, status);
    EXPECT_EQ(1u, word(dst, 0));
    EXPECT_EQ(2u, word(dst, 1));
    EXPECT_TRUE(m_errors.empty());
}

// The same request refused again, on the new QP too, is a real refusal:
// the endpoint fails after one reconnect (no loop of them), and the put is
// reported failed.
TEST_F(syncmem_fault_test, a_request_refused_twice_fails_the_endpoint)
{
    uct_ep_h ep;
    buffer *dst;
    ucs_status_t status;
    ASSERT_NO_FATAL_FAILURE(put_refused(1, &ep, &dst, &status));
    EXPECT_NE(UCS_OK, status);
    ASSERT_EQ(1u, m_errors.size());
    EXPECT_EQ(ep, m_errors[0].first);
    EXPECT_EQ(0u, word(dst, 1));
}

// UCX_SYNCMEM_OP_TIMEOUT: a receiver that never calls progress runs out of
// buffers and its sender's messages wait (RNR) forever; the deadline fails
// the endpoint and everything outstanding on it.
TEST_F(syncmem_fault_test, op_timeout_fails_a_stuck_endpoint)
{
    uct_iface_h sender, stuck;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &sender,
                                 {{"OP_TIMEOUT", "300ms"}}));
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &stuck,
                                 {{"RX_QUEUE_LEN", "16"}}, {}, new_worker()));
    am_counter ams;
    uct_iface_set_am_handler(stuck, AM_ID, am_counter::cb, &ams, 0);
    uct_ep_h ep = connect(sender, stuck);

    ucs_status_t status = UCS_OK;
    int sent;
    for (sent = 0; (sent < 64) && (status == UCS_OK); ++sent) {
        status = retry([&] { return uct_ep_am_short(ep, AM_ID, sent, NULL, 0); });
    }
    EXPECT_EQ(UCS_OK, status) << "posting failed before the deadline";
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, flush_wait(ep));
    ASSERT_EQ(1u, m_errors.size());
    EXPECT_EQ(ep, m_errors[0].first);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, m_errors[0].second);
    EXPECT_TRUE(ams.seen.empty());
}

// UCX_SYNCMEM_RC_STALL_TIMEOUT: a peer that stops answering without any
// error (here a receiver with no buffers, which its sender waits for in
// hardware, RNR, forever; Soft-RoCE that stopped retransmitting looks the
// same) gets its QP replaced after the stall time. Once the receiver runs
// again every message arrives exactly once and the user heard of nothing.
TEST_F(syncmem_fault_test, stall_timeout_replaces_a_silent_qp)
{
    stuck_receiver r;
    ASSERT_NO_FATAL_FAILURE(stuck_receiver_start({{"RC_STALL_TIMEOUT", "300ms"}}, &r));
    // only the sender progresses: message 17 finds no buffer
    for (long i = 0; (i < 3000000) && (uct_syncmem_ep_reconnects(r.ep) == 0);
         ++i) {
        progress();
    }
    EXPECT_GE(uct_syncmem_ep_reconnects(r.ep), 1u)
            << "the stall went unnoticed";
    EXPECT_TRUE(r.ams.seen.empty());

    // the receiver runs again
    receiver_runs_again(r);
    EXPECT_TRUE(m_errors.empty());
}

// A reconnect the stall check started tries as long as that stall was
// allowed, however short RECONNECT_TIMEOUT: the peer was late, not gone,
// and what made it late delays its answer to the handshake too (a 24-rank
// MPI job on two vCPUs: the peer's kernel could not resolve our address
// for 7 s). Here the receiver's async thread is held from before the stall
// until the sender has reconnected for 3 RECONNECT_TIMEOUTs. Before, the
// endpoint failed with UCS_ERR_ENDPOINT_TIMEOUT.
TEST_F(syncmem_fault_test, a_stall_reconnect_waits_for_a_late_handshake)
{
    stuck_receiver r;
    ucs_async_context_t *async;
    ASSERT_NO_FATAL_FAILURE(stuck_receiver_start(
            {{"RC_STALL_TIMEOUT", "3s"}, {"RECONNECT_TIMEOUT", "300ms"},
             {"CM_TIMEOUT", "100ms"}}, &r, &async));
    UCS_ASYNC_BLOCK(async);
    bool stalled = wait_for("the stall", [&] {
        return uct_syncmem_ep_reconnects(r.ep) >= 1;
    });
    // 900 ms of the sender alone, its REQs unanswered
    auto until = std::chrono::steady_clock::now() +
                 std::chrono::milliseconds(900);
    while (stalled && (std::chrono::steady_clock::now() < until)) {
        progress();
    }
    EXPECT_TRUE(m_errors.empty())
            << "the reconnect gave up after RECONNECT_TIMEOUT, before the"
               " stall time";
    UCS_ASYNC_UNBLOCK(async);
    ucs_async_check_miss(async); // the REQs that came while it was held
    ASSERT_TRUE(stalled);

    receiver_runs_again(r);
    EXPECT_TRUE(m_errors.empty());
    EXPECT_EQ(1u, uct_syncmem_ep_reconnects(r.ep));
}

// RC_STALL_TIMEOUT 'auto' while the port shows no link trouble: a receiver
// that posts no buffers for 4 s (its sender waits in hardware, RNR) is
// late, not wedged, and its sender's QP is kept. Before, 'auto' took it for
// wedged after 2.1 s (the time it still allows after link trouble).
TEST_F(syncmem_fault_test, auto_stall_time_spares_a_late_receiver)
{
    stuck_receiver r;
    ASSERT_NO_FATAL_FAILURE(stuck_receiver_start({{"RC_STALL_TIMEOUT", "auto"}}, &r));
    // 4 s of the sender alone: message 17 waits for a buffer (RNR)
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(4);
    while (std::chrono::steady_clock::now() < until) {
        progress();
    }
    EXPECT_EQ(0u, uct_syncmem_ep_reconnects(r.ep))
            << "a receiver 4 s late was taken for a wedged QP";
    EXPECT_TRUE(r.ams.seen.empty());

    // the receiver runs again: everything arrives, once
    receiver_runs_again(r);
    EXPECT_TRUE(m_errors.empty());
}

// A long operation is not a stall. A put keeps sending (its send PSN
// advances), so it is left alone however long it takes; a get's responses
// do not move the send PSN, so a long one looks stalled and costs
// reconnects, each doubling the time allowed, until it completes, intact.
TEST_F(syncmem_fault_test, stall_timeout_spares_long_puts_and_completes_long_gets)
{
    const size_t size = 32 << 20; // ~1 s or more on Soft-RoCE in the guest
    uct_iface_h iface;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface,
                                 {{"RC_STALL_TIMEOUT", "200ms"}}));
    uct_ep_h ep = connect(iface, m_receiver);
    buffer *src = alloc(size, 0), *dst = alloc(size, 0), *back = alloc(size, 0);
    for (size_t i = 0; i < size; i += 8) {
        uint64_t v = i * 0x9e3779b97f4a7c15ull;
        memcpy(src->data.data() + i, &v, 8);
    }

    auto run = [&](std::function<ucs_status_t(uct_completion_t*)> op) {
        uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
        ucs_status_t status   = retry([&] { return op(&comp); });
        if (status != UCS_INPROGRESS) {
            return status;
        }
        for (long i = 0; (i < 200000000L) && (comp.count > 0); ++i) {
            progress();
        }
        return (comp.count > 0) ? UCS_ERR_TIMED_OUT : comp.status;
    };

    uct_iov_t put_iov = { src->data.data(), size, src->memh, 0, 1 };
    EXPECT_EQ(UCS_OK, run([&](uct_completion_t *c) {
        return uct_ep_put_zcopy(ep, &put_iov, 1, (uintptr_t)dst->data.data(),
                                dst->rkey.rkey, c);
    }));
    EXPECT_EQ(0u, uct_syncmem_ep_reconnects(ep)) << "a long put taken for a stall";

    uct_iov_t get_iov = { back->data.data(), size, back->memh, 0, 1 };
    EXPECT_EQ(UCS_OK, run([&](uct_completion_t *c) {
        return uct_ep_get_zcopy(ep, &get_iov, 1, (uintptr_t)dst->data.data(),
                                dst->rkey.rkey, c);
    }));
    EXPECT_TRUE(0 == memcmp(src->data.data(), dst->data.data(), size));
    EXPECT_TRUE(0 == memcmp(src->data.data(), back->data.data(), size));
    EXPECT_TRUE(m_errors.empty());
    printf("long get: %u reconnects\n", uct_syncmem_ep_reconnects(ep));
}
