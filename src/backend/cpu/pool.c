#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

/* A forward pass issues a few hundred jobs of 10 us to 1 ms each, and waking
 * workers through a condition variable costs ~15 us per job. So idle workers
 * first spin for a while (within a forward the next job comes sooner), then
 * sleep, leaving the cores to others between steps. The caller waits only
 * for tasks, not for workers to check in: when a worker is descheduled (more
 * threads than cores), the caller runs the tasks itself instead of waiting
 * for the worker to be scheduled. */
#define EMT_SPIN_SECONDS 100e-6

/* Job descriptor; two slots by generation parity, so a late worker reading
 * the previous job's slot never sees it overwritten while that job can
 * still hand out tasks. */
typedef struct pool_job {
    _Atomic(emt_pool_fn) fn;
    _Atomic(void *) ctx;
    atomic_int n_tasks;
} pool_job;

struct emt_pool {
    int32_t n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;
    pool_job jobs[2];
    /* (generation << 32) | next task index: a task is claimed by a CAS that
     * also checks the generation, so a late worker cannot take a task of a
     * newer job with an older job's function */
    atomic_uint_fast64_t state;
    atomic_int done;     /* tasks of the current job finished */
    atomic_int sleepers; /* workers blocked (or about to block) on work_cv */
    atomic_int quit;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static inline uint32_t gen_of(uint64_t s) { return (uint32_t)(s >> 32); }

/* Runs tasks of generation `gen` until none is left or the job changed. */
static void run_tasks(emt_pool *p, uint32_t gen) {
    const pool_job *j = &p->jobs[gen & 1];
    emt_pool_fn fn = atomic_load(&j->fn);
    void *ctx = atomic_load(&j->ctx);
    uint32_t n = (uint32_t)atomic_load(&j->n_tasks);
    uint64_t s = atomic_load(&p->state);
    while (gen_of(s) == gen && (uint32_t)s < n) {
        if (!atomic_compare_exchange_weak(&p->state, &s, s + 1)) continue;
        fn(ctx, (int32_t)(uint32_t)s);
        atomic_fetch_add(&p->done, 1);
        s = atomic_load(&p->state);
    }
}

/* Spins until the generation differs from `seen` or quit is set, for at
 * most EMT_SPIN_SECONDS; 1 when it did. */
static int spin_for_work(emt_pool *p, uint32_t seen) {
    double t0 = emt_now();
    for (int i = 1;; i++) {
        if (gen_of(atomic_load(&p->state)) != seen || atomic_load(&p->quit)) return 1;
        cpu_relax();
        if (i % 64 == 0 && emt_now() - t0 > EMT_SPIN_SECONDS) return 0;
    }
}

static void *worker(void *arg) {
    emt_pool *p = arg;
    uint32_t seen = 0;
    for (;;) {
        if (!spin_for_work(p, seen)) {
            /* sleepers is raised before the generation is read again; the
             * caller moves the generation before reading sleepers, so either
             * this worker sees the new job or the caller sees it and wakes it */
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (gen_of(atomic_load(&p->state)) == seen && !atomic_load(&p->quit))
                pthread_cond_wait(&p->work_cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) break;
        seen = gen_of(atomic_load(&p->state));
        run_tasks(p, seen);
    }
    return NULL;
}

emt_pool *emt_pool_create(int32_t n_threads) {
    emt_pool *p = emt_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads < 1 ? 1 : n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    for (int i = 0; i < 2; i++) {
        atomic_init(&p->jobs[i].fn, NULL);
        atomic_init(&p->jobs[i].ctx, NULL);
        atomic_init(&p->jobs[i].n_tasks, 0);
    }
    atomic_init(&p->state, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->quit, 0);
    if (p->n_threads > 1) {
        p->threads = emt_calloc((size_t)p->n_threads - 1, sizeof *p->threads);
        if (!p->threads) { emt_pool_destroy(p); return NULL; }
        for (int32_t i = 0; i < p->n_threads - 1; i++) {
            if (pthread_create(&p->threads[i], NULL, worker, p) != 0) {
                p->n_threads = i + 1; /* the ones that started */
                emt_pool_destroy(p);
                emt_fail(ENTMTP_ERR_OUT_OF_MEMORY, "cannot start worker thread %d", i);
                return NULL;
            }
        }
    }
    return p;
}

void emt_pool_destroy(emt_pool *p) {
    if (!p) return;
    if (p->threads) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->quit, 1);
        pthread_cond_broadcast(&p->work_cv);
        pthread_mutex_unlock(&p->mu);
        for (int32_t i = 0; i < p->n_threads - 1; i++) pthread_join(p->threads[i], NULL);
        free(p->threads);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_cv);
    free(p);
}

int32_t emt_pool_size(const emt_pool *p) { return p->n_threads; }

void emt_pool_run(emt_pool *p, int32_t n_tasks, emt_pool_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (p->n_threads <= 1 || n_tasks == 1) {
        for (int32_t t = 0; t < n_tasks; t++) fn(ctx, t);
        return;
    }
    uint32_t gen = gen_of(atomic_load(&p->state)) + 1;
    pool_job *j = &p->jobs[gen & 1];
    atomic_store(&j->fn, fn);
    atomic_store(&j->ctx, ctx);
    atomic_store(&j->n_tasks, n_tasks);
    atomic_store(&p->done, 0);
    atomic_store(&p->state, (uint64_t)gen << 32);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->work_cv);
        pthread_mutex_unlock(&p->mu);
    }
    run_tasks(p, gen);
    /* every task is claimed; wait for those still running on workers,
     * spinning first, then yielding the core in case one waits for it */
    for (int i = 0; atomic_load(&p->done) < n_tasks; i++) {
        if (i < 4096) cpu_relax();
        else sched_yield();
    }
}
