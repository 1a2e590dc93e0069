/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - what an emulated atomic guesses a remote word holds
 * (syncmem_amo.c). An emulated operation is a compare-and-swap
 * CAS(guess -> op(guess)): right, it is done in one round trip; wrong, it
 * reads the word and tries again from what it read. A good guess is the
 * value this iface saw at that word last, moved on by the steps it has
 * posted to it since: a direct-mapped table of (endpoint, address) ->
 * that value, one per iface, filled as steps are posted. Pure: no verbs;
 * any guess is safe (a wrong one costs a round trip, never atomicity).
 *
 * Steps posted to one word on one endpoint run in order at the target
 * (RC runs an endpoint's atomics in order), so each step posted after
 * another can guess the value that one leaves, and many are in flight at
 * once. Such a line of guesses is a chain: it starts from a value seen
 * (its base) and ends at the value the table holds. When a step finds
 * another value, every later step of its chain will too; its retry starts
 * a new chain from what it saw, unless a newer chain has started from that
 * same value (an earlier operation's retry, which runs before this one's):
 * then it continues that one.
 */
#ifndef UCT_SYNCMEM_AMO_GUESS_H_
#define UCT_SYNCMEM_AMO_GUESS_H_

#include <stddef.h>
#include <stdint.h>

typedef struct uct_syncmem_amo_guess_entry {
    const void *owner;   /* the endpoint; NULL: empty */
    uint64_t   addr;     /* the 64-bit word's remote address */
    uint64_t   value;    /* it holds this once the steps posted take */
    uint64_t   base;     /* the value seen that started the chain */
    uint32_t   chain;    /* the chain the last step posted belongs to */
} uct_syncmem_amo_guess_entry_t;

typedef struct uct_syncmem_amo_guess {
    uct_syncmem_amo_guess_entry_t *table;  /* NULL: none, every guess 0 */
    uint32_t   mask;     /* entries - 1 (a power of 2) */
    uint32_t   chains;   /* the last chain number given; 0 is none */
} uct_syncmem_amo_guess_t;

static inline uct_syncmem_amo_guess_entry_t *
uct_syncmem_amo_guess_slot(const uct_syncmem_amo_guess_t *g,
                           const void *owner, uint64_t addr)
{
    /* consecutive words of one endpoint take consecutive slots */
    uint32_t salt = (uint32_t)((uintptr_t)owner >> 6) * 0x9e3779b1u;

    return &g->table[((uint32_t)(addr >> 3) + salt) & g->mask];
}

static inline uct_syncmem_amo_guess_entry_t *
uct_syncmem_amo_guess_find(const uct_syncmem_amo_guess_t *g,
                           const void *owner, uint64_t addr)
{
    uct_syncmem_amo_guess_entry_t *e;

    if (g->table == NULL) {
        return NULL;
    }
    e = uct_syncmem_amo_guess_slot(g, owner, addr);
    return ((e->owner == owner) && (e->addr == addr)) ? e : NULL;
}

/* An operation's first step: what it guesses the word holds, and in
 * *chain_p the chain it continues (0: none, it guesses 0: right for a
 * word never written, and a pure read of any other). */
static inline uint64_t
uct_syncmem_amo_guess_first(const uct_syncmem_amo_guess_t *g,
                            const void *owner, uint64_t addr,
                            uint32_t *chain_p)
{
    const uct_syncmem_amo_guess_entry_t *e =
            uct_syncmem_amo_guess_find(g, owner, addr);

    *chain_p = (e != NULL) ? e->chain : 0;
    return (e != NULL) ? e->value : 0;
}

/* A step found 'seen' where it guessed another value: what its retry
 * guesses. A newer chain that started from 'seen' runs before the retry:
 * the retry continues it (*chain_p becomes it). Otherwise the retry
 * guesses 'seen' and starts a chain (*chain_p 0). */
static inline uint64_t
uct_syncmem_amo_guess_retry(const uct_syncmem_amo_guess_t *g,
                            const void *owner, uint64_t addr,
                            uint32_t *chain_p, uint64_t seen)
{
    const uct_syncmem_amo_guess_entry_t *e =
            uct_syncmem_amo_guess_find(g, owner, addr);

    if ((e != NULL) && (e->chain != *chain_p) && (e->base == seen)) {
        *chain_p = e->chain;
        return e->value;
    }
    *chain_p = 0;
    return seen;
}

/* A step CAS(guess -> next) was posted, continuing chain *chain_p or, if
 * it is 0, starting a new one from guess (*chain_p becomes it): the word
 * holds next once it takes. */
static inline void
uct_syncmem_amo_guess_posted(uct_syncmem_amo_guess_t *g, const void *owner,
                             uint64_t addr, uint32_t *chain_p, uint64_t guess,
                             uint64_t next)
{
    uct_syncmem_amo_guess_entry_t *e;

    if (g->table == NULL) {
        return;
    }
    e = uct_syncmem_amo_guess_slot(g, owner, addr);
    if ((*chain_p == 0) || (e->owner != owner) || (e->addr != addr)) {
        if (++g->chains == 0) {
            ++g->chains;
        }
        *chain_p = g->chains;
        e->owner = owner;
        e->addr  = addr;
        e->base  = guess;
        e->chain = *chain_p;
    }
    e->value = next;
}

/* An operation ended on 'seen' without a step of its own (it would not
 * change the word): the word held it, and a retry would guess so. */
static inline void
uct_syncmem_amo_guess_saw(uct_syncmem_amo_guess_t *g, const void *owner,
                          uint64_t addr, uint32_t chain, uint64_t seen)
{
    if (uct_syncmem_amo_guess_retry(g, owner, addr, &chain, seen) == seen) {
        uct_syncmem_amo_guess_posted(g, owner, addr, &chain, seen, seen);
    }
}

#endif
