#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct emt_pool {
    int32_t n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    /* current job, guarded by mu */
    emt_pool_fn fn;
    void *ctx;
    int32_t n_tasks;
    atomic_int next_task;
    int32_t workers_busy;
    uint64_t generation;
    int quit;
};

static void run_tasks(emt_pool *p, emt_pool_fn fn, void *ctx, int32_t n_tasks) {
    for (;;) {
        int32_t t = atomic_fetch_add(&p->next_task, 1);
        if (t >= n_tasks) break;
        fn(ctx, t);
    }
}

static void *worker(void *arg) {
    emt_pool *p = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        emt_pool_fn fn = p->fn;
        void *ctx = p->ctx;
        int32_t n = p->n_tasks;
        pthread_mutex_unlock(&p->mu);
        run_tasks(p, fn, ctx, n);
        pthread_mutex_lock(&p->mu);
        if (--p->workers_busy == 0) pthread_cond_signal(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

emt_pool *emt_pool_create(int32_t n_threads) {
    emt_pool *p = emt_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads < 1 ? 1 : n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    atomic_init(&p->next_task, 0);
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
        p->quit = 1;
        pthread_cond_broadcast(&p->work_cv);
        pthread_mutex_unlock(&p->mu);
        for (int32_t i = 0; i < p->n_threads - 1; i++) pthread_join(p->threads[i], NULL);
        free(p->threads);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->done_cv);
    free(p);
}

int32_t emt_pool_size(const emt_pool *p) { return p->n_threads; }

void emt_pool_run(emt_pool *p, int32_t n_tasks, emt_pool_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (p->n_threads <= 1 || n_tasks == 1) {
        for (int32_t t = 0; t < n_tasks; t++) fn(ctx, t);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store(&p->next_task, 0);
    p->workers_busy = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, fn, ctx, n_tasks);
    pthread_mutex_lock(&p->mu);
    while (p->workers_busy > 0) pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
