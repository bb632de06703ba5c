/* Which form a step takes (host path, device step, lengths in device
 * memory) and the next root's uniform: the predicates every stage reads,
 * kept apart from step.c so that the stages never call back into the file
 * that runs them. */
#include "engine/session_internal.h"

/* Tree search's probes score every node on the host (node_flags.c). */
int emt_step_on_device(const entmtp_session *S, const emt_step *st) { return S->device_step && !st->probe; }

int emt_step_dyn(const entmtp_session *S, const emt_step *st) {
    return S->dyn_step && st->nodes_on_device && emt_step_on_device(S, st);
}

int emt_root_on_device(const entmtp_session *S) {
    return S->device_step && (S->p.temperature <= 0 || S->device_sample);
}

uint64_t emt_root_uniform(entmtp_session *S) {
    if (!S->root_u_drawn) {
        S->root_u53 = emt_rng_u53(&S->rng);
        S->root_u_drawn = 1;
    }
    return S->root_u53;
}

void emt_root_taken(entmtp_session *S) { S->root_u_drawn = 0; }

/* u53's low and high words, as sample_root reads them */
void emt_uniform_words(uint64_t u53, int32_t *w) {
    w[0] = (int32_t)(uint32_t)(u53 & 0xffffffffu);
    w[1] = (int32_t)(uint32_t)(u53 >> 32);
}

/* the next root is a sample drawn on the device (its uniform goes with the step's inputs) */
int emt_root_sampled_on_device(const entmtp_session *S) { return S->p.temperature > 0 && emt_root_on_device(S); }

void emt_root_uniform_write(entmtp_session *S) {
    if (!emt_root_sampled_on_device(S)) return;
    int32_t w[2];
    emt_uniform_words(emt_root_uniform(S), w);
    S->model->be->ops->write_i32(S->ex, S->rec_dev + S->w_len + 2, w, 2);
}
