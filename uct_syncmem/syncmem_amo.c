/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - remote atomics: the whole UCT set, 32 and 64 bit.
 *
 * Native on the HCA: 64-bit add, fetch-add and compare-swap
 * (IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_CMP_AND_SWP).
 *
 * Emulated by the initiator with compare-and-swap: and, or, xor, swap and
 * their fetching forms, and every 32-bit operation. The first CAS guesses
 * what the word holds (syncmem_amo_guess.h: the value this iface last saw
 * there, moved on by the steps it posted since; 0 for a word it has not
 * seen): if right the operation is done in one step; otherwise the CAS
 * changes nothing and returns the value, and CAS(seen -> op(seen)) follows
 * until it takes. Each step is an HCA atomic, so emulated operations are
 * atomic against every other syncmem atomic on that word, native or
 * emulated, whatever was guessed.
 * Like all IB atomics, they are NOT atomic against CPU stores or atomics on
 * the target, nor against other transports.
 *
 * 32-bit operations work on the naturally aligned 64-bit word that holds
 * them and leave its other half as they found it. The registration must
 * cover that whole word; if it does not, the HCA refuses the access and the
 * endpoint fails with UCS_ERR_INVALID_ADDR. Concurrent CPU stores to the
 * other half may be lost (a CAS may write back a stale copy of it).
 *
 * An emulated operation is a small state machine driven by its own
 * completions: never a wait inside a post call, many in flight per
 * endpoint, and flush waits for them (ep->amo_inflight), as does a fence
 * (uct_syncmem_ep_fence): a retry is posted after whatever came meanwhile,
 * but before what a fence keeps (UCT_SYNCMEM_EP_POST_STEP).
 */
#include "syncmem_ep.h"
#include "syncmem_tx.inl"

#include <string.h>

/* State of one atomic, kept in its bounce buffer behind the 8 bytes the
 * HCA writes the old value into. */
typedef struct uct_syncmem_amo {
    uint64_t          fetched;      /* written by the HCA */
    uct_syncmem_ep_t  *ep;
    uint64_t          remote_addr;  /* of the 64-bit word */
    uct_rkey_t        rkey;
    uint64_t          guess;        /* what we believe the word holds */
    uint64_t          value;        /* operand */
    uint64_t          compare;      /* cswap32 */
    uint32_t          chain;        /* of its last guess (syncmem_amo_guess.h) */
    uint8_t           opcode;       /* uct_atomic_op_t, or CSWAP */
    uint8_t           size;         /* 4 or 8 */
    uint8_t           shift;        /* bit offset of a 32-bit value */
    uint8_t           emulated;
} uct_syncmem_amo_t;


static UCS_F_ALWAYS_INLINE uct_syncmem_amo_t *
uct_syncmem_amo_of(uct_syncmem_desc_t *desc)
{
    return uct_syncmem_desc_data(desc);
}

/* The operand's part of a 64-bit word. */
static UCS_F_ALWAYS_INLINE uint64_t
uct_syncmem_amo_part(const uct_syncmem_amo_t *amo, uint64_t word)
{
    return (amo->size == 8) ? word : (uint32_t)(word >> amo->shift);
}

/* What the word becomes when the operation applies to it. */
static uint64_t uct_syncmem_amo_apply(const uct_syncmem_amo_t *amo,
                                      uint64_t word)
{
    uint64_t mask = (amo->size == 8) ? UINT64_MAX :
                    ((uint64_t)UINT32_MAX << amo->shift);
    uint64_t old  = uct_syncmem_amo_part(amo, word), new_part;

    switch (amo->opcode) {
    case UCT_ATOMIC_OP_ADD:   new_part = old + amo->value; break;
    case UCT_ATOMIC_OP_AND:   new_part = old & amo->value; break;
    case UCT_ATOMIC_OP_OR:    new_part = old | amo->value; break;
    case UCT_ATOMIC_OP_XOR:   new_part = old ^ amo->value; break;
    case UCT_ATOMIC_OP_SWAP:  new_part = amo->value;       break;
    default: /* CSWAP */
        new_part = (old == amo->compare) ? amo->value : old;
        break;
    }

    if (amo->size == 4) {
        new_part = ((uint64_t)(uint32_t)new_part) << amo->shift;
    }
    return (word & ~mask) | (new_part & mask);
}

/* The HCA writes the word's old value here. */
static UCS_F_ALWAYS_INLINE void
uct_syncmem_amo_sge(uct_syncmem_desc_t *desc, struct ibv_sge *sge)
{
    sge->addr   = (uintptr_t)&uct_syncmem_amo_of(desc)->fetched;
    sge->length = sizeof(uint64_t);
    sge->lkey   = desc->lkey;
}

/* A step of an emulated operation: CAS(amo->guess -> op(amo->guess)),
 * signalled; once posted, the table of guesses expects its outcome. */
static ucs_status_t uct_syncmem_amo_post_cas(uct_syncmem_iface_t *iface,
                                             uct_syncmem_desc_t *desc)
{
    uct_syncmem_amo_t *amo = uct_syncmem_amo_of(desc);
    uint64_t next          = uct_syncmem_amo_apply(amo, amo->guess);
    struct ibv_sge sge;
    ucs_status_t status;

    uct_syncmem_amo_sge(desc, &sge);
    status = uct_syncmem_ep_post_sge(iface, amo->ep, IBV_WR_ATOMIC_CMP_AND_SWP,
                                     amo->remote_addr, amo->rkey, amo->guess,
                                     next, &sge, 1, sizeof(uint64_t),
                                     &desc->super, 1, UCT_SYNCMEM_TX_ANY, 0);
    if (ucs_likely(status == UCS_OK)) {
        uct_syncmem_amo_guess_posted(&iface->amo.guess, amo->ep,
                                     amo->remote_addr, &amo->chain,
                                     amo->guess, next);
        ++iface->amo.counters.steps;
    }
    return status;
}

static void uct_syncmem_amo_finish(uct_syncmem_desc_t *desc,
                                   ucs_status_t status, uint64_t old)
{
    uct_syncmem_amo_t *amo = uct_syncmem_amo_of(desc);

    if ((status == UCS_OK) && (desc->super.arg != NULL)) {
        if (amo->size == 8) {
            *(uint64_t*)desc->super.arg = old;
        } else {
            *(uint32_t*)desc->super.arg = (uint32_t)old;
        }
    }
    if (amo->emulated) {
        uct_syncmem_ep_amo_done(amo->ep);
    }
    if (desc->super.comp != NULL) {
        uct_invoke_completion(desc->super.comp, status);
    }
    ucs_mpool_put(desc);
}

/* A compare-and-swap step of an emulated operation completed. */
static void uct_syncmem_amo_cas_done(uct_syncmem_op_t *op, ucs_status_t status)
{
    uct_syncmem_desc_t *desc   = ucs_derived_of(op, uct_syncmem_desc_t);
    uct_syncmem_amo_t *amo     = uct_syncmem_amo_of(desc);
    uct_syncmem_iface_t *iface = ucs_derived_of(amo->ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uint64_t seen              = amo->fetched;

    if (status != UCS_OK) {
        uct_syncmem_amo_finish(desc, status, 0);
        return;
    }

    if (seen == amo->guess) {
        /* it took: the word was 'seen' and is now op(seen) */
        uct_syncmem_amo_finish(desc, UCS_OK, uct_syncmem_amo_part(amo, seen));
        return;
    }

    if (uct_syncmem_amo_apply(amo, seen) == seen) {
        /* nothing to write (e.g. a failed compare): the fetch is the answer */
        uct_syncmem_amo_guess_saw(&iface->amo.guess, amo->ep,
                                  amo->remote_addr, amo->chain, seen);
        uct_syncmem_amo_finish(desc, UCS_OK, uct_syncmem_amo_part(amo, seen));
        return;
    }

    /* another value: try again from it, or from where an earlier
     * operation's retry (which runs first) leaves it. The completion that
     * got us here gave back a send slot, so the retry always has one. */
    amo->guess = uct_syncmem_amo_guess_retry(&iface->amo.guess, amo->ep,
                                             amo->remote_addr, &amo->chain,
                                             seen);
    status     = UCT_SYNCMEM_EP_POST_STEP(amo->ep,
                                          uct_syncmem_amo_post_cas(iface,
                                                                   desc));
    if (status != UCS_OK) {
        uct_syncmem_amo_finish(desc, status, 0);
    }
}

/* A native fetch-add or compare-swap completed. */
static void uct_syncmem_amo_native_done(uct_syncmem_op_t *op,
                                        ucs_status_t status)
{
    uct_syncmem_desc_t *desc = ucs_derived_of(op, uct_syncmem_desc_t);

    uct_syncmem_amo_finish(desc, status, uct_syncmem_amo_of(desc)->fetched);
}

/* Gets the bounce buffer of an atomic and fills in what its completion
 * reads. */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_syncmem_amo_desc(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep,
                     int native, unsigned size, void *result,
                     uct_completion_t *comp, uct_syncmem_desc_t **desc_p)
{
    ucs_status_t status;
    uct_syncmem_amo_t *amo;

    status = uct_syncmem_ep_tx_desc(iface, ep,
                                    native ? uct_syncmem_amo_native_done :
                                             uct_syncmem_amo_cas_done, desc_p);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    (*desc_p)->super.comp = comp;
    (*desc_p)->super.arg  = result; /* a reconnect reads it: see
                                       uct_syncmem_replay_peer_ran */
    amo                   = uct_syncmem_amo_of(*desc_p);
    amo->size             = size;
    amo->emulated         = !native;
    return UCS_OK;
}

/* The table of guesses, made at the iface's first emulated atomic (an
 * iface that has none costs nothing). Without it every guess is 0. */
static UCS_F_NOINLINE void uct_syncmem_amo_guess_alloc(uct_syncmem_iface_t *iface)
{
    iface->amo.guess.table = ucs_calloc(iface->amo.words,
                                        sizeof(*iface->amo.guess.table),
                                        "syncmem_amo_guess");
    if (iface->amo.guess.table == NULL) {
        ucs_diag("syncmem: no memory for %u words of atomic guesses"
                 " (AMO_GUESS_WORDS): emulated atomics guess 0",
                 iface->amo.words);
        iface->amo.words = 0;
        return;
    }
    iface->amo.guess.mask = iface->amo.words - 1;
}

void uct_syncmem_amo_init(uct_syncmem_iface_t *iface,
                          const uct_syncmem_iface_config_t *config)
{
    memset(&iface->amo, 0, sizeof(iface->amo));
    iface->amo.words = (config->amo_guess_words == 0) ? 0 :
                       ucs_roundup_pow2(ucs_min(config->amo_guess_words,
                                                UCS_BIT(24)));
}

void uct_syncmem_amo_cleanup(uct_syncmem_iface_t *iface)
{
    ucs_free(iface->amo.guess.table);
    iface->amo.guess.table = NULL;
}

void uct_syncmem_iface_amo_counters(uct_iface_h tl_iface,
                                    uct_syncmem_amo_counters_t *c)
{
    *c = ucs_derived_of(tl_iface, uct_syncmem_iface_t)->amo.counters;
}

/* An operation the HCA lacks: started as its first compare-and-swap. Out
 * of line, so that the native ones keep few registers. */
static UCS_F_NOINLINE ucs_status_t
uct_syncmem_amo_emulate(uct_syncmem_ep_t *ep, unsigned opcode, unsigned size,
                        uint64_t value, uint64_t compare, uint64_t remote_addr,
                        uct_rkey_t rkey, void *result, uct_completion_t *comp)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uct_syncmem_desc_t *desc;
    uct_syncmem_amo_t *amo;
    ucs_status_t status;

    status = uct_syncmem_amo_desc(iface, ep, 0, size, result, comp, &desc);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    amo              = uct_syncmem_amo_of(desc);
    amo->ep          = ep;
    amo->remote_addr = remote_addr & ~(uint64_t)7;
    amo->rkey        = rkey;
    amo->value       = value;
    amo->compare     = compare;
    amo->opcode      = opcode;
    amo->shift       = (remote_addr & 4) * 8; /* little-endian halves */
    if (ucs_unlikely((iface->amo.guess.table == NULL) &&
                     (iface->amo.words != 0))) {
        uct_syncmem_amo_guess_alloc(iface);
    }
    amo->guess       = uct_syncmem_amo_guess_first(&iface->amo.guess, ep,
                                                   amo->remote_addr,
                                                   &amo->chain);
    status           = uct_syncmem_amo_post_cas(iface, desc);
    if (ucs_unlikely(status != UCS_OK)) {
        ucs_mpool_put(desc);
        return status;
    }
    ++ep->amo_inflight;
    ++iface->amo.counters.emulated;
    iface->amo.counters.guessed += (amo->chain != 0) && (amo->guess != 0);
    return UCS_OK;
}

/* One of the HCA's own (64-bit fetch-add, compare-swap), at the address as
 * given: a misaligned one fails. */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_syncmem_amo_native(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep,
                       enum ibv_wr_opcode opcode, uint64_t compare_add,
                       uint64_t swap, uint64_t remote_addr, uct_rkey_t rkey,
                       void *result, uct_completion_t *comp, int signal)
{
    uct_syncmem_desc_t *desc;
    struct ibv_sge sge;
    ucs_status_t status;

    status = uct_syncmem_amo_desc(iface, ep, 1, sizeof(uint64_t), result,
                                  comp, &desc);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    uct_syncmem_amo_sge(desc, &sge);
    status = uct_syncmem_ep_post_sge(iface, ep, opcode, remote_addr, rkey,
                                     compare_add, swap, &sge, 1,
                                     sizeof(uint64_t), &desc->super, signal,
                                     UCT_SYNCMEM_TX_ANY, 0);
    if (ucs_unlikely(status != UCS_OK)) {
        ucs_mpool_put(desc);
    }
    return status;
}

static UCS_F_ALWAYS_INLINE ucs_status_t
uct_syncmem_amo_start(uct_ep_h tl_ep, unsigned opcode, unsigned size,
                      uint64_t value, uint64_t compare, uint64_t remote_addr,
                      uct_rkey_t rkey, void *result, uct_completion_t *comp)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                uct_syncmem_iface_t);
    ucs_status_t status;

    UCT_CHECK_PARAM(!(remote_addr & (size - 1)),
                    "syncmem: atomic address 0x%" PRIx64 " is not aligned to"
                    " %u bytes", remote_addr, size);
    if ((size == 8) && (opcode == UCT_ATOMIC_OP_ADD)) {
        status = uct_syncmem_amo_native(iface, ep, IBV_WR_ATOMIC_FETCH_AND_ADD,
                                        value, 0, remote_addr, rkey, result,
                                        comp, comp != NULL);
    } else if ((size == 8) && (opcode == UCT_ATOMIC_OP_CSWAP)) {
        status = uct_syncmem_amo_native(iface, ep, IBV_WR_ATOMIC_CMP_AND_SWP,
                                        compare, value, remote_addr, rkey,
                                        result, comp, 1);
    } else {
        status = uct_syncmem_amo_emulate(ep, opcode, size, value, compare,
                                         remote_addr, rkey, result, comp);
    }
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    UCT_TL_EP_STAT_ATOMIC(&ep->super);
    return (comp != NULL) || (result != NULL) ? UCS_INPROGRESS : UCS_OK;
}

ucs_status_t uct_syncmem_ep_atomic64_post(uct_ep_h ep, unsigned opcode,
                                          uint64_t value, uint64_t remote_addr,
                                          uct_rkey_t rkey)
{
    return uct_syncmem_amo_start(ep, opcode, 8, value, 0, remote_addr, rkey,
                                 NULL, NULL);
}

ucs_status_t uct_syncmem_ep_atomic32_post(uct_ep_h ep, unsigned opcode,
                                          uint32_t value, uint64_t remote_addr,
                                          uct_rkey_t rkey)
{
    return uct_syncmem_amo_start(ep, opcode, 4, value, 0, remote_addr, rkey,
                                 NULL, NULL);
}

ucs_status_t uct_syncmem_ep_atomic64_fetch(uct_ep_h ep, uct_atomic_op_t opcode,
                                           uint64_t value, uint64_t *result,
                                           uint64_t remote_addr,
                                           uct_rkey_t rkey,
                                           uct_completion_t *comp)
{
    return uct_syncmem_amo_start(ep, opcode, 8, value, 0, remote_addr, rkey,
                                 result, comp);
}

ucs_status_t uct_syncmem_ep_atomic32_fetch(uct_ep_h ep, uct_atomic_op_t opcode,
                                           uint32_t value, uint32_t *result,
                                           uint64_t remote_addr,
                                           uct_rkey_t rkey,
                                           uct_completion_t *comp)
{
    return uct_syncmem_amo_start(ep, opcode, 4, value, 0, remote_addr, rkey,
                                 result, comp);
}

ucs_status_t uct_syncmem_ep_atomic_cswap64(uct_ep_h ep, uint64_t compare,
                                           uint64_t swap, uint64_t remote_addr,
                                           uct_rkey_t rkey, uint64_t *result,
                                           uct_completion_t *comp)
{
    return uct_syncmem_amo_start(ep, UCT_ATOMIC_OP_CSWAP, 8, swap, compare,
                                 remote_addr, rkey, result, comp);
}

ucs_status_t uct_syncmem_ep_atomic_cswap32(uct_ep_h ep, uint32_t compare,
                                           uint32_t swap, uint64_t remote_addr,
                                           uct_rkey_t rkey, uint32_t *result,
                                           uct_completion_t *comp)
{
    return uct_syncmem_amo_start(ep, UCT_ATOMIC_OP_CSWAP, 4, swap, compare,
                                 remote_addr, rkey, result, comp);
}
