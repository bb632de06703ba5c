// The CUDA execution harness's runtime (see include/cuda_runtime.h and
// docs/cuda-harness.md): device memory, streams and events with deferred
// execution, launch validation, and the fiber scheduler that runs a block's
// threads with CUDA's barrier and warp semantics.
#include "cuda_runtime.h"
#include "memstats.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define EMT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMT_ASAN 1
#endif
#endif
#ifdef EMT_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

// The scheduler's hot path (a lane stopping at a collective or barrier, the
// fiber switch, the collective's completion) runs once per lane per
// collective: under ASan+UBSan its own bookkeeping (fixed arrays of the
// block's threads) would be checked tens of millions of times per test and
// cost about a third of the time. The kernels, the library and the rest of
// the runtime stay instrumented.
#define EMT_SCHEDULER_HOT __attribute__((no_sanitize("address", "undefined")))

// ----------------------------------------------- limits of the GPUs we build for
// sm_80 (A100) and sm_90 (H100): the smaller of the two where they differ.
static const unsigned kMaxThreadsPerBlock = 1024, kMaxBlockX = 1024, kMaxBlockY = 1024, kMaxBlockZ = 64;
static const unsigned kMaxGridX = 2147483647u, kMaxGridYZ = 65535;
static const size_t kSharedPerBlock = 48 * 1024;     // without opting in
static const size_t kSharedPerBlockOptin = 166912;   // sm_80's opt-in maximum (sm_90: 232448)
static const size_t kFiberStack = 64 * 1024;
#ifdef EMT_ASAN
static const size_t kFiberTopFrames = 20 * 1024; // stagger (< 16 KiB) + the fiber's entry frames
#endif

namespace emt_harness {

thread_state *current = nullptr;
uint3 block_idx, block_dim, grid_dim;

// One fiber per thread of the block being run.
enum thread_phase { NOT_STARTED, RUNNABLE, AT_BARRIER, AT_COLLECTIVE, EXITED };
struct thread_state {
    uint3 idx;
    unsigned lane, warp;
    thread_phase phase;
    void *sp;            // saved stack pointer while switched out
    char *stack;         // bottom of its stack
    const char *file;    // where it waits
    int line;
    collective_kind kind; // the collective it waits at
    unsigned mask;
    int arg, width;
    uint64_t value, result;
#if !defined(__x86_64__)
    ucontext_t uc;
#endif
#ifdef EMT_ASAN
    void *fake_stack;
#endif
};
const uint3 &thread_idx_of(const thread_state *t) { return t->idx; }

} // namespace emt_harness

using namespace emt_harness;

// ------------------------------------------------------------ global state
namespace {

struct op {
    std::function<void()> run;
};
struct graph_state {
    std::vector<op> ops;
};
struct stream_state {
    std::deque<op> queue;
    bool nonblocking;
    graph_state *capture = nullptr; // recording instead of queueing
    bool capture_invalid = false;
};
struct event_state {
    stream_state *stream = nullptr; // where it was last recorded
    unsigned long long done_at = 0; // ops_executed when it completed (0: pending)
    bool recorded = false, completed = false;
};

std::recursive_mutex api_lock;
std::map<uintptr_t, size_t> device_allocs, pinned_allocs;
stream_state legacy_stream{ {}, false };
std::vector<stream_state *> streams;
std::map<const void *, size_t> shared_optin;
cudaError_t sticky_error = cudaSuccess, last_error = cudaSuccess;
std::string diagnostic;
unsigned long long ops_executed = 0;
int current_device = 0;

// what the running launch needs
char *dynamic_shared_mem = nullptr; // exactly the launch's size, so ASan bounds it
const kernel_call *running = nullptr;
std::vector<thread_state> threads;
char *stack_pool = nullptr;
size_t stack_pool_count = 0;
// Stacks go to threads when they start and come back when they exit, most
// recent first: a kernel without barriers runs every thread on one hot stack.
std::vector<char *> free_stacks;
void *scheduler_sp = nullptr;
#if !defined(__x86_64__)
ucontext_t scheduler_uc;
#endif
#ifdef EMT_ASAN
void *scheduler_fake_stack = nullptr;
const void *scheduler_stack_bottom = nullptr;
size_t scheduler_stack_size = 0;
#endif
bool block_failed = false;

cudaError_t fail(cudaError_t e, bool sticky, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
cudaError_t fail(cudaError_t e, bool sticky, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cuda-harness: %s\n", buf);
    if (getenv("EMT_CUDA_HARNESS_ABORT")) abort();
    if (diagnostic.empty() || !sticky_error) diagnostic = buf;
    if (sticky && !sticky_error) sticky_error = e;
    if (!last_error) last_error = e;
    return e;
}

cudaError_t ret(cudaError_t e) { return sticky_error ? sticky_error : e; }

// The allocation holding [p, p+bytes), or none.
bool in_allocs(const std::map<uintptr_t, size_t> &m, const void *p, size_t bytes) {
    auto it = m.upper_bound((uintptr_t)p);
    if (it == m.begin()) return false;
    --it;
    return (uintptr_t)p + bytes <= it->first + it->second && (uintptr_t)p >= it->first;
}
bool is_device(const void *p, size_t bytes) { return in_allocs(device_allocs, p, bytes); }
bool is_pinned(const void *p, size_t bytes) { return in_allocs(pinned_allocs, p, bytes); }

stream_state *resolve(cudaStream_t s) { return s ? (stream_state *)s : &legacy_stream; }
bool valid_stream(cudaStream_t s) {
    if (!s) return true;
    for (stream_state *x : streams)
        if (x == (stream_state *)s) return true;
    return false;
}

void flush(stream_state *s) {
    while (!s->queue.empty()) {
        op o = std::move(s->queue.front());
        s->queue.pop_front();
        ops_executed++;
        if (!sticky_error) o.run();
    }
}
void flush_all(void) {
    flush(&legacy_stream);
    for (size_t i = 0; i < streams.size(); i++) flush(streams[i]);
}

// Blocking streams and the legacy default stream are one ordered queue (the
// legacy stream synchronises with every blocking stream); non-blocking
// streams are independent of it, as in CUDA.
stream_state *queue_of(cudaStream_t s) {
    stream_state *st = resolve(s);
    return st->nonblocking ? st : &legacy_stream;
}
void enqueue(cudaStream_t s, std::function<void()> f) {
    stream_state *st = resolve(s);
    if (st->capture) {
        st->capture->ops.push_back(op{ std::move(f) });
        return;
    }
    queue_of(s)->queue.push_back(op{ std::move(f) });
}
bool capturing(cudaStream_t s) { return resolve(s)->capture != nullptr; }
// What CUDA refuses inside a capture: the capture is invalidated, the call fails.
cudaError_t invalidate_capture(stream_state *st, const char *what) {
    st->capture_invalid = true;
    return fail(cudaErrorStreamCaptureUnsupported, false, "%s: not allowed while the stream is being captured", what);
}

} // namespace

// ------------------------------------------------------------------ fibers
#if defined(__x86_64__)
// Saves the callee-saved registers on the current stack, stores its pointer
// in *save and resumes the stack at `load`. (The FP control words are
// callee-saved too, but neither kernels nor the harness change them.)
extern "C" void emt_fiber_switch(void **save, void *load);
asm(R"(
    .text
    .globl emt_fiber_switch
    .hidden emt_fiber_switch
    .type emt_fiber_switch,@function
emt_fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emt_fiber_switch, .-emt_fiber_switch
)");
#endif

namespace {

void fiber_main(void);

#if defined(__x86_64__)
extern "C" void emt_fiber_entry(void) { fiber_main(); }
#else
void fiber_entry_uc(void) { fiber_main(); }
#endif

void prepare_fiber(thread_state *t) {
#if defined(__x86_64__)
    // a frame that emt_fiber_switch "returns" from into emt_fiber_entry, with
    // the stack aligned as after a call
    // stacks lie kFiberStack apart, which would put every fiber's top frame
    // in the same cache sets: start each at its own offset
    size_t index = (size_t)(t->stack - stack_pool) / kFiberStack;
    uintptr_t top = ((uintptr_t)(t->stack + kFiberStack - index * 1088 % 16384)) & ~(uintptr_t)15;
    uint64_t *a = (uint64_t *)(top - 16);
    a[1] = 0;
    a[0] = (uint64_t)(uintptr_t)&emt_fiber_entry;
    for (int i = 1; i <= 6; i++) a[-i] = 0; // rbp rbx r12 r13 r14 r15
    t->sp = (void *)(a - 6);
#else
    getcontext(&t->uc);
    t->uc.uc_stack.ss_sp = t->stack;
    t->uc.uc_stack.ss_size = kFiberStack;
    t->uc.uc_link = nullptr;
    makecontext(&t->uc, fiber_entry_uc, 0);
#endif
}

unsigned block_threads = 0;     // threads in the running block
thread_state *block_base = nullptr; // threads.data() while a block runs
char *stack_to_release = nullptr; // of a fiber that exited: freed once off it

// The next lane of t's warp that can run, in lane order; none after a fault.
EMT_SCHEDULER_HOT thread_state *next_in_warp(const thread_state *t) {
    if (block_failed) return nullptr;
    unsigned first = t->warp * 32, end = block_threads - first < 32 ? block_threads : first + 32;
    for (unsigned i = first + t->lane + 1; i < end; i++)
        if (block_base[i].phase == RUNNABLE || block_base[i].phase == NOT_STARTED) return &block_base[i];
    return nullptr;
}

// Runs `to` (the scheduler when null) in place of `from` (the scheduler when
// null); returns when something switches back to `from`. A lane that stops
// hands over straight to the next lane of its warp: one switch per lane.
EMT_SCHEDULER_HOT void transfer(thread_state *from, thread_state *to, bool from_exits) {
    if (to && to->phase == NOT_STARTED) {
        to->stack = free_stacks.back();
        free_stacks.pop_back();
        to->phase = RUNNABLE;
#ifdef EMT_ASAN
        // the frames an exited fiber never returned from stay poisoned
        ASAN_UNPOISON_MEMORY_REGION(to->stack + kFiberStack - kFiberTopFrames, kFiberTopFrames);
#endif
        prepare_fiber(to);
    }
    if (from_exits) stack_to_release = from->stack;
    current = to;
#ifdef EMT_ASAN
    void **save_fake = from ? (from_exits ? nullptr : &from->fake_stack) : &scheduler_fake_stack;
    if (to)
        __sanitizer_start_switch_fiber(save_fake, to->stack, kFiberStack);
    else
        __sanitizer_start_switch_fiber(save_fake, scheduler_stack_bottom, scheduler_stack_size);
#endif
#if defined(__x86_64__)
    emt_fiber_switch(from ? &from->sp : &scheduler_sp, to ? to->sp : scheduler_sp);
#else
    swapcontext(from ? &from->uc : &scheduler_uc, to ? &to->uc : &scheduler_uc);
#endif
#ifdef EMT_ASAN
    __sanitizer_finish_switch_fiber(from ? from->fake_stack : scheduler_fake_stack, nullptr, nullptr);
#endif
    current = from;
    if (stack_to_release) {
        free_stacks.push_back(stack_to_release);
        stack_to_release = nullptr;
    }
}

// scheduler -> fiber t (and the lanes after it), until control comes back
void resume(thread_state *t) { transfer(nullptr, t, false); }

thread_state *next_after_stop(thread_state *t);

// fiber t stops (waits or exits): the thread the scheduler would run next, or
// the scheduler itself when that takes a diagnosis (or the block is done)
EMT_SCHEDULER_HOT void yield(thread_state *t, bool exiting) {
    thread_state *next = next_after_stop(t);
    if (next == t) return; // its own collective completed and it runs first
    transfer(t, next, exiting);
}

void fiber_main(void) {
    thread_state *t = current;
#ifdef EMT_ASAN
    __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
    if (stack_to_release) {
        free_stacks.push_back(stack_to_release);
        stack_to_release = nullptr;
    }
    running->body();
    t->phase = EXITED;
    yield(t, true);
    abort(); // an exited fiber is never resumed
}

void ensure_stacks(size_t n) {
    if (n <= stack_pool_count) return;
    if (stack_pool) munmap(stack_pool, stack_pool_count * kFiberStack);
    void *p = mmap(nullptr, n * kFiberStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "cuda-harness: cannot map %zu fiber stacks: %s\n", n, strerror(errno));
        abort();
    }
    stack_pool = (char *)p;
    stack_pool_count = n;
    long page = sysconf(_SC_PAGESIZE);
    free_stacks.clear();
    for (size_t i = n; i-- > 0;) {
        mprotect(stack_pool + i * kFiberStack, (size_t)page, PROT_NONE); // overflow guard
        free_stacks.push_back(stack_pool + i * kFiberStack);
    }
}

const char *phase_name(const thread_state &t) {
    static const char *names[] = { "__shfl_idx_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
                                   "__all_sync",      "__any_sync",     "__ballot_sync",    "__syncwarp",
                                   "mma.sync.m16n8k16.bf16" };
    switch (t.phase) {
    case NOT_STARTED: return "not started";
    case RUNNABLE: return "running";
    case AT_BARRIER: return "__syncthreads";
    case AT_COLLECTIVE: return names[t.kind];
    case EXITED: return "exit";
    }
    return "?";
}

void where(char *buf, size_t cap, const thread_state &t) {
    if (t.phase == EXITED)
        snprintf(buf, cap, "thread (%u,%u,%u) has exited", t.idx.x, t.idx.y, t.idx.z);
    else
        snprintf(buf, cap, "thread (%u,%u,%u) waits at %s (%s:%d)", t.idx.x, t.idx.y, t.idx.z, phase_name(t), t.file,
                 t.line);
}

void block_fault(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void block_fault(const char *fmt, ...) {
    char buf[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fail(cudaErrorLaunchFailure, true, "kernel %s (launched at %s:%d) block (%u,%u,%u): %s", running->name,
         running->file, running->line, block_idx.x, block_idx.y, block_idx.z, buf);
    block_failed = true;
}

EMT_SCHEDULER_HOT bool same_file(const char *a, const char *b) { return a == b || !strcmp(a, b); }

// A warp's mma.m16n8k16 (BF16 in, FP32 accumulate): the lanes' fragments
// gathered into A, B and C by PTX's layout (cuda/cuda_launch.h), the
// product as mma_bf16_m16n8k16_reference, D scattered back the same way.
inline float bf16_lo(uint32_t r) { return from_bits<float>((uint64_t)(r << 16)); }
inline float bf16_hi(uint32_t r) { return from_bits<float>((uint64_t)(r & 0xffff0000u)); }
EMT_SCHEDULER_HOT void complete_mma(thread_state *w) {
    float A[16][16], B[16][8], C[16][8], D[16][8];
    for (unsigned l = 0; l < 32; l++) {
        const mma_fragments &f = *(const mma_fragments *)(uintptr_t)w[l].value;
        const unsigned g = l / 4, t = l % 4;
        for (int i = 0; i < 4; i++) { // a[i]: rows g (i even) or g+8 (i odd), columns 2t(+8 for i >= 2)
            const unsigned row = g + 8 * (i & 1), col = 2 * t + 8 * (i >> 1);
            A[row][col] = bf16_lo(f.a[i]);
            A[row][col + 1] = bf16_hi(f.a[i]);
        }
        for (int i = 0; i < 2; i++) {
            B[2 * t + 8 * i][g] = bf16_lo(f.b[i]);
            B[2 * t + 8 * i + 1][g] = bf16_hi(f.b[i]);
        }
        for (int i = 0; i < 4; i++) C[g + 8 * (i >> 1)][2 * t + (i & 1)] = f.c[i];
    }
    mma_bf16_m16n8k16_reference(A, B, C, D);
    memstats_mma();
    for (unsigned l = 0; l < 32; l++) {
        mma_fragments &f = *(mma_fragments *)(uintptr_t)w[l].value;
        const unsigned g = l / 4, t = l % 4;
        for (int i = 0; i < 4; i++) f.d[i] = D[g + 8 * (i >> 1)][2 * t + (i & 1)];
    }
}

// Completes the collective that lane `first` waits at, once every lane of its
// mask is there; false when they are not all there yet.
EMT_SCHEDULER_HOT bool complete_collective(thread_state *w, unsigned n_lanes, unsigned first) {
    thread_state &a = w[first];
    unsigned mask = a.mask;
    char buf[256];
    for (unsigned l = 0; l < 32; l++) {
        if (!(mask >> l & 1)) continue;
        if (l >= n_lanes) {
            block_fault("%s at %s:%d: mask 0x%08x names lane %u, which this block does not have", phase_name(a), a.file,
                        a.line, mask, l);
            return false;
        }
        thread_state &b = w[l];
        if (b.phase == RUNNABLE || b.phase == NOT_STARTED) return false; // still on its way
        if (b.phase != AT_COLLECTIVE || b.kind != a.kind || b.line != a.line || !same_file(b.file, a.file) ||
            b.mask != mask) {
            where(buf, sizeof buf, b);
            block_fault("partial warp: lane %u is at %s (%s:%d) with mask 0x%08x, but lane %u of that mask: %s",
                        first, phase_name(a), a.file, a.line, mask, l, buf);
            return false;
        }
    }
    if (a.kind == MMA_BF16_M16N8K16) {
        if (mask != 0xffffffffu) {
            block_fault("%s at %s:%d: mask 0x%08x: mma.sync.aligned needs the whole warp", phase_name(a), a.file, a.line,
                        mask);
            return false;
        }
        complete_mma(w);
        for (unsigned l = 0; l < 32; l++) w[l].phase = RUNNABLE;
        return true;
    }
    uint64_t ballot = 0;
    for (unsigned l = 0; l < 32; l++)
        if (mask >> l & 1) ballot |= (uint64_t)(w[l].value != 0) << l;
    for (unsigned l = 0; l < 32; l++) {
        if (!(mask >> l & 1)) continue;
        thread_state &b = w[l];
        int width = b.width;
        unsigned base = l & ~(unsigned)(width - 1), src = l;
        switch (b.kind) {
        case SHFL_IDX: src = base + ((unsigned)b.arg & (unsigned)(width - 1)); break;
        case SHFL_UP: src = (int)(l - base) >= b.arg ? l - (unsigned)b.arg : l; break;
        case SHFL_DOWN: src = l - base + (unsigned)b.arg < (unsigned)width ? l + (unsigned)b.arg : l; break;
        case SHFL_XOR: src = ((l ^ (unsigned)b.arg) & ~base) < (unsigned)width ? l ^ (unsigned)b.arg : l; break;
        default: break;
        }
        if (b.kind <= SHFL_XOR) {
            if (!(mask >> src & 1)) {
                block_fault("%s at %s:%d: lane %u reads lane %u, which is not in mask 0x%08x (undefined value)",
                            phase_name(b), b.file, b.line, l, src, mask);
                return false;
            }
            b.result = w[src].value;
        } else if (b.kind == VOTE_ALL) {
            b.result = (ballot & mask) == mask;
        } else if (b.kind == VOTE_ANY) {
            b.result = ballot != 0;
        } else {
            b.result = ballot;
        }
    }
    for (unsigned l = 0; l < 32; l++)
        if (mask >> l & 1) w[l].phase = RUNNABLE;
    return true;
}

// Runs the lanes of one warp until each is at __syncthreads or has exited.
void run_warp(thread_state *w, unsigned n_lanes) {
    for (;;) {
        for (unsigned l = 0; l < n_lanes && !block_failed; l++)
            if (w[l].phase == RUNNABLE || w[l].phase == NOT_STARTED) resume(&w[l]);
        if (block_failed) return;
        bool progressed = false, waiting = false;
        for (unsigned l = 0; l < n_lanes && !block_failed; l++) {
            if (w[l].phase != AT_COLLECTIVE) continue;
            waiting = true;
            if (complete_collective(w, n_lanes, l)) progressed = true;
        }
        if (block_failed || !waiting) return;
        if (!progressed) {
            // every lane has stopped and no collective can complete
            char buf[256];
            for (unsigned l = 0; l < n_lanes; l++) {
                if (w[l].phase != AT_COLLECTIVE) continue;
                for (unsigned m = 0; m < 32; m++) {
                    if (!(w[l].mask >> m & 1) || m >= n_lanes || w[m].phase == AT_COLLECTIVE) continue;
                    where(buf, sizeof buf, w[m]);
                    block_fault("partial warp: lane %u waits at %s (%s:%d) with mask 0x%08x, but lane %u: %s", l,
                                phase_name(w[l]), w[l].file, w[l].line, w[l].mask, m, buf);
                    return;
                }
            }
            block_fault("warp collectives that cannot complete");
            return;
        }
    }
}

// What run_warp and run_block would do next once fiber t has stopped, done
// here on t's stack: a fiber switch to the scheduler and back per collective
// or barrier (and its scans) is most of the harness's time otherwise. The
// order is the scheduler's: the next lane of the warp; else the warp's
// collectives complete and its first runnable lane goes on; else (the warp
// is at the barrier or has exited) the next warp; else the barrier
// completes and thread 0 goes on. Anything else (a fault, a deadlock, a
// divergent barrier, the end of the block) goes back to the scheduler, which
// finds the state unchanged and diagnoses it as before.
EMT_SCHEDULER_HOT thread_state *next_after_stop(thread_state *t) {
    thread_state *next = next_in_warp(t);
    if (next || block_failed) return next;
    unsigned first = t->warp * 32, n_lanes = block_threads - first < 32 ? block_threads - first : 32;
    thread_state *w = &block_base[first];
    for (unsigned l = 0; l < n_lanes; l++) // (lanes before t: not in the scheduler's order; safe anyway)
        if (w[l].phase == RUNNABLE || w[l].phase == NOT_STARTED) return &w[l];
    bool waiting = false, progressed = false;
    for (unsigned l = 0; l < n_lanes; l++) {
        if (w[l].phase != AT_COLLECTIVE) continue;
        waiting = true;
        if (complete_collective(w, n_lanes, l)) progressed = true;
        if (block_failed) return nullptr;
    }
    if (progressed) {
        for (unsigned l = 0; l < n_lanes; l++)
            if (w[l].phase == RUNNABLE) return &w[l];
    }
    if (waiting) return nullptr; // collectives that cannot complete: the scheduler reports them
    // the warp is at the barrier or has exited: the later warps' turn
    for (unsigned i = first + n_lanes; i < block_threads; i++)
        if (block_base[i].phase == RUNNABLE || block_base[i].phase == NOT_STARTED) return &block_base[i];
    // every warp is done: the barrier, when every thread waits at the same one
    const thread_state *at = &block_base[0];
    for (unsigned i = 0; i < block_threads; i++) {
        const thread_state &u = block_base[i];
        if (u.phase != AT_BARRIER || u.line != at->line || !same_file(u.file, at->file)) return nullptr;
    }
    for (unsigned i = 0; i < block_threads; i++) block_base[i].phase = RUNNABLE;
    return &block_base[0];
}

void run_block(unsigned n) {
    block_threads = n;
    block_base = threads.data();
    for (unsigned i = 0; i < n; i++) {
        thread_state &t = threads[i];
        t.idx = uint3{ i % block_dim.x, i / block_dim.x % block_dim.y, i / (block_dim.x * block_dim.y) };
        t.lane = i % 32;
        t.warp = i / 32;
        t.phase = NOT_STARTED;
        t.file = "";
        t.line = 0;
    }
    for (;;) {
        for (unsigned w = 0; w * 32 < n && !block_failed; w++)
            run_warp(&threads[w * 32], n - w * 32 < 32 ? n - w * 32 : 32);
        if (block_failed) return;
        const thread_state *at = nullptr, *gone = nullptr, *other = nullptr;
        for (unsigned i = 0; i < n; i++) {
            const thread_state &t = threads[i];
            if (t.phase == EXITED) {
                if (!gone) gone = &t;
            } else if (!at) {
                at = &t;
            } else if (!other && (t.line != at->line || !same_file(t.file, at->file))) {
                other = &t;
            }
        }
        if (!at) return; // all exited
        char a[256], b[256];
        if (gone || other) {
            where(a, sizeof a, *at);
            where(b, sizeof b, gone ? *gone : *other);
            block_fault("divergent __syncthreads: %s, but %s", a, b);
            return;
        }
        for (unsigned i = 0; i < n; i++) threads[i].phase = RUNNABLE;
    }
}

// A failed block abandons its fibers: their stacks go back to the pool, and
// their frames' ASan poison is cleared.
void clean_stacks(void) {
#ifdef EMT_ASAN
    if (stack_pool) ASAN_UNPOISON_MEMORY_REGION(stack_pool, stack_pool_count * kFiberStack);
#endif
    stack_to_release = nullptr;
    free_stacks.clear();
    for (size_t i = stack_pool_count; i-- > 0;) free_stacks.push_back(stack_pool + i * kFiberStack);
}

void execute(const kernel_call &k) {
    unsigned n = k.block.x * k.block.y * k.block.z;
#ifdef EMT_ASAN
    // the stack the scheduler runs on, for ASan's fiber switches back to it:
    // looked up once per host thread (for the main thread glibc reads
    // /proc/self/maps, which cost more than many a launch)
    static thread_local pthread_t stack_of = 0;
    static thread_local bool stack_known = false;
    if (!stack_known || !pthread_equal(stack_of, pthread_self())) {
        pthread_attr_t attr;
        if (!pthread_getattr_np(pthread_self(), &attr)) {
            void *bottom = nullptr;
            pthread_attr_getstack(&attr, &bottom, &scheduler_stack_size);
            scheduler_stack_bottom = bottom;
            pthread_attr_destroy(&attr);
            stack_of = pthread_self();
            stack_known = true;
        }
    }
#endif
    ensure_stacks(n);
    if (threads.size() < n) threads.resize(n);
    running = &k;
    grid_dim = uint3{ k.grid.x, k.grid.y, k.grid.z };
    block_dim = uint3{ k.block.x, k.block.y, k.block.z };
    block_failed = false;
    memstats_launch_begin(k);
    dynamic_shared_mem = (char *)malloc(k.shared_bytes ? k.shared_bytes : 1);
    for (unsigned z = 0; z < k.grid.z && !block_failed; z++)
        for (unsigned y = 0; y < k.grid.y && !block_failed; y++)
            for (unsigned x = 0; x < k.grid.x && !block_failed; x++) {
                block_idx = uint3{ x, y, z };
                // shared memory starts undefined: NaN floats, -1 integers
                memset(dynamic_shared_mem, 0xff, k.shared_bytes);
                memstats_block_begin(n);
                run_block(n);
                memstats_block_end();
            }
    memstats_launch_end(block_failed);
    if (block_failed) clean_stacks();
    free(dynamic_shared_mem);
    dynamic_shared_mem = nullptr;
    running = nullptr;
}

} // namespace

// --------------------------------------------------------- device-side API
namespace emt_harness {

void current_lane_warp(unsigned *lane, unsigned *warp, unsigned *thread) {
    thread_state *t = current;
    if (!t) kernel_fault("a counted memory access outside a kernel");
    *lane = t->lane;
    *warp = t->warp;
    *thread = (unsigned)(t - threads.data());
}
bool memstats_is_device(const void *p, size_t bytes) { return is_device(p, bytes); }

void mma_bf16_m16n8k16_reference(const float A[16][16], const float B[16][8], const float C[16][8], float D[16][8]) {
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 8; n++) {
            double sum = C[m][n];
            for (int k = 0; k < 16; k++) sum += (double)A[m][k] * B[k][n];
            D[m][n] = (float)sum;
        }
}

void *dynamic_shared(void) {
    if (!running) kernel_fault("dynamic shared memory used outside a kernel");
    return dynamic_shared_mem;
}

EMT_SCHEDULER_HOT uint64_t warp_collective(collective_kind kind, unsigned mask, uint64_t value, int arg, int width, const char *file,
                         int line) {
    thread_state *t = current;
    if (!t) kernel_fault("warp collective called outside a kernel (%s:%d)", file, line);
    if (!(mask >> t->lane & 1))
        kernel_fault("thread (%u,%u,%u) calls a warp collective at %s:%d with mask 0x%08x, which excludes its lane %u",
                     t->idx.x, t->idx.y, t->idx.z, file, line, mask, t->lane);
    if (width <= 0 || width > 32 || (width & (width - 1)))
        kernel_fault("shuffle at %s:%d: width %d is not a power of two in 1..32", file, line, width);
    t->phase = AT_COLLECTIVE;
    t->kind = kind;
    t->mask = mask;
    t->value = value;
    t->arg = arg;
    t->width = width;
    t->file = file;
    t->line = line;
    yield(t, false);
    return t->result;
}

EMT_SCHEDULER_HOT void syncthreads(const char *file, int line) {
    thread_state *t = current;
    if (!t) kernel_fault("__syncthreads called outside a kernel (%s:%d)", file, line);
    t->phase = AT_BARRIER;
    t->file = file;
    t->line = line;
    yield(t, false);
}

void kernel_fault(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    thread_state *t = current;
    if (!t) {
        fprintf(stderr, "cuda-harness: %s\n", buf);
        abort();
    }
    block_fault("%s", buf);
    t->phase = EXITED;
    yield(t, true);
    abort();
}

void check_pointer_arg(const char *kernel, const char *file, int line, int index, const void *p) {
    std::lock_guard<std::recursive_mutex> g(api_lock);
    if (!p || is_device(p, 0)) return;
    fail(cudaErrorIllegalAddress, true,
         "kernel %s (launched at %s:%d): argument %d is %s pointer %p, not live device memory from cudaMalloc", kernel, file,
         line, index, is_pinned(p, 0) ? "a pinned host" : "a host (or freed)", p);
}

void enqueue_launch(kernel_call &&call, cudaStream_t stream) {
    std::lock_guard<std::recursive_mutex> g(api_lock);
    const dim3 &b = call.block, &gr = call.grid;
    unsigned long long n = (unsigned long long)b.x * b.y * b.z;
    size_t shared_limit = kSharedPerBlock;
    auto opt = shared_optin.find(call.kernel);
    if (opt != shared_optin.end()) shared_limit = opt->second;
    const char *bad = nullptr;
    char why[256];
    if (!valid_stream(stream)) {
        fail(cudaErrorInvalidResourceHandle, false, "kernel %s (%s:%d): invalid stream %p", call.name, call.file,
             call.line, (void *)stream);
        return;
    }
    if (!b.x || !b.y || !b.z || b.x > kMaxBlockX || b.y > kMaxBlockY || b.z > kMaxBlockZ || n > kMaxThreadsPerBlock)
        bad = "block", snprintf(why, sizeof why, "block (%u,%u,%u): each dim >= 1, x,y <= 1024, z <= 64, x*y*z <= 1024",
                                b.x, b.y, b.z);
    else if (!gr.x || !gr.y || !gr.z || gr.x > kMaxGridX || gr.y > kMaxGridYZ || gr.z > kMaxGridYZ)
        bad = "grid", snprintf(why, sizeof why, "grid (%u,%u,%u): each dim >= 1, x <= 2^31-1, y,z <= 65535", gr.x,
                               gr.y, gr.z);
    else if (call.shared_bytes > shared_limit)
        bad = "shared memory", snprintf(why, sizeof why, "%zu bytes of dynamic shared memory > %zu%s",
                                        call.shared_bytes, shared_limit,
                                        opt == shared_optin.end() ? " (opt in with cudaFuncSetAttribute)" : "");
    if (bad) {
        fail(cudaErrorInvalidConfiguration, false, "kernel %s (launched at %s:%d): invalid %s: %s", call.name,
             call.file, call.line, bad, why);
        return;
    }
    if (sticky_error) return;
    auto k = std::make_shared<kernel_call>(std::move(call));
    enqueue(stream, [k]() { execute(*k); });
}

const char *last_diagnostic(void) { return diagnostic.c_str(); }

bool is_device_range(const void *p, size_t bytes) {
    std::lock_guard<std::recursive_mutex> g(api_lock);
    return is_device(p, bytes);
}

void enqueue_host_work(cudaStream_t stream, std::function<void()> work) {
    std::lock_guard<std::recursive_mutex> g(api_lock);
    if (!sticky_error) enqueue(stream, std::move(work));
}

void report(const char *fmt, ...) {
    char buf[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    std::lock_guard<std::recursive_mutex> g(api_lock);
    fail(cudaErrorLaunchFailure, true, "%s", buf);
}

void reset(void) {
    std::lock_guard<std::recursive_mutex> g(api_lock);
    legacy_stream.queue.clear();
    for (stream_state *s : streams) s->queue.clear();
    for (auto &a : device_allocs) free((void *)a.first);
    for (auto &a : pinned_allocs) free((void *)a.first);
    device_allocs.clear();
    pinned_allocs.clear();
    shared_optin.clear();
    sticky_error = last_error = cudaSuccess;
    diagnostic.clear();
}

} // namespace emt_harness

// ------------------------------------------------------------ host runtime
#define LOCK std::lock_guard<std::recursive_mutex> lock_(api_lock)

cudaError_t cudaGetDeviceCount(int *count) {
    *count = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
    LOCK;
    if (device != 0) return fail(cudaErrorInvalidDevice, false, "cudaSetDevice(%d): the harness has device 0", device);
    current_device = device;
    return ret(cudaSuccess);
}
cudaError_t cudaGetDevice(int *device) {
    *device = current_device;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device) {
    if (device != 0) return cudaErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "EntMTP CUDA harness (CPU)");
    p->totalGlobalMem = (size_t)16 << 30;
    p->sharedMemPerBlock = kSharedPerBlock;
    p->sharedMemPerBlockOptin = kSharedPerBlockOptin;
    p->warpSize = 32;
    p->maxThreadsPerBlock = (int)kMaxThreadsPerBlock;
    p->maxThreadsDim[0] = (int)kMaxBlockX;
    p->maxThreadsDim[1] = (int)kMaxBlockY;
    p->maxThreadsDim[2] = (int)kMaxBlockZ;
    p->maxGridSize[0] = (int)kMaxGridX;
    p->maxGridSize[1] = p->maxGridSize[2] = (int)kMaxGridYZ;
    p->multiProcessorCount = 1;
    p->major = 8;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
    LOCK;
    for (stream_state *x : streams)
        if (x->capture) return invalidate_capture(x, "cudaDeviceSynchronize");
    flush_all();
    return ret(cudaSuccess);
}
cudaError_t cudaGetLastError(void) {
    LOCK;
    cudaError_t e = sticky_error ? sticky_error : last_error;
    last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) {
    LOCK;
    return sticky_error ? sticky_error : last_error;
}
const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorIllegalInstruction: return "cudaErrorIllegalInstruction";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    }
    return "cudaErrorUnknown";
}
const char *cudaGetErrorString(cudaError_t e) {
    // the harness's diagnostic says which kernel, block, thread and line
    if (e != cudaSuccess && !diagnostic.empty()) return diagnostic.c_str();
    return cudaGetErrorName(e);
}

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
    LOCK;
    *ptr = nullptr;
    if (sticky_error) return sticky_error;
    void *p = nullptr;
    // exact size, so ASan's redzone starts at the first byte past the end
    if (posix_memalign(&p, 256, bytes ? bytes : 1)) return cudaErrorMemoryAllocation;
    memset(p, 0xa5, bytes); // device memory starts undefined
    device_allocs[(uintptr_t)p] = bytes ? bytes : 1;
    *ptr = p;
    return cudaSuccess;
}
cudaError_t cudaFree(void *ptr) {
    LOCK;
    if (!ptr) return ret(cudaSuccess);
    flush_all(); // cudaFree synchronises the device
    auto it = device_allocs.find((uintptr_t)ptr);
    if (it == device_allocs.end())
        return fail(cudaErrorInvalidValue, false, "cudaFree(%p): not the start of a device allocation", ptr);
    device_allocs.erase(it);
    free(ptr);
    return ret(cudaSuccess);
}
cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned int flags) {
    LOCK;
    (void)flags;
    *ptr = malloc(bytes ? bytes : 1);
    if (!*ptr) return cudaErrorMemoryAllocation;
    pinned_allocs[(uintptr_t)*ptr] = bytes ? bytes : 1;
    return ret(cudaSuccess);
}
cudaError_t cudaMallocHost(void **ptr, size_t bytes) { return cudaHostAlloc(ptr, bytes, 0); }
cudaError_t cudaFreeHost(void *ptr) {
    LOCK;
    if (!ptr) return ret(cudaSuccess);
    flush_all();
    auto it = pinned_allocs.find((uintptr_t)ptr);
    if (it == pinned_allocs.end())
        return fail(cudaErrorInvalidValue, false, "cudaFreeHost(%p): not from cudaMallocHost", ptr);
    pinned_allocs.erase(it);
    free(ptr);
    return ret(cudaSuccess);
}

namespace {
// Checks a copy's direction against where its pointers live.
cudaError_t check_copy(const char *fn, void *dst, const void *src, size_t bytes, cudaMemcpyKind *kind) {
    bool dd = is_device(dst, bytes), sd = is_device(src, bytes);
    if (*kind == cudaMemcpyDefault) *kind = (cudaMemcpyKind)((sd ? 2 : 0) + (dd ? 1 : 0));
    bool want_dd = *kind == cudaMemcpyHostToDevice || *kind == cudaMemcpyDeviceToDevice;
    bool want_sd = *kind == cudaMemcpyDeviceToHost || *kind == cudaMemcpyDeviceToDevice;
    if (dd != want_dd || sd != want_sd)
        return fail(cudaErrorInvalidValue, false,
                    "%s(dst %p, src %p, %zu bytes, %s): %s is %s memory (or the range leaves its allocation)", fn, dst,
                    src, bytes, *kind == 1 ? "HostToDevice" : *kind == 2 ? "DeviceToHost" : *kind == 3 ? "DeviceToDevice" : "HostToHost",
                    dd != want_dd ? "dst" : "src", (dd != want_dd ? dd : sd) ? "device" : "host");
    return cudaSuccess;
}
} // namespace

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    LOCK;
    if (sticky_error) return sticky_error;
    if (!bytes) return cudaSuccess;
    if (cudaError_t e = check_copy("cudaMemcpy", dst, src, bytes, &kind)) return e;
    flush_all(); // synchronous: after all prior work, and the host waits
    memmove(dst, src, bytes);
    return ret(cudaSuccess);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
    LOCK;
    if (sticky_error) return sticky_error;
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, false, "cudaMemcpyAsync: invalid stream");
    if (!bytes) return cudaSuccess;
    if (cudaError_t e = check_copy("cudaMemcpyAsync", dst, src, bytes, &kind)) return e;
    if (capturing(stream) && ((kind == cudaMemcpyHostToDevice && !is_pinned(src, bytes)) ||
                              (kind == cudaMemcpyDeviceToHost && !is_pinned(dst, bytes))))
        return invalidate_capture(resolve(stream), "cudaMemcpyAsync with pageable host memory");
    if (kind == cudaMemcpyHostToDevice && !is_pinned(src, bytes)) {
        // pageable source: CUDA stages it before returning
        auto copy = std::make_shared<std::vector<char>>((const char *)src, (const char *)src + bytes);
        enqueue(stream, [dst, copy]() { memcpy(dst, copy->data(), copy->size()); });
    } else if (kind == cudaMemcpyDeviceToHost && !is_pinned(dst, bytes)) {
        // pageable destination: the call returns once the copy is done
        flush(queue_of(stream));
        if (!sticky_error) memcpy(dst, src, bytes);
    } else {
        // pinned host memory is read or written when the copy runs: a host
        // change before the stream reaches it shows, as it would on a GPU
        enqueue(stream, [dst, src, bytes]() { memmove(dst, src, bytes); });
    }
    return ret(cudaSuccess);
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t stream) {
    LOCK;
    if (sticky_error) return sticky_error;
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, false, "cudaMemsetAsync: invalid stream");
    if (!bytes) return cudaSuccess;
    if (!is_device(dst, bytes))
        return fail(cudaErrorInvalidValue, false, "cudaMemset(%p, %zu bytes): not inside a device allocation", dst,
                    bytes);
    enqueue(stream, [dst, value, bytes]() { memset(dst, value, bytes); });
    return ret(cudaSuccess);
}
// asynchronous with respect to the host, on the legacy default stream
cudaError_t cudaMemset(void *dst, int value, size_t bytes) { return cudaMemsetAsync(dst, value, bytes, 0); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
    LOCK;
    stream_state *s = new stream_state{ {}, (flags & cudaStreamNonBlocking) != 0 };
    streams.push_back(s);
    *stream = (cudaStream_t)s;
    return ret(cudaSuccess);
}
cudaError_t cudaStreamCreate(cudaStream_t *stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    LOCK;
    for (size_t i = 0; i < streams.size(); i++)
        if (streams[i] == (stream_state *)stream) {
            flush(streams[i]); // pending work still completes
            delete streams[i];
            streams.erase(streams.begin() + (long)i);
            return ret(cudaSuccess);
        }
    return fail(cudaErrorInvalidResourceHandle, false, "cudaStreamDestroy(%p): not a stream", (void *)stream);
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    LOCK;
    if (!valid_stream(stream))
        return fail(cudaErrorInvalidResourceHandle, false, "cudaStreamSynchronize(%p): not a stream", (void *)stream);
    if (capturing(stream)) return invalidate_capture(resolve(stream), "cudaStreamSynchronize");
    flush(queue_of(stream));
    return ret(cudaSuccess);
}
cudaError_t cudaStreamQuery(cudaStream_t stream) {
    LOCK;
    if (!valid_stream(stream)) return cudaErrorInvalidResourceHandle;
    if (capturing(stream)) return invalidate_capture(resolve(stream), "cudaStreamQuery");
    return ret(queue_of(stream)->queue.empty() ? cudaSuccess : cudaErrorNotReady);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
    (void)flags;
    *event = (cudaEvent_t) new event_state();
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t event) {
    LOCK;
    // a recorded event still pending is completed by its stream: flush first
    event_state *e = (event_state *)event;
    if (e->recorded && !e->completed) flush(e->stream);
    delete e;
    return ret(cudaSuccess);
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    LOCK;
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, false, "cudaEventRecord: invalid stream");
    if (capturing(stream)) return invalidate_capture(resolve(stream), "cudaEventRecord (events in graphs are not modelled)");
    event_state *e = (event_state *)event;
    e->stream = queue_of(stream);
    e->recorded = true;
    e->completed = false;
    e->stream->queue.push_back(op{ [e]() {
        e->completed = true;
        e->done_at = ops_executed;
    } });
    return ret(cudaSuccess);
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    LOCK;
    event_state *e = (event_state *)event;
    if (e->recorded && !e->completed) flush(e->stream);
    return ret(cudaSuccess);
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
    LOCK;
    event_state *e = (event_state *)event;
    return ret(!e->recorded || e->completed ? cudaSuccess : cudaErrorNotReady);
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    LOCK;
    (void)flags;
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, false, "cudaStreamWaitEvent: invalid stream");
    if (capturing(stream)) return invalidate_capture(resolve(stream), "cudaStreamWaitEvent (events in graphs are not modelled)");
    event_state *e = (event_state *)event;
    if (!e->recorded) return ret(cudaSuccess);
    stream_state *src = e->stream;
    enqueue(stream, [e, src]() {
        if (!e->completed) flush(src);
    });
    return ret(cudaSuccess);
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    LOCK;
    event_state *a = (event_state *)start, *b = (event_state *)end;
    if (!a->completed || !b->completed) return ret(cudaErrorNotReady);
    *ms = (float)(b->done_at - a->done_at);
    return ret(cudaSuccess);
}

// ------------------------------------------------------------------ graphs
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
    LOCK;
    (void)mode;
    if (!stream || !valid_stream(stream))
        return fail(cudaErrorStreamCaptureUnsupported, false, "cudaStreamBeginCapture(%p): not a created stream",
                    (void *)stream);
    stream_state *st = resolve(stream);
    if (!st->nonblocking)
        return fail(cudaErrorStreamCaptureUnsupported, false,
                    "cudaStreamBeginCapture: the harness captures non-blocking streams only");
    if (st->capture) return fail(cudaErrorInvalidValue, false, "cudaStreamBeginCapture: already capturing");
    st->capture = new graph_state();
    st->capture_invalid = false;
    return ret(cudaSuccess);
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
    LOCK;
    if (!valid_stream(stream) || !resolve(stream)->capture)
        return fail(cudaErrorInvalidValue, false, "cudaStreamEndCapture(%p): the stream is not capturing", (void *)stream);
    stream_state *st = resolve(stream);
    graph_state *g = st->capture;
    st->capture = nullptr;
    if (st->capture_invalid) {
        delete g;
        *graph = nullptr;
        return fail(cudaErrorStreamCaptureInvalidated, false, "cudaStreamEndCapture: the capture was invalidated");
    }
    *graph = (cudaGraph_t)g;
    return ret(cudaSuccess);
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status) {
    LOCK;
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle, false, "cudaStreamIsCapturing: invalid stream");
    stream_state *st = resolve(stream);
    *status = !st->capture ? cudaStreamCaptureStatusNone
                           : st->capture_invalid ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    return ret(cudaSuccess);
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
    LOCK;
    (void)flags;
    if (!graph) return fail(cudaErrorInvalidValue, false, "cudaGraphInstantiate: no graph");
    *exec = (cudaGraphExec_t) new graph_state(*(graph_state *)graph); // a snapshot, as CUDA's
    return ret(cudaSuccess);
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    LOCK;
    if (sticky_error) return sticky_error;
    if (!exec || !valid_stream(stream)) return fail(cudaErrorInvalidValue, false, "cudaGraphLaunch: bad graph or stream");
    for (const op &o : ((graph_state *)exec)->ops) enqueue(stream, o.run);
    return ret(cudaSuccess);
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    delete (graph_state *)exec;
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    delete (graph_state *)graph;
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *kernel, cudaFuncAttribute attr, int value) {
    LOCK;
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || (size_t)value > kSharedPerBlockOptin)
        return fail(cudaErrorInvalidValue, false, "cudaFuncSetAttribute(%d, %d): over the %zu-byte opt-in limit",
                    (int)attr, value, kSharedPerBlockOptin);
    shared_optin[kernel] = (size_t)value;
    return ret(cudaSuccess);
}
