// Memory-efficiency counters of the CUDA harness (memstats.h,
// docs/cuda-harness.md "Memory efficiency").
//
// The harness runs a warp's lanes one after another, not in lockstep, so a
// warp-level request is rebuilt afterwards: the k-th time lane l passes a
// counted access site (file and line of the emt_ld/emt_st call) belongs
// to the same request as the k-th time every other lane of its warp passes
// it (several calls on one line share a site: every lane passes them in the
// same order, so their occurrences still pair up). That is exact for
// converged code (loops with warp-uniform bounds); a lane that skips an
// access and passes the site again pairs its later accesses with the other
// lanes' earlier ones (the counted kernels skip only a loop's last ones),
// unless the kernel names regions with EMT_REQUEST_TAG: a thread's counts
// restart whenever its tag changes, and accesses pair only within one
// (warp, tag), so lanes that skipped work in an earlier region pair up again.
//
// Per request, as Nsight Compute counts them:
//  - global: the 32-byte sectors the lanes' bytes fall in, against the
//    fewest sectors that could hold the distinct bytes requested
//    (ceil(distinct bytes / 32)); efficiency = ideal / touched;
//  - shared: wavefronts, 32 banks of 4 bytes, 4-byte accesses in one phase
//    of 32 lanes, 8-byte in two of 16, 16-byte in four of 8; a phase takes
//    as many wavefronts as its most loaded bank has distinct words (the same
//    word is a broadcast); conflicts = wavefronts - phases.
// Per launch: the distinct sectors the whole launch loads and stores (the
// DRAM traffic with an L2 that keeps the launch's reuse), the distinct
// sectors per block summed over blocks (L2 -> SM traffic with an L1 that
// keeps a block's reuse), the sectors of every request (L1 traffic), and the
// op's ideal bytes as its launch site declares them (EMT_OP).
#include "memstats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace emt_harness {

bool memstats_on = false;

namespace {

struct site_info {
    const char *file;
    int line, col;
    bool store, shared;
    unsigned width;
};
struct site_stats {
    unsigned long long requests = 0, lane_accesses = 0, bytes = 0, distinct_bytes = 0, sectors = 0,
                       ideal_sectors = 0, wavefronts = 0, ideal_wavefronts = 0;
    unsigned width = 0;
};
struct access_rec {
    uint64_t region; // warp << 32 | request tag (EMT_REQUEST_TAG)
    uint64_t key;    // site << 32 | occurrence within the region
    uintptr_t addr;
    uint16_t lane;
    uint8_t bytes;
};

std::vector<site_info> sites;
std::unordered_map<std::string, uint32_t> site_ids;
std::vector<std::vector<uint32_t>> occurrences; // [thread][site], since the thread's last tag change
std::vector<unsigned> thread_tags;              // [thread]
std::vector<access_rec> records;                // of the running block
std::unordered_map<uint32_t, site_stats> launch_sites;
std::unordered_set<uintptr_t> launch_load_sectors, launch_store_sectors;
// the running block's stored sectors, joined to launch_store_sectors at its
// end: a load of a sector an earlier block of the launch stored is an L2 hit
// (the L2 keeps the launch's reuse), not a DRAM load
std::unordered_set<uintptr_t> block_store_sectors;
// the running block's discarded sectors (discard.global.L2): dropped from
// the launch's stores at the block's end (a kernel discards lines it does
// not write again in the launch), and counted
std::unordered_set<uintptr_t> block_discard_sectors;
unsigned long long launch_discarded_sectors = 0;
unsigned long long block_sum_load_sectors = 0;
unsigned long long launch_mmas = 0; // warp-level mma.sync instructions of the counted launch
const kernel_call *counted_launch = nullptr;
FILE *out = nullptr;

uint32_t site_of(const char *file, int line, int col, bool store, bool shared, unsigned width) {
    char key[512];
    snprintf(key, sizeof key, "%s:%d:%d:%d:%d", file, line, col, store, shared);
    auto it = site_ids.find(key);
    if (it != site_ids.end()) return it->second;
    uint32_t id = (uint32_t)sites.size();
    sites.push_back(site_info{ file, line, col, store, shared, width });
    site_ids.emplace(key, id);
    return id;
}

const char *short_file(const char *f) {
    const char *s = strstr(f, "cuda/");
    const char *last = s;
    while (s) {
        last = s;
        s = strstr(s + 1, "cuda/");
    }
    return last ? last : f;
}

void analyse_global(const access_rec *a, size_t n, site_stats &st, bool store,
                    std::unordered_set<uintptr_t> &block_sectors) {
    std::vector<uintptr_t> sec;
    std::vector<std::pair<uintptr_t, uintptr_t>> spans;
    for (size_t i = 0; i < n; i++) {
        st.lane_accesses++;
        st.bytes += a[i].bytes;
        for (uintptr_t s = a[i].addr / 32; s <= (a[i].addr + a[i].bytes - 1) / 32; s++) sec.push_back(s);
        spans.emplace_back(a[i].addr, a[i].addr + a[i].bytes);
    }
    std::sort(sec.begin(), sec.end());
    sec.erase(std::unique(sec.begin(), sec.end()), sec.end());
    std::sort(spans.begin(), spans.end());
    unsigned long long distinct = 0;
    uintptr_t lo = spans[0].first, hi = spans[0].second;
    for (size_t i = 1; i < spans.size(); i++) {
        if (spans[i].first > hi) {
            distinct += hi - lo;
            lo = spans[i].first;
        }
        hi = std::max(hi, spans[i].second);
    }
    distinct += hi - lo;
    st.requests++;
    st.distinct_bytes += distinct;
    st.sectors += sec.size();
    st.ideal_sectors += (distinct + 31) / 32;
    for (uintptr_t s : sec) {
        if (store) {
            block_store_sectors.insert(s);
        } else {
            if (!launch_store_sectors.count(s)) launch_load_sectors.insert(s);
            block_sectors.insert(s);
        }
    }
}

void analyse_shared(const access_rec *a, size_t n, site_stats &st) {
    st.requests++;
    unsigned width = a[0].bytes;
    unsigned lanes_per_phase = width <= 4 ? 32 : width == 8 ? 16 : 8;
    for (unsigned phase = 0; phase < 32 / lanes_per_phase; phase++) {
        std::vector<uintptr_t> words[32];
        bool any = false;
        for (size_t i = 0; i < n; i++) {
            if (a[i].lane / lanes_per_phase != phase) continue;
            any = true;
            for (uintptr_t w = a[i].addr / 4; w <= (a[i].addr + a[i].bytes - 1) / 4; w++) words[w % 32].push_back(w);
        }
        if (!any) continue;
        size_t worst = 1;
        for (auto &b : words) {
            std::sort(b.begin(), b.end());
            worst = std::max(worst, (size_t)(std::unique(b.begin(), b.end()) - b.begin()));
        }
        st.wavefronts += worst;
        st.ideal_wavefronts++;
    }
    for (size_t i = 0; i < n; i++) {
        st.lane_accesses++;
        st.bytes += a[i].bytes;
    }
}

} // namespace

void mem_access(const void *p, unsigned bytes, bool store, const char *file, int line, int col) {
    if (!counted_launch || !bytes) return;
    unsigned lane, warp, thread;
    current_lane_warp(&lane, &warp, &thread);
    const bool shared = !memstats_is_device(p, bytes);
    uint32_t site = site_of(file, line, col, store, shared, bytes);
    std::vector<uint32_t> &occ = occurrences[thread];
    if (occ.size() <= site) occ.resize(sites.size(), 0);
    uint32_t k = occ[site]++;
    records.push_back(access_rec{ (uint64_t)warp << 32 | thread_tags[thread], (uint64_t)site << 32 | k, (uintptr_t)p,
                                  (uint16_t)lane, (uint8_t)bytes });
}

void mem_discard(void *p, unsigned bytes) {
    if ((uintptr_t)p % bytes) kernel_fault("discard.global.L2 of %p: not aligned to its %u-byte line", p, bytes);
    if (!memstats_is_device(p, bytes)) kernel_fault("discard.global.L2 of %p: not global memory", p);
    if (!counted_launch) return;
    for (uintptr_t s = (uintptr_t)p / 32; s < ((uintptr_t)p + bytes) / 32; s++) block_discard_sectors.insert(s);
}

// A new region: the thread's occurrence counts restart, so that its next
// accesses pair with the other lanes' first ones in the same region.
void mem_request_tag(unsigned tag) {
    if (!counted_launch) return;
    unsigned lane, warp, thread;
    current_lane_warp(&lane, &warp, &thread);
    if (thread_tags[thread] == tag) return;
    thread_tags[thread] = tag;
    std::fill(occurrences[thread].begin(), occurrences[thread].end(), 0);
}

void memstats_launch_begin(const kernel_call &k) {
    const char *path = getenv("EMT_CUDA_HARNESS_MEMSTATS");
    memstats_on = path && *path;
    if (!memstats_on) return;
    if (!out) {
        out = fopen(path, "a");
        if (!out) {
            fprintf(stderr, "cuda-harness: EMT_CUDA_HARNESS_MEMSTATS=%s: cannot open: %s\n", path, strerror(errno));
            memstats_on = false;
            return;
        }
    }
    counted_launch = &k;
    launch_sites.clear();
    launch_load_sectors.clear();
    launch_store_sectors.clear();
    block_store_sectors.clear();
    block_discard_sectors.clear();
    launch_discarded_sectors = 0;
    block_sum_load_sectors = 0;
    launch_mmas = 0;
}

void memstats_mma(void) {
    if (counted_launch) launch_mmas++;
}

void memstats_block_begin(unsigned n_threads) {
    if (!counted_launch) return;
    if (occurrences.size() < n_threads) occurrences.resize(n_threads);
    thread_tags.assign(n_threads, 0);
    for (unsigned i = 0; i < n_threads; i++) std::fill(occurrences[i].begin(), occurrences[i].end(), 0);
    records.clear();
}

void memstats_block_end(void) {
    if (!counted_launch) return;
    std::sort(records.begin(), records.end(), [](const access_rec &a, const access_rec &b) {
        return a.region != b.region ? a.region < b.region : a.key != b.key ? a.key < b.key : a.lane < b.lane;
    });
    std::unordered_set<uintptr_t> block_sectors;
    for (size_t i = 0; i < records.size();) {
        size_t j = i;
        while (j < records.size() && records[j].region == records[i].region && records[j].key == records[i].key) j++;
        uint32_t site = (uint32_t)(records[i].key >> 32);
        site_stats &st = launch_sites[site];
        st.width = std::max(st.width, (unsigned)records[i].bytes);
        if (sites[site].shared)
            analyse_shared(&records[i], j - i, st);
        else
            analyse_global(&records[i], j - i, st, sites[site].store, block_sectors);
        i = j;
    }
    block_sum_load_sectors += block_sectors.size();
    launch_store_sectors.insert(block_store_sectors.begin(), block_store_sectors.end());
    block_store_sectors.clear();
    for (uintptr_t s : block_discard_sectors) launch_discarded_sectors += launch_store_sectors.erase(s);
    block_discard_sectors.clear();
    records.clear();
}

void memstats_launch_end(bool failed) {
    if (!counted_launch) return;
    const kernel_call &k = *counted_launch;
    counted_launch = nullptr;
    memstats_on = false;
    if (failed) return;
    unsigned long long l1_load = 0, l1_store = 0;
    for (auto &s : launch_sites)
        if (!sites[s.first].shared) (sites[s.first].store ? l1_store : l1_load) += s.second.sectors * 32;
    fprintf(out,
            "{\"kernel\": \"%s\", \"op\": \"%s\", \"rows\": %lld, \"n_in\": %lld, \"n_out\": %lld, "
            "\"launched_at\": \"%s:%d\", \"grid\": [%u, %u, %u], "
            "\"block\": [%u, %u, %u], \"ideal_bytes\": %.0f, \"dram_load_bytes\": %zu, \"dram_store_bytes\": %zu, "
            "\"dram_discarded_bytes\": %llu, \"l2_load_bytes\": %llu, \"l1_load_bytes\": %llu, \"l1_store_bytes\": %llu, "
            "\"mma\": %llu, \"accesses\": [",
            k.name, k.op ? k.op : "", k.shape[0], k.shape[1], k.shape[2], short_file(k.file), k.line, k.grid.x, k.grid.y, k.grid.z, k.block.x, k.block.y,
            k.block.z, k.ideal_bytes, launch_load_sectors.size() * 32, launch_store_sectors.size() * 32,
            launch_discarded_sectors * 32, block_sum_load_sectors * 32, l1_load, l1_store, launch_mmas);
    std::vector<uint32_t> order;
    for (auto &s : launch_sites) order.push_back(s.first);
    std::sort(order.begin(), order.end(), [](uint32_t a, uint32_t b) {
        return sites[a].line != sites[b].line ? sites[a].line < sites[b].line : sites[a].col < sites[b].col;
    });
    bool first = true;
    for (uint32_t id : order) {
        const site_info &si = sites[id];
        const site_stats &st = launch_sites[id];
        fprintf(out,
                "%s{\"site\": \"%s:%d:%d\", \"space\": \"%s\", \"dir\": \"%s\", \"width\": %u, \"requests\": %llu, "
                "\"lane_accesses\": %llu, \"bytes\": %llu, \"distinct_bytes\": %llu, \"sectors\": %llu, "
                "\"ideal_sectors\": %llu, \"wavefronts\": %llu, \"ideal_wavefronts\": %llu}",
                first ? "" : ", ", short_file(si.file), si.line, si.col, si.shared ? "shared" : "global",
                si.store ? "store" : "load", st.width, st.requests, st.lane_accesses, st.bytes, st.distinct_bytes,
                st.sectors, st.ideal_sectors, st.wavefronts, st.ideal_wavefronts);
        first = false;
    }
    fprintf(out, "]}\n");
    fflush(out);
}

} // namespace emt_harness
