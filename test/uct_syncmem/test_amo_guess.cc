// SPDX-License-Identifier: BSD-3-Clause
// What emulated atomics guess a remote word holds
// (uct_syncmem/syncmem_amo_guess.h): the table's hits and misses, and, on a
// model of one word and an endpoint's in-order atomics (steps posted run at
// the target in order, completions come back in order, another writer may
// come between), how many compare-and-swaps XORs cost and that none is lost.
#include <gtest/gtest.h>

extern "C" {
#include <uct_syncmem/syncmem_amo_guess.h>
}

#include <deque>
#include <random>
#include <vector>

namespace {

struct table {
    std::vector<uct_syncmem_amo_guess_entry_t> entries;
    uct_syncmem_amo_guess_t g;

    explicit table(unsigned n) : entries(n) {
        g.table  = n ? entries.data() : nullptr;
        g.mask   = n ? n - 1 : 0;
        g.chains = 0;
    }
};

// One word at a target, reached by one endpoint's QP, and the XORs of that
// endpoint driven as syncmem_amo.c drives them: a first step guessing from
// the table, each completion that found another value posting a retry.
struct model {
    struct op {
        uint64_t operand, guess;
        uint32_t chain;
        bool done;
    };
    struct step {
        size_t op;
        uint64_t compare, swap, fetched;
    };

    uct_syncmem_amo_guess_t *g;
    const void *owner;
    uint64_t addr, word;
    std::vector<op> ops;
    std::deque<step> posted, ran;   // not run yet; run, not completed
    unsigned steps = 0;

    model(uct_syncmem_amo_guess_t *g_, const void *o, uint64_t a, uint64_t w)
        : g(g_), owner(o), addr(a), word(w) {}

    void post(size_t i) {
        op &o = ops[i];
        uint64_t next = o.guess ^ o.operand;
        posted.push_back({i, o.guess, next, 0});
        uct_syncmem_amo_guess_posted(g, owner, addr, &o.chain, o.guess, next);
        ++steps;
    }
    void start(uint64_t operand) {
        ops.push_back({operand, 0, 0, false});
        op &o = ops.back();
        o.guess = uct_syncmem_amo_guess_first(g, owner, addr, &o.chain);
        post(ops.size() - 1);
    }
    void run_one() {        // the target runs the oldest step
        step s = posted.front();
        posted.pop_front();
        s.fetched = word;
        if (word == s.compare) {
            word = s.swap;
        }
        ran.push_back(s);
    }
    void complete_one() {   // its completion comes back
        step s = ran.front();
        ran.pop_front();
        op &o = ops[s.op];
        if (s.fetched == o.guess) {
            o.done = true;
            return;
        }
        if ((s.fetched ^ o.operand) == s.fetched) {
            uct_syncmem_amo_guess_saw(g, owner, addr, o.chain, s.fetched);
            o.done = true;
            return;
        }
        o.guess = uct_syncmem_amo_guess_retry(g, owner, addr, &o.chain,
                                              s.fetched);
        post(s.op);
    }
    void drain() {
        while (!posted.empty() || !ran.empty()) {
            if (!posted.empty()) {
                run_one();
            }
            complete_one();
        }
    }
    unsigned done() const {
        unsigned n = 0;
        for (const op &o : ops) {
            n += o.done;
        }
        return n;
    }
};

int owner_a, owner_b;

} // namespace

// Without a table every guess is 0 and nothing is kept.
TEST(amo_guess, no_table_guesses_zero)
{
    table t(0);
    uint32_t chain = 7;

    EXPECT_EQ(0u, uct_syncmem_amo_guess_first(&t.g, &owner_a, 0x1000, &chain));
    EXPECT_EQ(0u, chain);
    uct_syncmem_amo_guess_posted(&t.g, &owner_a, 0x1000, &chain, 0, 5);
    EXPECT_EQ(0u, uct_syncmem_amo_guess_first(&t.g, &owner_a, 0x1000, &chain));
    EXPECT_EQ(42u, uct_syncmem_amo_guess_retry(&t.g, &owner_a, 0x1000, &chain, 42));
}

// A word is guessed from the step posted to it last; another endpoint's
// word at the same address (the same virtual address on another peer) is
// not; consecutive words of one endpoint all stay.
TEST(amo_guess, hits_by_endpoint_and_word)
{
    table t(8);
    uint32_t chain, c2;

    EXPECT_EQ(0u, uct_syncmem_amo_guess_first(&t.g, &owner_a, 0x1000, &chain));
    EXPECT_EQ(0u, chain);
    uct_syncmem_amo_guess_posted(&t.g, &owner_a, 0x1000, &chain, 0, 5);
    EXPECT_NE(0u, chain);
    EXPECT_EQ(5u, uct_syncmem_amo_guess_first(&t.g, &owner_a, 0x1000, &c2));
    EXPECT_EQ(chain, c2);
    uct_syncmem_amo_guess_posted(&t.g, &owner_a, 0x1000, &c2, 5, 9);
    EXPECT_EQ(chain, c2);                 // the same chain, moved on
    EXPECT_EQ(9u, uct_syncmem_amo_guess_first(&t.g, &owner_a, 0x1000, &c2));
    EXPECT_EQ(0u, uct_syncmem_amo_guess_first(&t.g, &owner_b, 0x1000, &c2));
    EXPECT_EQ(0u, c2);

    for (uint64_t w = 0; w < 8; ++w) {
        uint32_t c = 0;
        uct_syncmem_amo_guess_posted(&t.g, &owner_b, 0x8000 + w * 8, &c, 0,
                                     100 + w);
    }
    for (uint64_t w = 0; w < 8; ++w) {
        EXPECT_EQ(100 + w, uct_syncmem_amo_guess_first(&t.g, &owner_b,
                                                       0x8000 + w * 8, &c2))
                << "word " << w;
    }
}

// XORs one at a time on a word that is not 0: with the table the first
// costs two steps (it guesses 0) and every later one one; without, two
// each. The word ends as the XOR of all.
TEST(amo_guess, one_at_a_time_takes_one_step)
{
    for (unsigned n : {0u, 64u}) {
        table t(n);
        model m(&t.g, &owner_a, 0x1000, 0x1234);
        uint64_t expect = 0x1234;

        for (uint64_t i = 1; i <= 10; ++i) {
            m.start(i * 0x1111);
            m.drain();
            expect ^= i * 0x1111;
        }
        EXPECT_EQ(expect, m.word);
        EXPECT_EQ(10u, m.done());
        EXPECT_EQ(n ? 11u : 20u, m.steps) << "table of " << n;
    }
}

// Many XORs in flight to one word: each guesses what the one before it
// leaves, all take at once. After another writer changed the word under
// them, every one's first step fails, and each retry continues the first
// retry's chain: two steps each, not one more per operation ahead of it.
TEST(amo_guess, in_flight_chain_and_a_foreign_write)
{
    const unsigned n = 16;
    table t(64);
    model m(&t.g, &owner_a, 0x1000, 0);
    uint64_t expect = 0;

    for (unsigned i = 1; i <= n; ++i) {
        m.start(i);
        expect ^= i;
    }
    m.drain();
    EXPECT_EQ(expect, m.word);
    EXPECT_EQ(n, m.steps);          // the word was 0: the first guess right

    for (unsigned i = 1; i <= n; ++i) {
        m.start(i << 8);
        expect ^= i << 8;
    }
    m.word ^= 0xabc000;             // another writer, before they run
    expect ^= 0xabc000;
    m.drain();
    EXPECT_EQ(expect, m.word);
    EXPECT_EQ(2 * n, m.done());
    EXPECT_EQ(n + 2 * n, m.steps);
}

// Without the table the same in-flight XORs on a word that is not 0 cost
// more than two steps each: each retry races the others'.
TEST(amo_guess, in_flight_without_table_costs_more)
{
    const unsigned n = 16;
    table t(0);
    model m(&t.g, &owner_a, 0x1000, 0x55);

    for (unsigned i = 1; i <= n; ++i) {
        m.start(i);
    }
    m.drain();
    EXPECT_EQ(n, m.done());
    EXPECT_GT(m.steps, 2 * n);
}

// An operation that would not change the word (XOR 0) ends on the value it
// saw, and the next guesses that value.
TEST(amo_guess, an_operation_that_writes_nothing_teaches_the_word)
{
    table t(64);
    model m(&t.g, &owner_a, 0x1000, 0x77);

    m.start(0);
    m.drain();
    EXPECT_EQ(1u, m.steps);         // guessed 0, saw 0x77: done
    EXPECT_EQ(0x77u, m.word);
    m.start(1);
    m.drain();
    EXPECT_EQ(2u, m.steps);         // guessed 0x77: one step
    EXPECT_EQ(0x76u, m.word);
}

// Random interleavings of posts, runs, completions and another writer's
// XORs on a few words that share a small table: no update is lost, every
// operation completes, whatever was guessed.
TEST(amo_guess, random_interleavings_lose_nothing)
{
    std::mt19937_64 rnd(12345);

    for (unsigned trial = 0; trial < 200; ++trial) {
        table t(2);
        std::vector<model> words;
        std::vector<uint64_t> expect;
        for (uint64_t w = 0; w < 3; ++w) {
            words.emplace_back(&t.g, &owner_a, 0x1000 + w * 8, rnd());
            expect.push_back(words.back().word);
        }
        unsigned started = 0;
        for (unsigned k = 0; k < 400; ++k) {
            model &m = words[rnd() % words.size()];
            uint64_t &e = expect[&m - words.data()];
            switch (rnd() % 4) {
            case 0:
                if (started < 60) {
                    uint64_t v = rnd() % 4; // 0 too: a step that writes nothing
                    m.start(v);
                    e ^= v;
                    ++started;
                }
                break;
            case 1:
                if (!m.posted.empty()) {
                    m.run_one();
                }
                break;
            case 2:
                if (!m.ran.empty()) {
                    m.complete_one();
                }
                break;
            default:
                if (rnd() % 8 == 0) {
                    uint64_t v = rnd();
                    m.word ^= v;
                    e ^= v;
                }
                break;
            }
        }
        unsigned done = 0;
        for (size_t w = 0; w < words.size(); ++w) {
            words[w].drain();
            EXPECT_EQ(expect[w], words[w].word) << "trial " << trial;
            done += words[w].done();
        }
        ASSERT_EQ(started, done) << "trial " << trial;
    }
}
