/* SPDX-License-Identifier: BSD-3-Clause */
// Fixture of the reconnect tests (test_reconnect.cc, test_reconnect_order.cc):
// one endpoint, a workload of every kind and size class of operation (post,
// post_some), QP failures forced (uct_syncmem_ep_inject_qp_error, like a
// broken link), and check_all: every byte, every completion status,
// completions in posting order, atomics each once, AMs each delivered once.
// Everything here is local to the file that includes it.
#ifndef SYNCMEM_TEST_RECONNECT_H_
#define SYNCMEM_TEST_RECONNECT_H_

#include "syncmem_rma_test.h"

extern "C" {
#include "uct_syncmem/syncmem_ep.h"
#include "uct_syncmem/syncmem_qp.h"
#include "uct_syncmem/syncmem_hooks.h"
}

#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

const uint8_t AM_ID = 9;

// The byte at offset i of get source region r: never written by the test.
uint8_t src_byte(size_t r, size_t i)
{
    return (uint8_t)((i * 131 + r * 29 + (i >> 8)) ^ 0x5a);
}

// The byte at offset i of what op n puts or sends.
uint8_t op_byte(uint64_t n, size_t i)
{
    return (uint8_t)((n * 0x9e3779b9u >> 11) + i * 7 + (i >> 9));
}

struct op_comp {
    uct_completion_t      comp;
    ucs_status_t          status;
    bool                  done;
    uint64_t              n;     // the op's number
    std::vector<uint64_t> *order; // notes n here when called (if not NULL)
};

void op_done(uct_completion_t *c)
{
    op_comp *oc = ucs_container_of(c, op_comp, comp);
    oc->status  = c->status;
    oc->done    = true;
    if (oc->order != nullptr) {
        oc->order->push_back(oc->n);
    }
}

struct pack_arg {
    uint64_t n;
    size_t   length;
};

size_t pack_op(void *dest, void *arg)
{
    const pack_arg *a = static_cast<pack_arg*>(arg);
    uint8_t *d        = static_cast<uint8_t*>(dest);
    for (size_t i = 0; i < a->length; ++i) {
        d[i] = op_byte(a->n, i);
    }
    if (a->length >= 8) {
        memcpy(d, &a->n, 8); // active messages: which one
    }
    return a->length;
}

void unpack_get(void *arg, const void *data, size_t length)
{
    memcpy(arg, data, length);
}

class syncmem_reconnect_test : public syncmem_rma_test {
protected:
    enum kind {
        PUT_SHORT, PUT_BCOPY, PUT_ZCOPY, GET_BCOPY, GET_ZCOPY,
        AM_SHORT, AM_BCOPY, AM_ZCOPY, FADD64, CSWAP64, FADD32, POST_ADD64,
        NUM_KINDS
    };

    // One operation of the workload and what it must leave behind.
    struct op {
        kind     k;
        uint64_t n;        // its number: what it writes or sends
        size_t   length;
        size_t   offset;   // in the put destination / get source / get dest
        size_t   region;   // get source region
        std::unique_ptr<op_comp> comp;
        uint64_t fetched = 0;
        uint32_t fetched32 = 0;
        uint64_t prev = 0;  // compare-and-swap: what it must find
        bool waits = false; // returned UCS_INPROGRESS: its completion comes
    };

    static const size_t REGION = 256 * 1024;

    void SetUp() override {
        syncmem_rma_test::SetUp();
        m_src  = alloc(4 * REGION, 0);
        m_dst  = alloc(32 << 20, 0);
        m_back = alloc(32 << 20, 0xee);
        m_amo  = alloc(64, 0);
        for (size_t r = 0; r < 4; ++r) {
            for (size_t i = 0; i < REGION; ++i) {
                m_src->data[r * REGION + i] = src_byte(r, i);
            }
        }
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_receiver, AM_ID, am_cb,
                                                   this, 0));
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_sender, AM_ID, am_cb,
                                                   this, 0));
    }

    static ucs_status_t am_cb(void *arg, void *data, size_t length,
                              unsigned flags) {
        auto *self = static_cast<syncmem_reconnect_test*>(arg);
        uint64_t n;
        memcpy(&n, data, 8);
        const uint8_t *d = static_cast<uint8_t*>(data);
        bool intact = true;
        for (size_t i = 8; i < length; ++i) {
            intact = intact && (d[i] == op_byte(n, i));
        }
        self->m_am_seen[n].push_back(intact ? length : (size_t)-1);
        return UCS_OK;
    }

    // Retries op while it answers NO_RESOURCE, progressing in between, at
    // most 5000000 times (then UCS_ERR_TIMED_OUT: a hang fails).
    template <typename F> ucs_status_t bounded(F op) {
        ucs_status_t status = op();
        for (long i = 0; (i < 5000000) && (status == UCS_ERR_NO_RESOURCE);
             ++i) {
            progress();
            status = op();
        }
        return (status == UCS_ERR_NO_RESOURCE) ? UCS_ERR_TIMED_OUT : status;
    }

    uct_syncmem_ep_t *sep() {
        return ucs_derived_of(m_ep, uct_syncmem_ep_t);
    }

    // Posts operation number n (of kind k; a put_zcopy of length if not
    // 0), retrying on NO_RESOURCE.
    void post(kind k, size_t length = 0) {
        std::unique_ptr<op> o(new op);
        uint64_t n   = m_ops.size();
        o->k         = k;
        o->n         = n;
        o->comp.reset(new op_comp{{op_done, 1, UCS_OK}, UCS_OK, false, n,
                                  &m_order});
        uct_completion_t *c = &o->comp->comp;
        size_t sizes[] = { 8, 1000, 3000, 9000, 40000, 130000 };
        size_t sz      = sizes[(n / NUM_KINDS) % 6];
        ucs_status_t status;
        ssize_t len;

        switch (k) {
        case PUT_SHORT:
        case AM_SHORT:
            o->length = (k == AM_SHORT) ? 8 : 8 + (n % 13) * 8;
            break;
        case PUT_BCOPY:
        case AM_BCOPY:
            o->length = std::max<size_t>(8, std::min(sz, m_attr.cap.put.max_bcopy));
            if (k == AM_BCOPY) {
                o->length = std::min(o->length, m_attr.cap.am.max_bcopy);
            }
            break;
        case GET_BCOPY:
            o->length = std::min(sz, m_attr.cap.get.max_bcopy);
            break;
        case AM_ZCOPY:
            o->length = std::max<size_t>(16, std::min(sz, m_attr.cap.am.max_zcopy));
            break;
        case FADD64:
        case CSWAP64:
        case FADD32:
        case POST_ADD64:
            o->length = 8;
            break;
        default:
            o->length = (length != 0) ? length : sz;
            break;
        }
        o->offset = m_cursor;
        m_cursor += (o->length + 63) & ~(size_t)63;
        o->region = n % 4;
        ASSERT_LE(m_cursor, m_dst->data.size() - 64);

        uintptr_t dst = (uintptr_t)m_dst->data.data() + o->offset;
        uintptr_t src = (uintptr_t)m_src->data.data() + o->region * REGION +
                        (n % 7) * 8;
        uint8_t *back = m_back->data.data() + o->offset;
        uint8_t *own  = m_back->data.data() + o->offset; // put/am source
        pack_arg pa   = { n, o->length };
        uct_iov_t iov = { own, o->length, m_back->memh, 0, 1 };
        if ((k == GET_BCOPY) || (k == GET_ZCOPY)) {
            o->length = std::min(o->length, REGION - 64);
        } else if ((k == PUT_ZCOPY) || (k == AM_ZCOPY) || (k == PUT_SHORT)) {
            pack_op(own, &pa);
        }
        if (k == AM_ZCOPY) {
            iov.buffer = own + 8;
            iov.length = o->length - 8;
        }
        uint64_t amo = (uintptr_t)m_amo->data.data();

        status     = UCS_OK;
        long tries = 0; // bounded: a hang fails
        do {
            switch (k) {
            case PUT_SHORT:
                status = uct_ep_put_short(m_ep, own, o->length, dst,
                                          m_dst->rkey.rkey);
                break;
            case PUT_BCOPY:
                len    = uct_ep_put_bcopy(m_ep, pack_op, &pa, dst,
                                          m_dst->rkey.rkey);
                status = (len < 0) ? (ucs_status_t)len : UCS_OK;
                break;
            case PUT_ZCOPY:
                status = uct_ep_put_zcopy(m_ep, &iov, 1, dst, m_dst->rkey.rkey,
                                          c);
                break;
            case GET_BCOPY:
                status = uct_ep_get_bcopy(m_ep, unpack_get, back, o->length,
                                          src, m_src->rkey.rkey, c);
                break;
            case GET_ZCOPY:
                iov.buffer = back;
                iov.length = o->length;
                status = uct_ep_get_zcopy(m_ep, &iov, 1, src, m_src->rkey.rkey,
                                          c);
                break;
            case AM_SHORT:
                status = uct_ep_am_short(m_ep, AM_ID, n, NULL, 0);
                break;
            case AM_BCOPY:
                len    = uct_ep_am_bcopy(m_ep, AM_ID, pack_op, &pa, 0);
                status = (len < 0) ? (ucs_status_t)len : UCS_OK;
                break;
            case AM_ZCOPY:
                status = uct_ep_am_zcopy(m_ep, AM_ID, &n, 8, &iov, 1, 0, c);
                break;
            case FADD64:
                status = uct_ep_atomic64_fetch(m_ep, UCT_ATOMIC_OP_ADD, 1,
                                               &o->fetched, amo,
                                               m_amo->rkey.rkey, c);
                break;
            case CSWAP64:
                // a chain: each swaps in n when it finds its predecessor
                status = uct_ep_atomic_cswap64(m_ep, m_last_swap, n, amo + 8,
                                               m_amo->rkey.rkey, &o->fetched,
                                               c);
                break;
            case FADD32:
                status = uct_ep_atomic32_fetch(m_ep, UCT_ATOMIC_OP_ADD, 1,
                                               &o->fetched32, amo + 16,
                                               m_amo->rkey.rkey, c);
                break;
            case POST_ADD64:
                status = uct_ep_atomic64_post(m_ep, UCT_ATOMIC_OP_ADD, 1,
                                              amo + 24, m_amo->rkey.rkey);
                break;
            default:
                break;
            }
            if (status == UCS_ERR_NO_RESOURCE) {
                ++m_no_resource;
                progress();
            }
        } while ((status == UCS_ERR_NO_RESOURCE) && (++tries < 5000000));

        ASSERT_TRUE((status == UCS_OK) || (status == UCS_INPROGRESS))
                << "op " << n << " kind " << k << ": "
                << ucs_status_string(status);
        if (status == UCS_OK) {
            o->comp->done = true; // done at once, or no completion to wait on
        }
        o->waits = (status == UCS_INPROGRESS);
        if (k == CSWAP64) {
            o->prev     = m_last_swap;
            m_last_swap = n;
        }
        if ((k == AM_SHORT) || (k == AM_BCOPY) || (k == AM_ZCOPY)) {
            m_am_sent.insert(n);
        }
        if (n % 5 == 4) {
            ASSERT_EQ(UCS_OK, uct_ep_fence(m_ep, 0));
        }
        m_ops.push_back(std::move(o));
    }

    // Whether the workload has kind k: gets only with m_gets, atomics only
    // with m_atomics, puts and active messages only with m_others. (A
    // reconnect asks to resume only with no get, and no atomic after a put
    // or send, of unknown outcome: uct_syncmem_replay_resume_risk.)
    bool wanted(kind k) const {
        if ((k == GET_BCOPY) || (k == GET_ZCOPY)) {
            return m_gets;
        }
        return (k >= FADD64) ? m_atomics : m_others;
    }

    // count operations of the kinds wanted, in turn
    void post_some(unsigned count) {
        for (unsigned i = 0; i < count; ++i) {
            kind k;
            do {
                k = (kind)(m_next_kind++ % NUM_KINDS);
            } while (!wanted(k));
            post(k);
        }
    }

    // Fails the QP, waits for the reconnect, fails it again after delay
    // progress calls, waits again; then flushes. Returns whether each
    // reconnect kept the QP pair (resumed).
    //
    // *again: the second failure came at the request the first resume
    // started from (nothing completed in between: Soft-RoCE on 6.12 runs
    // requests in a work queue, so with a short delay they are all still
    // in flight), which by design gets a new QP, not a second resume.
    void fail_twice(unsigned delay, bool *resumed, bool *again = nullptr) {
        uint32_t qpn = sep()->qp->qp_num;
        unsigned gen = uct_syncmem_ep_reconnects(m_ep);

        post_some(60);
        ASSERT_EQ(UCS_OK, uct_syncmem_ep_inject_qp_error(m_ep));
        // (on 6.1 the 60 may all be done already: a QP in error with
        // nothing in flight says so only at the next request)
        post_some(4);
        ASSERT_TRUE(wait_reconnected(gen)) << "first reconnect: " << ep_state();
        *resumed = (qpn == sep()->qp->qp_num);
        note_no_resume(*resumed);
        for (unsigned i = 0; i < delay; ++i) {
            progress();
        }
        qpn = sep()->qp->qp_num;
        gen = uct_syncmem_ep_reconnects(m_ep);
        ASSERT_EQ(UCS_OK, uct_syncmem_ep_inject_qp_error(m_ep));
        post_some(20);
        ASSERT_TRUE(wait_reconnected(gen)) << "second reconnect: " << ep_state();
        note_no_resume(qpn == sep()->qp->qp_num);
        if (again != nullptr) {
            *again = sep()->reconnect.resumed_once &&
                     (sep()->reconnect.resumed_sn == sep()->reconnect.fail_sn);
        }
        *resumed = *resumed && (qpn == sep()->qp->qp_num);
        m_resumed_only = m_resumed_only && *resumed;
        // a new QP: a posted atomic of unknown outcome is the flush's to say
        ucs_status_t status = flush_wait();
        ASSERT_TRUE((status == UCS_OK) ||
                    (!*resumed && (status == UCS_ERR_CONNECTION_RESET)))
                << ucs_status_string(status);
    }

    // After a reconnect: why it took a new QP, if it did (m_no_resume).
    void note_no_resume(bool resumed) {
        if (resumed) {
            return;
        }
        const char *why = sep()->reconnect.no_resume;
        m_no_resume.push_back(why ? why : "the peer did not keep its QP");
    }

    // Progresses (bounded) until the endpoint is connected again after
    // its reconnect number gen; false if it never was.
    bool wait_reconnected(unsigned gen) {
        for (long i = 0; i < 5000000; ++i) {
            if ((uct_syncmem_ep_reconnects(m_ep) > gen) &&
                (sep()->state == UCT_SYNCMEM_EP_CONNECTED)) {
                return true;
            }
            if (sep()->state == UCT_SYNCMEM_EP_FAILED) {
                return false;
            }
            progress();
        }
        return false;
    }

    // (its completion lives as long as the fixture: a flush that never
    // completed is completed by the endpoint's destruction in TearDown)
    ucs_status_t flush_wait() {
        m_flush_comps.push_back({ [](uct_completion_t*) {}, 1, UCS_OK });
        uct_completion_t &comp = m_flush_comps.back();
        ucs_status_t status    = bounded([&] {
            return uct_ep_flush(m_ep, 0, &comp);
        });
        if (status != UCS_INPROGRESS) {
            return status;
        }
        for (long i = 0; (i < 5000000) && (comp.count > 0); ++i) {
            progress();
        }
        if (comp.count > 0) {
            ADD_FAILURE() << "flush never completed: " << ep_state();
            return UCS_ERR_TIMED_OUT;
        }
        return comp.status;
    }

    // What a test that waited in vain must say: the endpoint's state, its
    // requests, and the QPs' states.
    std::string ep_state() {
        uct_syncmem_ep_t *ep = sep();
        uint32_t rq_psn;
        char buf[512];

        snprintf(buf, sizeof(buf),
                 "ep state %d tx.sn %u acked_sn %u sig_sn %u"
                 " available %d outstanding %zu; fail_sn %u old_last_sn %u"
                 " lost %u; QP 0x%x state %d, old QP %s (state %d);"
                 " cm.rep %d gen %u",
                 ep->state, ep->tx.sn, ep->tx.acked_sn,
                 ep->tx.sig_sn, ep->tx.available,
                 ucs_queue_length(&ep->tx.outstanding), ep->reconnect.fail_sn,
                 ep->reconnect.old_last_sn, ep->lost.count, ep->qp->qp_num,
                 (int)uct_syncmem_qp_query(ep->qp, &rq_psn),
                 (ep->reconnect.old_qp != nullptr) ? "present" : "none",
                 (ep->reconnect.old_qp != nullptr) ?
                 (int)uct_syncmem_qp_query(ep->reconnect.old_qp, &rq_psn) : -1,
                 ep->cm.rep, ep->cm.gen);
        return buf + qp_psns(ep);
    }

    // The send PSN the QP is at, and the one the replay ring counts.
    std::string qp_psns(uct_syncmem_ep_t *ep) {
        struct ibv_qp_attr attr = {};
        struct ibv_qp_init_attr init;
        char buf[128];

        ibv_query_qp(ep->qp, &attr, IBV_QP_SQ_PSN, &init);
        snprintf(buf, sizeof(buf), "; sq_psn %u, the ring's next PSN %u",
                 attr.sq_psn, ep->replay.next_psn & UCT_SYNCMEM_PSN_MASK);
        return buf;
    }

    // Every completion in, every byte as it must be; atomics each once.
    void check_all() {
        std::set<uint64_t> fadd32;
        std::map<uint64_t, size_t> fadd64_by; // fetched: op
        size_t posted_adds = 0, fadds_ok = 0, fadd32_ok = 0;
        bool chain = true; // every compare-and-swap so far succeeded

        for (long i = 0; i < 1000000; ++i) {
            if (m_am_seen.size() >= m_am_sent.size()) {
                break;
            }
            progress();
        }
        for (auto &o : m_ops) {
            SCOPED_TRACE("op " + std::to_string(o->n) + " kind " +
                         std::to_string(o->k) + " length " +
                         std::to_string(o->length));
            ASSERT_TRUE(o->comp->done) << "never completed";
            ucs_status_t st = o->comp->status;
            bool atomic     = (o->k >= FADD64);
            if (atomic) {
                ASSERT_TRUE((st == UCS_OK) || (st == UCS_ERR_CONNECTION_RESET))
                        << ucs_status_string(st);
            } else {
                ASSERT_EQ(UCS_OK, st) << ucs_status_string(st);
            }
            const uint8_t *dst  = m_dst->data.data() + o->offset;
            const uint8_t *back = m_back->data.data() + o->offset;
            const uint8_t *src  = m_src->data.data() + o->region * REGION +
                                  (o->n % 7) * 8;
            switch (o->k) {
            case PUT_SHORT:
            case PUT_BCOPY:
            case PUT_ZCOPY:
                for (size_t i = 0; i < o->length; ++i) {
                    ASSERT_EQ(put_byte(*o, i), dst[i]) << "put: byte " << i;
                }
                break;
            case GET_BCOPY:
            case GET_ZCOPY:
                for (size_t i = 0; i < o->length; ++i) {
                    ASSERT_EQ(src[i], back[i])
                            << "get completed with UCS_OK, byte " << i
                            << " not what the source holds (0xee: never"
                               " written)";
                }
                break;
            case FADD64:
                if (st == UCS_OK) {
                    ++fadds_ok;
                    auto seen = fadd64_by.emplace(o->fetched, o->n);
                    ASSERT_TRUE(seen.second)
                            << "fetched " << o->fetched << " twice, by op "
                            << seen.first->second << " too";
                }
                break;
            case FADD32:
                if (st == UCS_OK) {
                    ++fadd32_ok;
                    ASSERT_TRUE(fadd32.insert(o->fetched32).second)
                            << "fetched " << o->fetched32 << " twice";
                }
                break;
            case CSWAP64:
                // (after one of unknown outcome the chain proves nothing)
                chain = chain && (st == UCS_OK);
                if (chain) {
                    ASSERT_EQ(o->prev, o->fetched) << "compare-and-swap found"
                                                      " another value";
                }
                break;
            case POST_ADD64:
                ++posted_adds;
                break;
            default:
                break;
            }
        }
        uint64_t w[4];
        memcpy(w, m_amo->data.data(), sizeof(w));
        // with resume every atomic succeeds and runs once
        // fetched values are distinct, so none ran twice; with only resumes
        // each ran exactly once, and the swap chain is unbroken
        EXPECT_LE(fadds_ok, w[0]) << "a fetch-add that succeeded is missing";
        EXPECT_LE(fadd32_ok, (uint32_t)w[2]);
        if (m_resumed_only) {
            EXPECT_EQ(fadds_ok, w[0]) << "fetch-adds lost or run twice";
            EXPECT_EQ(fadd32_ok, (uint32_t)w[2]);
            EXPECT_EQ(posted_adds, w[3]) << "posted adds lost or run twice";
            EXPECT_EQ(m_last_swap, w[1]) << "a compare-and-swap of the chain"
                                            " failed";
            for (auto &o : m_ops) {
                if ((o->k == FADD64) || (o->k == FADD32) || (o->k == CSWAP64)) {
                    EXPECT_EQ(UCS_OK, o->comp->status) << "op " << o->n;
                }
            }
        }
        for (uint64_t n : m_am_sent) {
            auto it = m_am_seen.find(n);
            ASSERT_TRUE(it != m_am_seen.end()) << "AM " << n << " lost";
            ASSERT_EQ(1u, it->second.size()) << "AM " << n << " delivered "
                                             << it->second.size() << " times";
            ASSERT_NE((size_t)-1, it->second[0]) << "AM " << n << " corrupted";
        }
        EXPECT_EQ(m_am_sent.size(), m_am_seen.size());
        EXPECT_TRUE(m_errors.empty());
        check_order();
    }

    // Byte i of what put o wrote.
    static uint8_t put_byte(const op &o, size_t i) {
        return (i < 8) ? ((const uint8_t*)&o.n)[i] : op_byte(o.n, i);
    }

    // Completions came in posting order, each once: the op numbers their
    // callbacks noted rise strictly, and every op that returned
    // UCS_INPROGRESS noted one. Not 32-bit atomics: they are emulated with
    // compare-and-swap steps, each posted when the one before completes
    // (syncmem_amo.c), so one completes at its last step, after ops posted
    // later, with or without a reconnect.
    void check_order() {
        std::vector<uint64_t> order;
        size_t waits = 0;
        for (uint64_t n : m_order) {
            if (m_ops[n]->k != FADD32) {
                order.push_back(n);
            }
        }
        for (size_t i = 1; i < order.size(); ++i) {
            ASSERT_LT(order[i - 1], order[i])
                    << "op " << order[i] << " (kind " << m_ops[order[i]]->k
                    << ") completed after op " << order[i - 1] << " (kind "
                    << m_ops[order[i - 1]]->k << ")";
        }
        for (auto &o : m_ops) {
            waits += o->waits && (o->k != FADD32);
        }
        EXPECT_EQ(waits, order.size()) << "completions missing";
    }

    buffer *m_src, *m_dst, *m_back, *m_amo;
    size_t m_cursor      = 0;
    uint64_t m_last_swap = 0;
    bool m_resumed_only  = true; // every reconnect kept the QP pair
    std::vector<std::string> m_no_resume; // why others did not (the log's)
    bool m_gets          = true; // the workload has gets (wanted)
    bool m_atomics       = true; // ...atomics
    bool m_others        = true; // ...puts and active messages
    unsigned m_next_kind = 0;
    unsigned m_no_resource = 0; // UCS_ERR_NO_RESOURCE answers post() saw
    std::vector<std::unique_ptr<op>> m_ops;
    std::vector<uint64_t> m_order; // op numbers, as their completions came
    std::set<uint64_t> m_am_sent;
    std::map<uint64_t, std::vector<size_t>> m_am_seen;
    std::deque<uct_completion_t> m_flush_comps; // of flush_wait
};

} // namespace

#endif
