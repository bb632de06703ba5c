// The step graphs (graph_begin, graph_end, graph_reset in
// src/backend/backend.h): the ops of a device step's span (node tokens,
// verify forward, acceptance, commit, next root and heads) recorded once
// per bank tree with stream capture and replayed with one cudaGraphLaunch.
// What changes between steps lives in device memory (the context length and
// max_tokens, written before the launch; the tokens in the step record), so
// one recording serves every context length. No CPU twin: the CPU backend
// has no launches to save. docs/architecture.md, "The device step".
//
// A key's first span runs directly and its staging (the tree's index
// arrays, positions offsets, frequencies) is measured, so that its second
// span can be captured into constants of that size: nothing may be
// allocated or awaited inside a capture, and the staging ring is reused
// after every wait while a graph is replayed long after. Anything a capture
// cannot hold (a wait, a scratch that must grow, a per-step input) breaks
// it; the key then runs directly for good (graph_fallbacks counts those
// spans). ENTMTP_CUDA_GRAPHS=0 turns graphs off (the tests compare).
// Captures are thread-local: sessions on other threads keep allocating.
#include "cuda_exec.h"

#include <stdlib.h>
#include <string.h>

static step_graph *find_graph(emt_exec *ex, const void *key, int32_t variant) {
    for (int i = 0; i < ex->n_graphs; i++)
        if (ex->graphs[i].key == key && ex->graphs[i].variant == variant) return &ex->graphs[i];
    if (ex->n_graphs == ex->graphs_cap) {
        int cap = ex->graphs_cap ? 2 * ex->graphs_cap : 16;
        step_graph *g = (step_graph *)realloc(ex->graphs, (size_t)cap * sizeof *g);
        if (!g) return NULL;
        ex->graphs = g;
        ex->graphs_cap = cap;
    }
    step_graph *g = &ex->graphs[ex->n_graphs++];
    memset(g, 0, sizeof *g);
    g->key = key;
    g->variant = variant;
    return g;
}

static void drop_constants(emt_exec *ex, step_graph *g) {
    if (g->const_host) cu_retire(ex, g->const_host, 1);
    if (g->const_dev) cu_retire(ex, g->const_dev, 0);
    g->const_host = g->const_dev = NULL;
}

// The attention's cached mask lists may point into the staging ring: never
// into a recording, never from one into a direct launch.
static void forget_mask(emt_exec *ex) { ex->mask_rows = 0; }

void *cu_graph_stage(emt_exec *ex, const void *src, size_t bytes) {
    const size_t aligned = (bytes + 255) & ~(size_t)255;
    if (ex->measuring) {
        ex->measuring->const_bytes += aligned;
        return NULL;
    }
    step_graph *g = ex->recording;
    if (ex->const_used + aligned > g->const_bytes) { // more than its first span staged
        ex->capture_broken = 1;
        return NULL;
    }
    memcpy((char *)g->const_host + ex->const_used, src, bytes);
    void *d = (char *)g->const_dev + ex->const_used;
    ex->const_used += aligned;
    return d;
}

int cu_graph_begin(emt_exec *ex, const void *key, int32_t variant) {
    step_graph *g = ex->graphs_on && !ex->error[0] ? find_graph(ex, key, variant) : NULL;
    forget_mask(ex);
    if (g && g->state == GRAPH_READY) {
        CUDA_OK(ex, cudaGraphLaunch(g->exec, ex->stream));
        ex->counters.graph_launches++;
        return EMT_GRAPH_REPLAYED;
    }
    if (g && g->state == GRAPH_NEW) { // first use: run directly, measure the staging
        g->state = GRAPH_SEEN;
        g->const_bytes = 0;
        ex->measuring = g;
    } else if (g && g->state == GRAPH_SEEN) { // second use: record
        size_t bytes = g->const_bytes ? g->const_bytes : 256;
        if (cudaMallocHost(&g->const_host, bytes) != cudaSuccess || cudaMalloc(&g->const_dev, bytes) != cudaSuccess ||
            cudaStreamBeginCapture(ex->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
            cudaGetLastError(); // not the context's error: the span runs directly
            drop_constants(ex, g);
            g->state = GRAPH_FAILED;
        } else {
            ex->recording = g;
            ex->const_used = 0;
            ex->capture_broken = 0;
            ex->launches_before = emt_cuda_launch_count;
            return 0;
        }
    }
    ex->counters.graph_fallbacks++;
    return 0;
}

int cu_graph_end(emt_exec *ex, int discard) {
    forget_mask(ex);
    ex->measuring = NULL;
    step_graph *g = ex->recording;
    if (!g) return 0; // the span ran directly
    ex->recording = NULL;
    emt_cuda_launch_count = ex->launches_before; // recorded, not launched
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(ex->stream, &graph);
    if (e == cudaSuccess && !discard && !ex->capture_broken) {
        e = cudaGraphInstantiate(&g->exec, graph, 0);
        cudaGraphDestroy(graph);
        graph = NULL;
        if (e == cudaSuccess) {
            // the constants once, then the graph; every later step only launches it
            CUDA_OK(ex, cudaMemcpyAsync(g->const_dev, g->const_host, ex->const_used, cudaMemcpyHostToDevice,
                                        ex->stream));
            ex->counters.h2d_copies++;
            ex->counters.h2d_bytes += (int64_t)ex->const_used;
            g->state = GRAPH_READY;
            ex->counters.graph_captures++;
            CUDA_OK(ex, cudaGraphLaunch(g->exec, ex->stream));
            ex->counters.graph_launches++;
            return 0;
        }
    }
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError(); // a refused call inside the capture is not the context's error
    drop_constants(ex, g);
    g->state = GRAPH_FAILED;
    ex->counters.graph_fallbacks++;
    return discard ? 0 : 1; // nothing ran: the engine issues the span again
}

void cu_graph_reset(emt_exec *ex) {
    for (int i = 0; i < ex->n_graphs; i++) {
        step_graph *g = &ex->graphs[i];
        if (g->exec) cudaGraphExecDestroy(g->exec); // an in-flight launch completes first (CUDA frees it then)
        drop_constants(ex, g);
    }
    ex->n_graphs = 0;
    ex->measuring = NULL;
}
