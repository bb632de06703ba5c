#!/usr/bin/env python3
"""The EAGLE-3 trainer's forward (tools/train_heads/eagle3.py, the
training-time test's unrolled steps and mask) against the independent numpy
drafter of tests/python/eagle3_reference.py, which test_eagle3_reference
checks against EntMTP: for a row t of a held-out conversation, drafting
step k of the trainer (its own hidden state fed back, the diagonal mask)
must give the draft-vocabulary distribution of the reference's chain
drafted from root t with the same tokens.

usage: check_eagle3_trainer.py MODEL DRAFTER_DIR SHARD_DIR   (an F32 drafter)
"""
import glob
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "train_heads"))
from eagle3_reference import Drafter  # noqa: E402
import eagle3  # noqa: E402


def main():
    model_path, drafter_dir, shard_dir = sys.argv[1:4]
    cfg, embed, lm_head, final_norm = eagle3.target_parts(model_path)
    dcfg = json.load(open(os.path.join(drafter_dir, "config.json")))
    cfg.update({k: dcfg[k] for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                                     "num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta")})
    from safetensors.torch import load_file
    w = load_file(os.path.join(drafter_dir, "model.safetensors"))
    draft = torch.arange(w["d2t"].numel()) + w["d2t"]
    model = eagle3.Eagle3(cfg, draft, embed, lm_head, final_norm)
    model.load_state_dict({k: v.float() for k, v in w.items() if k not in ("d2t", "t2d")}, strict=True)
    ds = eagle3.Conversations(shard_dir)
    i = max(range(len(ds.items)), key=lambda j: ds.items[j]["seq"].numel())
    it = ds.items[i]
    S, P, ttt = it["seq"].tolist(), it["P"], 3
    t = min(P + 2, len(S) - ttt - 2)
    with torch.no_grad():
        batch = eagle3.collate(ds, [i], ttt)
        outs = model.unroll(batch, ttt)
        mine = [torch.softmax(model.logits(x[0, t]).double(), -1).numpy() for x in outs]

    ref = Drafter(drafter_dir, embed.numpy())
    fused = it["taps"][:t + 1].float().numpy() @ ref.W["fc.weight"].T
    out, probs = ref.layer(fused, S[1:t + 2], list(range(t + 1)), 0)
    h, worst = out[-1:], 0.0
    for d in range(ttt):
        if d > 0:
            h, probs = ref.layer(h, [S[t + 1 + d]], [t + d], t + d)
        diff = float(np.abs(probs[-1] - mine[d]).max())
        worst = max(worst, diff)
        print(f"row {t} of a {len(S)}-token conversation, step {d + 1}: max |p_trainer - p_reference| = {diff:.2e}, "
              f"top-1 {int(np.argmax(mine[d]))} vs {int(np.argmax(probs[-1]))}")
    sys.exit(0 if worst < 1e-4 else 1)


if __name__ == "__main__":
    main()
