/* Atomics, futex and a clock for channel.pyx: the few things Cython cannot say directly. */
#ifndef RAYREACT_CHANNEL_SYNC_H
#define RAYREACT_CHANNEL_SYNC_H

#include <stdint.h>
#include <time.h>
#include <errno.h>
#include <limits.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/futex.h>

static inline uint64_t load_u64(uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void store_u64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static inline uint32_t load_u32(uint32_t *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static inline void store_u32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
static inline uint32_t add_u32(uint32_t *p, uint32_t v) { return __atomic_add_fetch(p, v, __ATOMIC_SEQ_CST); }
static inline uint32_t sub_u32(uint32_t *p, uint32_t v) { return __atomic_sub_fetch(p, v, __ATOMIC_SEQ_CST); }
static inline uint32_t xchg_u32(uint32_t *p, uint32_t v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static inline void full_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline double monotonic_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Shared (not private) futex: the word lives in a file mapped by several processes. */
static inline int futex_wait(uint32_t *addr, uint32_t expected, double timeout_s) {
    struct timespec ts;
    if (timeout_s < 0) timeout_s = 0;
    if (timeout_s > 3600) timeout_s = 3600;
    ts.tv_sec = (time_t)timeout_s;
    ts.tv_nsec = (long)((timeout_s - (double)ts.tv_sec) * 1e9);
    return (int)syscall(SYS_futex, addr, FUTEX_WAIT, expected, &ts, NULL, 0);
}

static inline int futex_wake_all(uint32_t *addr) {
    return (int)syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

#endif
