// SPDX-License-Identifier: BSD-3-Clause
// uct_ep_fence and uct_iface_fence: whatever is posted after a fence runs at
// the target after everything posted before it, emulated atomics included
// (their retry is posted from a completion, after whatever came meanwhile).
// Each operation before a fence, each kind of observer after it: a fetch
// (native and emulated), a get, a put that overwrites the word.
#include "syncmem_rma_test.h"

extern "C" {
#include "uct_syncmem/syncmem_hooks.h"
}

#include <cstring>

class syncmem_fence_test : public syncmem_rma_test {
protected:
    enum observer { FETCH_ADD, FETCH_XOR, GET, PUT };

    struct before_op {
        int  op;     // uct_atomic_op_t, or UCT_ATOMIC_OP_CSWAP
        bool fetch;
    };

    static const char *observer_name(int o) {
        static const char *names[] = {"fetch-add", "fetch-xor", "get", "put"};
        return names[o];
    }

    static const char *op_name(int op) {
        static const char *names[] = {"add", "and", "or", "xor", "swap",
                                      "cswap"};
        return names[op];
    }

    template <typename T>
    ucs_status_t atomic(int op, T value, T compare, uint64_t addr,
                        uct_rkey_t rkey, T *result, uct_completion_t *comp) {
        if (op == UCT_ATOMIC_OP_CSWAP) {
            return (sizeof(T) == 8) ?
                uct_ep_atomic_cswap64(m_ep, compare, value, addr, rkey,
                                      (uint64_t*)result, comp) :
                uct_ep_atomic_cswap32(m_ep, compare, value, addr, rkey,
                                      (uint32_t*)result, comp);
        }
        if (result != nullptr) {
            return (sizeof(T) == 8) ?
                uct_ep_atomic64_fetch(m_ep, (uct_atomic_op_t)op, value,
                                      (uint64_t*)result, addr, rkey, comp) :
                uct_ep_atomic32_fetch(m_ep, (uct_atomic_op_t)op, value,
                                      (uint32_t*)result, addr, rkey, comp);
        }
        return (sizeof(T) == 8) ?
            uct_ep_atomic64_post(m_ep, (uct_atomic_op_t)op, value, addr, rkey) :
            uct_ep_atomic32_post(m_ep, (uct_atomic_op_t)op, value, addr,
                                 rkey);
    }

    static void expect_ok(ucs_status_t status) {
        ASSERT_TRUE((status == UCS_OK) || (status == UCS_INPROGRESS))
                << ucs_status_string(status);
    }

    // iters words, each R_i: the operation before the fence with L, a fence
    // (of the endpoint or of the iface), the observer; all in flight
    // together. Returns the number of words where the observer saw (or
    // left) anything but what the fence promises.
    template <typename T>
    unsigned run(before_op b, observer o, bool iface_fence, unsigned iters) {
        const T value   = (T)0x3c3c3c3c3c3c3c3cull;
        const T put_val = (T)0x5a5a5a5a5a5a5a5aull;
        // 64-bit words; a 32-bit operand in the upper half of every other one
        buffer *mem     = alloc(8 * iters, 0);
        uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
        std::vector<T> fetched(iters), seen(iters), initial(iters);
        std::vector<T> put_src(1, put_val);
        std::vector<uint64_t> addr(iters);
        uct_rkey_t rkey = mem->rkey.rkey;

        for (unsigned i = 0; i < iters; ++i) {
            size_t off = (sizeof(T) == 4) ? 4 * (i & 1) : 0;
            initial[i] = (T)(0x0f0f0f0f0f0f0f0full * (i + 1) + i);
            addr[i]    = (uintptr_t)mem->data.data() + 8 * i + off;
            memcpy((void*)(uintptr_t)addr[i], &initial[i], sizeof(T));
        }

        for (unsigned i = 0; i < iters; ++i) {
            // cswap takes: it compares with what is there
            T *res = b.fetch ? &fetched[i] : nullptr;
            comp.count += b.fetch;
            ucs_status_t status = retry([&] {
                return atomic<T>(b.op, value, initial[i], addr[i], rkey, res,
                                 b.fetch ? &comp : nullptr);
            });
            expect_ok(status);
            if (status == UCS_OK) {
                comp.count -= b.fetch; // done at once: no completion
            }

            EXPECT_EQ(UCS_OK, iface_fence ? uct_iface_fence(m_sender, 0) :
                                            uct_ep_fence(m_ep, 0));

            ++comp.count;
            auto observe = [&]() -> ucs_status_t {
                switch (o) {
                case FETCH_ADD:
                case FETCH_XOR:
                    return atomic<T>((o == FETCH_ADD) ? UCT_ATOMIC_OP_ADD :
                                                        UCT_ATOMIC_OP_XOR,
                                     0, 0, addr[i], rkey, &seen[i], &comp);
                case GET:
                    return uct_ep_get_bcopy(m_ep,
                        [](void *dest, const void *src, size_t len) {
                            memcpy(dest, src, len);
                        }, &seen[i], sizeof(T), addr[i], rkey, &comp);
                default:
                    return uct_ep_put_short(m_ep, put_src.data(), sizeof(T),
                                            addr[i], rkey);
                }
            };
            status = retry(observe);
            expect_ok(status);
            if (status != UCS_INPROGRESS) {
                --comp.count;
            }
        }
        --comp.count;
        EXPECT_TRUE(wait_for("the operations around the fences",
                             [&] { return comp.count == 0; }));
        EXPECT_EQ(UCS_OK, comp.status);
        flush(m_ep);

        unsigned wrong = 0;
        for (unsigned i = 0; i < iters; ++i) {
            T after = amo_reference<T>(b.op, initial[i], value, initial[i]), now;
            memcpy(&now, (void*)(uintptr_t)addr[i], sizeof(T));
            bool ok = (o == PUT) ? (now == put_val) :
                      ((seen[i] == after) && (now == after));
            if (b.fetch && (fetched[i] != initial[i])) {
                ok = false;
            }
            if (!ok && (wrong++ < 3)) {
                ADD_FAILURE() << sizeof(T) * 8 << "-bit " << op_name(b.op)
                              << (b.fetch ? " fetch" : " post") << ", "
                              << (iface_fence ? "iface" : "ep") << " fence, "
                              << observer_name(o) << ": word " << i
                              << " initial 0x" << std::hex
                              << (uint64_t)initial[i] << " expected 0x"
                              << (uint64_t)((o == PUT) ? put_val : after)
                              << ", observer saw 0x" << (uint64_t)seen[i]
                              << ", word now 0x" << (uint64_t)now
                              << ", fetched before 0x" << (uint64_t)fetched[i];
            }
        }
        return wrong;
    }

    // A word of 0x11 bytes, an emulated xor to it, a fence: what a test
    // posts next finds the fence waiting.
    buffer *xor_then_fence() {
        buffer *mem = alloc(8, 0);
        memset(mem->data.data(), 0x11, 8);
        flush(m_ep);
        EXPECT_EQ(UCS_OK, retry([&] {
            return uct_ep_atomic64_post(m_ep, UCT_ATOMIC_OP_XOR, 0xff,
                                        (uintptr_t)mem->data.data(),
                                        mem->rkey.rkey);
        }));
        EXPECT_EQ(UCS_OK, uct_ep_fence(m_ep, 0));
        return mem;
    }

    ucs_status_t put_word(buffer *mem, const uint64_t &v) {
        return uct_ep_put_short(m_ep, &v, sizeof(v),
                                (uintptr_t)mem->data.data(), mem->rkey.rkey);
    }

    // Every operation before a fence, every observer after it.
    template <typename T> void run_all(bool iface_fence) {
        const unsigned iters = 1000;
        const before_op ops[] = {
            {UCT_ATOMIC_OP_ADD, false}, {UCT_ATOMIC_OP_AND, false},
            {UCT_ATOMIC_OP_OR, false},  {UCT_ATOMIC_OP_XOR, false},
            {UCT_ATOMIC_OP_ADD, true},  {UCT_ATOMIC_OP_AND, true},
            {UCT_ATOMIC_OP_OR, true},   {UCT_ATOMIC_OP_XOR, true},
            {UCT_ATOMIC_OP_SWAP, true}, {UCT_ATOMIC_OP_CSWAP, true}};
        unsigned total = 0, wrong;

        for (auto b : ops) {
            for (int o = FETCH_ADD; o <= PUT; ++o) {
                wrong  = run<T>(b, (observer)o, iface_fence, iters);
                total += iters;
                EXPECT_EQ(0u, wrong)
                        << sizeof(T) * 8 << "-bit " << op_name(b.op)
                        << (b.fetch ? " fetch" : " post") << " then "
                        << observer_name(o) << ": " << wrong << " of "
                        << iters << " wrong";
                if (HasFailure()) {
                    return;
                }
            }
        }
        printf("[ fence    ] %u-bit: %u operations, each fenced from an"
               " observer, 0 wrong\n", (unsigned)sizeof(T) * 8, total);
    }
};

TEST_F(syncmem_fence_test, ep_fence_orders_every_op_64)
{
    run_all<uint64_t>(false);
}

TEST_F(syncmem_fence_test, ep_fence_orders_every_op_32)
{
    run_all<uint32_t>(false);
}

TEST_F(syncmem_fence_test, iface_fence_orders_emulated_ops)
{
    EXPECT_EQ(0u, (run<uint64_t>({UCT_ATOMIC_OP_XOR, false}, FETCH_XOR, true,
                                 1000)));
    EXPECT_EQ(0u, (run<uint32_t>({UCT_ATOMIC_OP_ADD, true}, PUT, true, 1000)));
}

// With requests kept for the doorbell, and with no replay ring at all: the
// fence holds in every way an iface keeps its requests.
class syncmem_fence_batch_test : public syncmem_fence_test {
protected:
    config_mods_t sender_mods() const override {
        return {{"TX_DB_BATCH", "16"}};
    }
};

TEST_F(syncmem_fence_batch_test, ep_fence_orders_every_op_64)
{
    run_all<uint64_t>(false);
}

class syncmem_fence_plain_test : public syncmem_fence_test {
protected:
    config_mods_t sender_mods() const override {
        return {{"RECONNECT", "n"}};
    }
};

TEST_F(syncmem_fence_plain_test, ep_fence_orders_every_op_32)
{
    run_all<uint32_t>(false);
}

// A fence after writes alone costs nothing (RC runs them in order): the
// next operation is accepted at once.
TEST_F(syncmem_fence_test, fence_after_writes_does_not_wait)
{
    buffer *mem = alloc(8, 0);
    uint64_t v  = 1;
    flush(m_ep); // connected, nothing outstanding
    ASSERT_EQ(UCS_OK, retry([&] {
        return uct_ep_put_short(m_ep, &v, sizeof(v),
                                (uintptr_t)mem->data.data(), mem->rkey.rkey);
    }));
    ASSERT_EQ(UCS_OK, uct_ep_fence(m_ep, 0));
    v = 2;
    EXPECT_EQ(UCS_OK, uct_ep_put_short(m_ep, &v, sizeof(v),
                                       (uintptr_t)mem->data.data(),
                                       mem->rkey.rkey));
    flush(m_ep);
    uint64_t word;
    memcpy(&word, mem->data.data(), 8);
    EXPECT_EQ(2u, word);
}

// A fence after an emulated atomic: an operation the HCA does itself is
// taken at once, kept until the atomic is done, then runs after it.
TEST_F(syncmem_fence_test, native_op_after_an_emulated_one_is_kept)
{
    buffer *mem = xor_then_fence();
    uint64_t word, v = 42;
    EXPECT_EQ(UCS_OK, put_word(mem, v));
    flush(m_ep);
    memcpy(&word, mem->data.data(), 8);
    EXPECT_EQ(42u, word); // the xor ran before the put, not after it
}

// What UCX's uct_fence_test does (test/gtest/uct/test_fence.cc): an atomic,
// a fence, the same operation fetching with 0, each posted once, its
// status not looked at. So whatever follows a fence must be taken at
// once, and see the atomic before it.
TEST_F(syncmem_fence_test, op_after_a_fence_is_taken_at_once)
{
    struct {
        int      op;
        unsigned size;
    } cases[] = {{UCT_ATOMIC_OP_ADD, 4}, {UCT_ATOMIC_OP_ADD, 8},
                 {UCT_ATOMIC_OP_AND, 4}, {UCT_ATOMIC_OP_AND, 8},
                 {UCT_ATOMIC_OP_OR, 4},  {UCT_ATOMIC_OP_OR, 8},
                 {UCT_ATOMIC_OP_XOR, 4}, {UCT_ATOMIC_OP_XOR, 8}};
    buffer *mem    = alloc(8, 0);
    uint64_t addr  = (uintptr_t)mem->data.data();
    uct_rkey_t key = mem->rkey.rkey;
    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    unsigned total = 0;

    flush(m_ep);
    for (auto c : cases) {
        for (int i = 0; i < 200; ++i, ++total) {
            uint64_t remote = 0x0123456789abcdefull * (i + 1);
            uint64_t local  = 0xfedcba9876543210ull ^ (i * 0x1111);
            uint64_t fetched64 = 0;
            uint32_t fetched32 = 0;
            ucs_status_t status;

            memcpy(mem->data.data(), &remote, 8);
            comp.count = 1;
            if (c.size == 8) {
                status = uct_ep_atomic64_post(m_ep, (uct_atomic_op_t)c.op,
                                              local, addr, key);
            } else {
                status = uct_ep_atomic32_post(m_ep, (uct_atomic_op_t)c.op,
                                              (uint32_t)local, addr, key);
            }
            ASSERT_EQ(UCS_OK, status) << op_name(c.op) << c.size * 8;
            ASSERT_EQ(UCS_OK, uct_ep_fence(m_ep, 0));
            if (c.size == 8) {
                status = uct_ep_atomic64_fetch(m_ep, (uct_atomic_op_t)c.op, 0,
                                               &fetched64, addr, key, &comp);
            } else {
                status = uct_ep_atomic32_fetch(m_ep, (uct_atomic_op_t)c.op, 0,
                                               &fetched32, addr, key, &comp);
            }
            ASSERT_EQ(UCS_INPROGRESS, status)
                    << op_name(c.op) << c.size * 8 << ", iteration " << i;
            ASSERT_TRUE(wait_for("the fetch after the fence",
                                 [&] { return comp.count == 0; }));
            ASSERT_EQ(UCS_OK, comp.status);
            flush(m_ep);
            uint64_t expect = (c.size == 8) ?
                amo_reference<uint64_t>(c.op, remote, local, 0) :
                amo_reference<uint32_t>(c.op, (uint32_t)remote,
                                        (uint32_t)local, 0);
            ASSERT_EQ(expect, (c.size == 8) ? fetched64 : fetched32)
                    << op_name(c.op) << c.size * 8 << ", iteration " << i;
        }
    }
    printf("[ fence    ] %u atomics, each then a fence and a fetch taken at"
           " once: 0 wrong\n", total);
}

// Without a ring nothing can be kept: an operation after a fence over an
// emulated atomic finds no room (pending_add queues it), then the pending
// request runs, after it.
TEST_F(syncmem_fence_plain_test, native_op_after_an_emulated_one_waits)
{
    buffer *mem = xor_then_fence();
    uint64_t word, v = 42;
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, put_word(mem, v));

    struct req_t {
        uct_pending_req_t super;
        uct_ep_h ep;
        buffer *mem;
        uint64_t v;
        bool done;
    } req;
    req.super.func = [](uct_pending_req_t *self) -> ucs_status_t {
        req_t *r = ucs_container_of(self, req_t, super);
        ucs_status_t s = uct_ep_put_short(r->ep, &r->v, sizeof(r->v),
                                          (uintptr_t)r->mem->data.data(),
                                          r->mem->rkey.rkey);
        r->done = (s == UCS_OK);
        return s;
    };
    req.ep   = m_ep;
    req.mem  = mem;
    req.v    = v;
    req.done = false;
    ASSERT_EQ(UCS_OK, uct_ep_pending_add(m_ep, &req.super, 0));
    ASSERT_TRUE(wait_for("the pending put after the fence",
                         [&] { return req.done; }));
    flush(m_ep);
    memcpy(&word, mem->data.data(), 8);
    EXPECT_EQ(42u, word); // the xor ran before the put, not after it
}

// Two fences, each with emulated atomics in flight before it: the fetch
// after the second sees both adds before it.
TEST_F(syncmem_fence_test, fences_in_a_row_over_emulated_atomics)
{
    buffer *mem = alloc(8, 0);
    uint32_t *word = reinterpret_cast<uint32_t*>(mem->data.data());
    uint64_t addr  = (uintptr_t)mem->data.data();
    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };

    for (int i = 0; i < 200; ++i) {
        uint32_t fetched = 0;
        *word      = 1000 * i;
        comp.count = 1;
        flush(m_ep);
        EXPECT_EQ(UCS_OK, uct_ep_atomic32_post(m_ep, UCT_ATOMIC_OP_ADD, 1,
                                               addr, mem->rkey.rkey));
        EXPECT_EQ(UCS_OK, uct_ep_fence(m_ep, 0));
        EXPECT_EQ(UCS_OK, retry([&] {
            return uct_ep_atomic32_post(m_ep, UCT_ATOMIC_OP_ADD, 10, addr,
                                        mem->rkey.rkey);
        }));
        EXPECT_EQ(UCS_OK, uct_ep_fence(m_ep, 0));
        EXPECT_EQ(UCS_INPROGRESS, retry([&] {
            return uct_ep_atomic32_fetch(m_ep, UCT_ATOMIC_OP_ADD, 0, &fetched,
                                         addr, mem->rkey.rkey, &comp);
        }));
        ASSERT_TRUE(wait_for("the fetch after two fences",
                             [&] { return comp.count == 0; }));
        ASSERT_EQ(UCS_OK, comp.status);
        ASSERT_EQ(1000u * i + 11, fetched) << "iteration " << i;
    }
}

// A QP error while a fence waits for an emulated atomic, with the fetch
// after the fence kept: the reconnect posts again only what came before the
// fence, the atomic's next step still goes before the fetch, and the fetch
// sees the atomic. An atomic whose outcome the reconnect lost fails (it is
// then not checked); none is wrong.
TEST_F(syncmem_fence_test, fence_holds_across_a_reconnect)
{
    const int iters = 300;
    buffer *mem     = alloc(8, 0);
    uint64_t addr   = (uintptr_t)mem->data.data();
    uct_rkey_t key  = mem->rkey.rkey;
    unsigned failed = 0, checked = 0;

    flush(m_ep);
    for (int i = 0; i < iters; ++i) {
        uint32_t remote = 0x01234567u * (i + 1) | 1;
        uint32_t local  = 0x89abcdefu ^ i;
        uint32_t fetched = 0;
        uct_completion_t post = { [](uct_completion_t*) {}, 1, UCS_OK };
        uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };

        memcpy(mem->data.data(), &remote, 4);
        // a fetching xor with a completion: a lost one says so
        ASSERT_EQ(UCS_INPROGRESS,
                  uct_ep_atomic32_fetch(m_ep, UCT_ATOMIC_OP_XOR, local,
                                        &fetched, addr, key, &post));
        ASSERT_EQ(UCS_OK, uct_ep_fence(m_ep, 0));
        ASSERT_EQ(UCS_INPROGRESS,
                  uct_ep_atomic32_fetch(m_ep, UCT_ATOMIC_OP_XOR, 0, &fetched,
                                        addr, key, &comp));
        if ((i % 10) == 0) {
            ASSERT_EQ(UCS_OK, uct_syncmem_ep_inject_qp_error(m_ep));
        }
        ASSERT_TRUE(wait_for("the fetch after the fence and the QP error",
                             [&] { return comp.count == 0 &&
                                          post.count == 0; }));
        flush(m_ep);
        if ((post.status != UCS_OK) || (comp.status != UCS_OK)) {
            ++failed;
            continue;
        }
        ++checked;
        ASSERT_EQ(remote ^ local, fetched) << "iteration " << i;
    }
    EXPECT_GE(uct_syncmem_ep_reconnects(m_ep), 10u);
    EXPECT_GE(checked, iters * 9u / 10);
    EXPECT_TRUE(m_errors.empty());
    printf("[ fence    ] %u fetches after a fence checked, %u failed with"
           " their atomic (outcome lost), 30 QP errors while fences waited\n",
           checked, failed);
}
