// SPDX-License-Identifier: BSD-3-Clause
// Remote atomics: native (64-bit add, cswap) and emulated by CAS (the rest,
// and everything 32-bit), checked against a reference on real rxe; the
// emulation's guesses (syncmem_amo_guess.h) in compare-and-swaps counted.
#include "syncmem_rma_test.h"

extern "C" {
#include <uct_syncmem/syncmem_hooks.h>
}

#include <cstring>

namespace {

uct_syncmem_amo_counters_t amo_counters(uct_iface_h iface)
{
    uct_syncmem_amo_counters_t c;
    uct_syncmem_iface_amo_counters(iface, &c);
    return c;
}

const char *op_name(int op)
{
    static const char *names[] = {"add", "and", "or", "xor", "swap", "cswap"};
    return names[op];
}

} // namespace

class syncmem_amo_test : public syncmem_rma_test {
protected:
    // Runs one operation on a word of the remote buffer and waits for it.
    template <typename T>
    ucs_status_t run(int op, bool fetch, uint64_t addr, uct_rkey_t rkey,
                     T value, T compare, T *result) {
        uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
        ucs_status_t status = retry([&]() -> ucs_status_t {
            if (op == UCT_ATOMIC_OP_CSWAP) {
                return (sizeof(T) == 8) ?
                    uct_ep_atomic_cswap64(m_ep, compare, value, addr, rkey,
                                          (uint64_t*)result, &comp) :
                    uct_ep_atomic_cswap32(m_ep, compare, value, addr, rkey,
                                          (uint32_t*)result, &comp);
            }
            if (fetch) {
                return (sizeof(T) == 8) ?
                    uct_ep_atomic64_fetch(m_ep, (uct_atomic_op_t)op, value,
                                          (uint64_t*)result, addr, rkey, &comp) :
                    uct_ep_atomic32_fetch(m_ep, (uct_atomic_op_t)op, value,
                                          (uint32_t*)result, addr, rkey, &comp);
            }
            return (sizeof(T) == 8) ?
                uct_ep_atomic64_post(m_ep, (uct_atomic_op_t)op, value, addr, rkey) :
                uct_ep_atomic32_post(m_ep, (uct_atomic_op_t)op, value, addr, rkey);
        });
        if (status == UCS_INPROGRESS) {
            wait_bound bound("the atomic's completion");
            while ((comp.count > 0) && bound()) {
                progress();
            }
            status = comp.status;
        }
        if (status == UCS_OK) {
            uct_completion_t fcomp = { [](uct_completion_t*) {}, 1, UCS_OK };
            status = retry([&] { return uct_ep_flush(m_ep, 0, &fcomp); });
            if (status == UCS_INPROGRESS) {
                wait_bound bound("the flush after an atomic");
                while ((fcomp.count > 0) && bound()) {
                    progress();
                }
                status = fcomp.status;
            }
        }
        return status;
    }

    // n fetching XORs one at a time on a word that is not 0, each fetched
    // value and the word checked; what the emulation counted meanwhile.
    uct_syncmem_amo_counters_t xors_one_at_a_time(unsigned n) {
        buffer *mem = alloc(8, 0);
        uint64_t word = 0x0123456789abcdefull, expect = word;
        memcpy(mem->data.data(), &word, 8);
        uint64_t addr = (uintptr_t)mem->data.data();
        uct_syncmem_amo_counters_t before = amo_counters(m_sender), after;

        for (unsigned i = 0; i < n; ++i) {
            uint64_t value = (i + 1) * 0x0101010101ull, result = 0;
            EXPECT_EQ(UCS_OK, run<uint64_t>(UCT_ATOMIC_OP_XOR, true, addr,
                                            mem->rkey.rkey, value, 0,
                                            &result));
            EXPECT_EQ(expect, result) << "xor " << i;
            expect ^= value;
        }
        memcpy(&word, mem->data.data(), 8);
        EXPECT_EQ(expect, word);
        after           = amo_counters(m_sender);
        after.emulated -= before.emulated;
        after.steps    -= before.steps;
        after.guessed  -= before.guessed;
        return after;
    }

    template <typename T> void check_all_ops() {
        const T ones = (T)~(T)0;
        const T values[][3] = { // initial, operand, compare
            { 0, 0, 0 }, { 0, 1, 0 }, { ones, 1, ones }, { ones, ones, 5 },
            { (T)0x0123456789abcdefull, (T)0xf0f0f0f0f0f0f0f0ull,
              (T)0x0123456789abcdefull },
            { 5, ones, 6 }, { (T)(ones - 1), 3, 0 } };
        buffer *mem = alloc(16, 0);

        for (int op = UCT_ATOMIC_OP_ADD; op <= UCT_ATOMIC_OP_CSWAP; ++op) {
            for (int fetch = 0; fetch <= 1; ++fetch) {
                if ((op >= UCT_ATOMIC_OP_SWAP) && !fetch) {
                    continue; // swap and cswap only fetch
                }
                for (auto &v : values) {
                    // both halves of a 64-bit word for 32-bit operations
                    for (size_t off = 0; off < 8; off += sizeof(T)) {
                        uint8_t *word = mem->data.data() + 8;
                        memset(mem->data.data(), 0xa5, 24);
                        memcpy(word + off, &v[0], sizeof(T));
                        uint8_t before[24];
                        memcpy(before, mem->data.data(), 24);

                        T result = (T)0x77;
                        ASSERT_EQ(UCS_OK,
                                  run<T>(op, fetch, (uintptr_t)(word + off),
                                         mem->rkey.rkey, v[1], v[2], &result))
                                << op_name(op) << sizeof(T) * 8;
                        T now;
                        memcpy(&now, word + off, sizeof(T));
                        EXPECT_EQ(amo_reference<T>(op, v[0], v[1], v[2]), now)
                                << op_name(op) << sizeof(T) * 8
                                << (fetch ? " fetch" : " post") << " init "
                                << (uint64_t)v[0] << " operand "
                                << (uint64_t)v[1];
                        if (fetch) {
                            EXPECT_EQ(v[0], result) << op_name(op);
                        }
                        // nothing else changed, the other half included
                        memcpy(word + off, &v[0], sizeof(T));
                        memcpy(before + 8 + off, &v[0], sizeof(T));
                        EXPECT_EQ(0, memcmp(before, mem->data.data(), 24))
                                << op_name(op) << sizeof(T) * 8 << " off "
                                << off << ": neighbour changed";
                    }
                }
            }
        }
    }
};

TEST_F(syncmem_amo_test, caps_are_the_whole_set)
{
    uint64_t all_ops  = UCS_BIT(UCT_ATOMIC_OP_ADD) | UCS_BIT(UCT_ATOMIC_OP_AND) |
                        UCS_BIT(UCT_ATOMIC_OP_OR) | UCS_BIT(UCT_ATOMIC_OP_XOR);
    uint64_t all_fops = all_ops | UCS_BIT(UCT_ATOMIC_OP_SWAP) |
                        UCS_BIT(UCT_ATOMIC_OP_CSWAP);
    ASSERT_TRUE(m_attr.cap.flags & UCT_IFACE_FLAG_ATOMIC_DEVICE);
    EXPECT_EQ(all_ops, m_attr.cap.atomic64.op_flags);
    EXPECT_EQ(all_ops, m_attr.cap.atomic32.op_flags);
    EXPECT_EQ(all_fops, m_attr.cap.atomic64.fop_flags);
    EXPECT_EQ(all_fops, m_attr.cap.atomic32.fop_flags);
}

TEST_F(syncmem_amo_test, every_op_64)
{
    check_all_ops<uint64_t>();
}

TEST_F(syncmem_amo_test, every_op_32)
{
    check_all_ops<uint32_t>();
}

// Fetching XORs one at a time on a word that is not 0: the first guesses 0
// and takes two compare-and-swaps; each later one guesses the value the
// last left, and takes one. Fetched values and the word are right.
TEST_F(syncmem_amo_test, a_guess_from_the_last_value_takes_one_step)
{
    const unsigned n = 20;
    uct_syncmem_amo_counters_t c = xors_one_at_a_time(n);

    EXPECT_EQ(n, c.emulated);
    EXPECT_EQ(n + 1, c.steps);
    EXPECT_EQ(n - 1, c.guessed);
}

// Posted XORs in flight together on one word. On a word the iface knows
// each guesses what the one before it leaves, and all take at once; on one
// it does not know, or after a CPU store under them, each takes at most
// two steps (the retries continue the first retry's guesses, not one more
// per operation ahead).
TEST_F(syncmem_amo_test, xors_in_flight_on_one_word)
{
    const unsigned n = 32;
    buffer *mem = alloc(8, 0);
    uint64_t word = 0x5a5a5a5a5a5a5a5aull, expect = word;
    memcpy(mem->data.data(), &word, 8);
    uint64_t addr = (uintptr_t)mem->data.data();

    auto batch = [&](const char *what, unsigned max_steps) {
        uct_syncmem_amo_counters_t before = amo_counters(m_sender);
        for (unsigned i = 0; i < n; ++i) {
            uint64_t value = 0x9e3779b97f4a7c15ull * (i + 1);
            ASSERT_EQ(UCS_OK, retry([&] {
                return uct_ep_atomic64_post(m_ep, UCT_ATOMIC_OP_XOR, value,
                                            addr, mem->rkey.rkey);
            }));
            expect ^= value;
        }
        flush(m_ep);
        memcpy(&word, mem->data.data(), 8);
        EXPECT_EQ(expect, word) << what;
        uct_syncmem_amo_counters_t after = amo_counters(m_sender);
        EXPECT_EQ(n, after.emulated - before.emulated) << what;
        EXPECT_LE(after.steps - before.steps, max_steps) << what;
        EXPECT_GE(after.steps - before.steps, n) << what;
    };

    batch("a word not seen before", 2 * n);
    batch("a word the iface knows", n);
    word ^= 0xff;   // a CPU store the iface does not see
    expect ^= 0xff;
    memcpy(mem->data.data(), &word, 8);
    batch("after a CPU store", 2 * n);
    batch("known again", n);
}

// Endpoints from several ifaces hammer one word with native fetch-add,
// emulated 32-bit add and a cswap loop, plus xors that cancel out: the
// final value is exactly the number of increments.
TEST_F(syncmem_amo_test, contention_loses_no_update)
{
    const int n_eps = 4, rounds = 50;
    buffer *mem = alloc(8, 0);
    uint64_t addr = (uintptr_t)mem->data.data();
    uct_rkey_t rkey = mem->rkey.rkey;
    std::vector<uct_ep_h> eps;
    for (int i = 0; i < n_eps; ++i) {
        uct_iface_h iface;
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface));
        eps.push_back(connect(iface, m_receiver));
    }

    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    std::vector<uint64_t> results(n_eps * rounds * 3);
    uint64_t expected = 0;
    size_t r = 0;

    for (int round = 0; round < rounds; ++round) {
        for (int e = 0; e < n_eps; ++e) {
            uct_ep_h ep = eps[e];
            ++comp.count;
            ASSERT_EQ(UCS_INPROGRESS, retry([&] {
                return uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_ADD, 1,
                                             &results[r], addr, rkey, &comp);
            }));
            ++r;
            ASSERT_EQ(UCS_OK, retry([&] {
                return uct_ep_atomic32_post(ep, UCT_ATOMIC_OP_ADD, 2, addr,
                                            rkey);
            }));
            ASSERT_EQ(UCS_OK, retry([&] {
                return uct_ep_atomic64_post(ep, UCT_ATOMIC_OP_XOR,
                                            0xff00000000ull, addr, rkey);
            }));
            ASSERT_EQ(UCS_OK, retry([&] {
                return uct_ep_atomic64_post(ep, UCT_ATOMIC_OP_XOR,
                                            0xff00000000ull, addr, rkey);
            }));
            expected += 3;
        }
    }
    --comp.count;
    wait_bound bound("the atomics' completions");
    while ((comp.count > 0) && bound()) {
        progress();
    }
    ASSERT_EQ(UCS_OK, comp.status);
    for (uct_ep_h ep : eps) {
        flush(ep);
    }

    uint64_t now;
    memcpy(&now, mem->data.data(), 8);
    EXPECT_EQ(expected, now);

    // a cswap increment loop from every endpoint on top
    for (int e = 0; e < n_eps; ++e) {
        for (int i = 0; i < 20; ++i) {
            uint64_t seen = now, got;
            wait_bound swaps("a compare-and-swap that finds what it read");
            do {
                uct_completion_t c = { [](uct_completion_t*) {}, 1, UCS_OK };
                ASSERT_EQ(UCS_INPROGRESS, retry([&] {
                    return uct_ep_atomic_cswap64(eps[e], seen, seen + 1, addr,
                                                 rkey, &got, &c);
                }));
                wait_bound bound("a compare-and-swap's completion");
                while ((c.count > 0) && bound()) {
                    progress();
                }
                if (got == seen) {
                    break;
                }
                seen = got;
            } while (swaps());
            now = seen + 1;
        }
    }
    memcpy(&now, mem->data.data(), 8);
    EXPECT_EQ(expected + n_eps * 20, now);
}

TEST_F(syncmem_amo_test, misaligned_address_is_refused)
{
    // UCT_CHECK_PARAM, as every transport's parameter checks, is compiled
    // out of a UCX built with --disable-params-check (Debian's has them)
    if (!ENABLE_PARAMS_CHECK) {
        GTEST_SKIP() << "this UCX is built without parameter checks";
    }
    buffer *mem = alloc(16, 0);
    uint64_t result;
    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };

    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_ep_atomic64_fetch(m_ep, UCT_ATOMIC_OP_ADD, 1, &result,
                                    (uintptr_t)mem->data.data() + 4,
                                    mem->rkey.rkey, &comp));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_ep_atomic32_post(m_ep, UCT_ATOMIC_OP_ADD, 1,
                                   (uintptr_t)mem->data.data() + 2,
                                   mem->rkey.rkey));
}

// Without the table of guesses (AMO_GUESS_WORDS=0) every emulated atomic
// guesses 0: right, and two steps on a word that is not 0.
class syncmem_amo_noguess_test : public syncmem_amo_test {
protected:
    config_mods_t sender_mods() const override {
        return {{"AMO_GUESS_WORDS", "0"}};
    }
};

TEST_F(syncmem_amo_noguess_test, every_op_64)
{
    check_all_ops<uint64_t>();
}

TEST_F(syncmem_amo_noguess_test, every_op_32)
{
    check_all_ops<uint32_t>();
}

TEST_F(syncmem_amo_noguess_test, a_word_not_0_takes_two_steps)
{
    const unsigned n = 10;
    uct_syncmem_amo_counters_t c = xors_one_at_a_time(n);

    EXPECT_EQ(n, c.emulated);
    EXPECT_EQ(2 * n, c.steps);
    EXPECT_EQ(0u, c.guessed);
}

// Cached registrations allow everything once any write is asked for; the
// access check needs registrations no broader than asked.
class syncmem_amo_nocache_test : public syncmem_amo_test {
protected:
    config_mods_t md_config() const override {
        return {{"RCACHE", "n"}};
    }
};

TEST_F(syncmem_amo_nocache_test, rkey_without_atomic_access_fails)
{
    buffer *mem = alloc(8, 0, UCT_MD_MEM_ACCESS_REMOTE_PUT |
                              UCT_MD_MEM_ACCESS_REMOTE_GET);
    uint64_t result = 0;
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              run<uint64_t>(UCT_ATOMIC_OP_ADD, true,
                            (uintptr_t)mem->data.data(), mem->rkey.rkey, 1, 0,
                            &result));
    ASSERT_EQ(1u, m_errors.size());
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, m_errors[0].second);
}

TEST_F(syncmem_amo_test, outside_registration_fails)
{
    buffer *mem = alloc(8, 0);
    uint32_t result = 0;
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              run<uint32_t>(UCT_ATOMIC_OP_XOR, true,
                            (uintptr_t)mem->data.data() + (1 << 20),
                            mem->rkey.rkey, 1, 0, &result));
}
