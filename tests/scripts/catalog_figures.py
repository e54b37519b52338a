#!/usr/bin/python3
"""How the numbers in resources/catalog.json were obtained, as a program.

Given a catalog entry's hyperparameters (the model's config.json values,
written into the entry), this lists the model's weight tensors by
architecture, with shapes in GGUF order (ne[0] innermost), and sorts each
into the planner's tensor groups:

  embd_output     token embeddings, output projection, final norm
  attention       attention projections and every per-layer norm
  router          expert routers (gate_inp, correction bias, shared gate)
  shared_experts  shared experts, leading dense FFN layers, latent MoE
                  projections (always-active FFN weights)
  routed_experts  the routed experts

From those it gives the parameter counts per group, total and active
(active = all but the routed experts, plus n_expert_used/n_expert of them),
and the tensor-data bytes of a standard llama-quantize mixture (BF16, Q8_0,
Q6_K, Q4_K_M, Q4_0: output.weight Q6_K, Q4_K_M's Q6_K upgrades of attn_v and
ffn_down on the use_more_bits layers, Q8_0 attn_k/attn_v and Q5_K
attn_output for 8-expert models, Q5_0/Q8_0 fallbacks for rows that are not
whole 256-blocks; 1-D tensors, norms and routers F32). A downloaded file adds
its metadata (vocabulary) to that; third-party files ("UD-", imatrix) may mix
types differently, which is why such sizes carry size_estimated in the
catalog.

  catalog_figures.py                  print every entry's figures
  catalog_figures.py resources/catalog.json --check
                                      exit 1 if an entry's stored counts
                                      differ from the computed ones

Imported by tests/scripts/test_catalog.py.
"""
import json
import sys

GROUPS = ("embd_output", "attention", "router", "shared_experts", "routed_experts")

# ggml block formats: (elements per block, bytes per block)
BLOCK = {
    "f32": (1, 4), "f16": (1, 2), "bf16": (1, 2),
    "q8_0": (32, 34), "q4_0": (32, 18), "q5_0": (32, 22), "q5_1": (32, 24),
    "q4_k": (256, 144), "q5_k": (256, 176), "q6_k": (256, 210),
    "mxfp4": (32, 17),
}
FALLBACK = {"q4_k": "q5_0", "q5_k": "q5_1", "q6_k": "q8_0"}


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def tensors(m):
    """Yields (gguf-like name, shape with ne[0] first, group) for entry m."""
    a = m["architecture"]
    E, V, L = m["n_embd"], m["n_vocab"], m["n_layer"]
    yield "token_embd.weight", [E, V], "embd_output"
    yield "output_norm.weight", [E], "embd_output"
    if not m.get("tied_embeddings", False):
        yield "output.weight", [E, V], "embd_output"
    if a == "kimi-k3":
        yield "output_attn_res_norm.weight", [E], "embd_output"
        yield "output_attn_res_proj.weight", [E, 1], "embd_output"
    n_dense = m.get("n_layer_dense_lead", 0)
    for i in range(L):
        p = f"blk.{i}."
        yield from attention(m, i, p)
        if i < n_dense:
            F = m["n_ff_dense"]
            yield p + "ffn_gate.weight", [E, F], "shared_experts"
            yield p + "ffn_up.weight", [E, F], "shared_experts"
            yield p + "ffn_down.weight", [F, E], "shared_experts"
        else:
            yield from moe_ffn(m, p)


def attention(m, i, p):
    a, E = m["architecture"], m["n_embd"]
    yield p + "attn_norm.weight", [E], "attention"
    yield p + "ffn_norm.weight", [E], "attention"
    if a in ("deepseek2",) or (a == "kimi-k3" and i in m["mla_layers"]):
        H, r, R = m["n_head"], m["kv_lora_rank"], m["qk_rope_head_dim"]
        nope, dv, qr = m["qk_nope_head_dim"], m["v_head_dim"], m.get("q_lora_rank", 0)
        qd = H * (nope + R)
        if qr:
            yield p + "attn_q_a.weight", [E, qr], "attention"
            yield p + "attn_q_a_norm.weight", [qr], "attention"
            yield p + "attn_q_b.weight", [qr, qd], "attention"
        else:
            yield p + "attn_q.weight", [E, qd], "attention"
        yield p + "attn_kv_a_mqa.weight", [E, r + R], "attention"
        yield p + "attn_kv_a_norm.weight", [r], "attention"
        yield p + "attn_kv_b.weight", [r, H * (nope + dv)], "attention"
        if a == "kimi-k3":
            yield p + "attn_gate.weight", [E, H * dv], "attention"
        yield p + "attn_output.weight", [H * dv, E], "attention"
    elif a == "kimi-k3":
        # Kimi Delta Attention (linear attention) layer, shapes of the
        # published checkpoint (q/k/v projections with short convolutions,
        # low-rank forget gate, beta, output gate and norm).
        H, D = m["linear_attn"]["n_head"], m["linear_attn"]["head_dim"]
        HD = H * D
        for t in ("q", "k", "v"):
            yield p + f"ssm_{t}.weight", [E, HD], "attention"
            yield p + f"ssm_conv1d_{t}.weight", [4, HD], "attention"
        yield p + "ssm_f_a.weight", [E, D], "attention"
        yield p + "ssm_f_b.weight", [D, HD], "attention"
        yield p + "ssm_a.weight", [D], "attention"
        yield p + "ssm_dt.bias", [HD], "attention"
        yield p + "ssm_beta.weight", [E, H], "attention"
        yield p + "attn_gate.weight", [E, HD], "attention"
        yield p + "ssm_norm.weight", [D], "attention"
        yield p + "attn_output.weight", [HD, E], "attention"
    else:
        H, Hkv, D = m["n_head"], m["n_head_kv"], m["head_dim"]
        yield p + "attn_q.weight", [E, H * D], "attention"
        yield p + "attn_k.weight", [E, Hkv * D], "attention"
        yield p + "attn_v.weight", [E, Hkv * D], "attention"
        yield p + "attn_output.weight", [H * D, E], "attention"
        if m.get("attn_bias", False):
            yield p + "attn_q.bias", [H * D], "attention"
            yield p + "attn_k.bias", [Hkv * D], "attention"
            yield p + "attn_v.bias", [Hkv * D], "attention"
        if a == "gpt-oss":
            yield p + "attn_output.bias", [E], "attention"
            yield p + "attn_sinks.weight", [H], "attention"
        if a == "qwen3moe":
            yield p + "attn_q_norm.weight", [D], "attention"
            yield p + "attn_k_norm.weight", [D], "attention"
        if a == "olmoe":
            yield p + "attn_q_norm.weight", [H * D], "attention"
            yield p + "attn_k_norm.weight", [Hkv * D], "attention"
    if a == "kimi-k3":
        # attention residuals: a norm and a 1-row projection per sub-layer
        for t in ("attn_res_norm", "mlp_res_norm"):
            yield p + t + ".weight", [E], "attention"
        for t in ("attn_res_proj", "mlp_res_proj"):
            yield p + t + ".weight", [E, 1], "attention"


def moe_ffn(m, p):
    a, E, X, F = m["architecture"], m["n_embd"], m["n_expert"], m["n_ff_expert"]
    yield p + "ffn_gate_inp.weight", [E, X], "router"
    if m.get("expert_bias", False):
        yield p + "exp_probs_b.bias", [X], "router"
    if a == "gpt-oss":
        yield p + "ffn_gate_inp.bias", [X], "router"
    # latent MoE (Kimi K3): experts work in a smaller space, entered and left
    # through two dense projections every token uses
    Ein = m.get("n_embd_expert", E)
    if Ein != E:
        yield p + "ffn_latent_up.weight", [E, Ein], "shared_experts"
        yield p + "ffn_latent_down.weight", [Ein, E], "shared_experts"
        yield p + "ffn_latent_norm.weight", [Ein], "attention"
    yield p + "ffn_gate_exps.weight", [Ein, F, X], "routed_experts"
    yield p + "ffn_up_exps.weight", [Ein, F, X], "routed_experts"
    yield p + "ffn_down_exps.weight", [F, Ein, X], "routed_experts"
    if a == "gpt-oss":
        for t in ("gate", "up"):
            yield p + f"ffn_{t}_exps.bias", [F, X], "routed_experts"
        yield p + "ffn_down_exps.bias", [Ein, X], "routed_experts"
    S = m.get("n_ff_shared", 0)
    if S:
        yield p + "ffn_gate_shexp.weight", [E, S], "shared_experts"
        yield p + "ffn_up_shexp.weight", [E, S], "shared_experts"
        yield p + "ffn_down_shexp.weight", [S, E], "shared_experts"
        if a == "qwen2moe":
            yield p + "ffn_gate_inp_shexp.weight", [E], "router"


def group_params(m):
    g = dict.fromkeys(GROUPS, 0)
    for _, shape, group in tensors(m):
        g[group] += numel(shape)
    return g


def totals(m):
    g = group_params(m)
    total = sum(g.values())
    active = total - g["routed_experts"] + g["routed_experts"] * m["n_expert_used"] // m["n_expert"]
    return g, total, active


def _use_more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _quantizable(name, shape):
    dims = len([d for d in shape[1:] if d > 1]) + 1
    return (dims >= 2 and name.endswith("weight") and "_norm" not in name
            and "ffn_gate_inp" not in name and "conv1d" not in name and "res_proj" not in name)


def mixture_bytes(m, ftype):
    """Tensor-data bytes of the model quantised to ftype (bf16, q8_0, q6_k,
    q4_k_m, q4_0) by llama-quantize's rules; also per group."""
    ts = list(tensors(m))
    n_attn_v = sum(1 for n, _, _ in ts if "attn_v.weight" in n or "attn_kv_b.weight" in n)
    n_ffn_down = sum(1 for n, _, _ in ts if "ffn_down" in n)
    eight = m["n_expert"] == 8
    i_attn_v = 0
    base = {"q4_k_m": "q4_k"}.get(ftype, ftype)
    out = dict.fromkeys(GROUPS, 0)
    for name, shape, group in ts:
        t = "f32"
        if _quantizable(name, shape):
            t = base
            if ftype in ("bf16", "f16"):
                pass
            elif name == "output.weight":
                t = "q8_0" if ftype == "q8_0" else "q6_k"
            elif ftype == "q4_k_m":
                if "attn_v.weight" in name or "attn_kv_b.weight" in name:
                    if _use_more_bits(i_attn_v, n_attn_v):
                        t = "q6_k"
                    if eight:
                        t = "q8_0"
                elif "attn_k.weight" in name and eight:
                    t = "q8_0"
                elif "attn_output.weight" in name and eight:
                    t = "q5_k"
                elif "ffn_down" in name:
                    layer = int(name.split(".")[1])
                    n = n_ffn_down if m["n_expert"] > 1 else m["n_layer"]
                    if _use_more_bits(layer, n):
                        t = "q6_k"
            if "attn_v.weight" in name or "attn_kv_b.weight" in name:
                i_attn_v += 1
            if shape[0] % BLOCK[t][0]:
                t = FALLBACK.get(t, t)
                if shape[0] % BLOCK[t][0]:
                    t = "f16"
        el, by = BLOCK[t]
        out[group] += numel(shape) // el * by
    return out


def main(argv):
    if len(argv) >= 2:
        with open(argv[1], encoding="utf-8") as f:
            cat = json.load(f)
        entries = cat["models"]
    else:
        print("usage: catalog_figures.py resources/catalog.json [--check]", file=sys.stderr)
        return 2
    bad = 0
    for e in entries:
        m = dict(e["hparams"], architecture=e["architecture"])
        g, total, active = totals(m)
        if "--check" in argv:
            stored = e["params"]
            for k in GROUPS:
                if stored["groups"][k] != g[k]:
                    print(f"{e['id']}: params.groups.{k} {stored['groups'][k]} != computed {g[k]}")
                    bad += 1
            if stored["total"] != total or stored["active"] != active:
                print(f"{e['id']}: total/active {stored['total']}/{stored['active']} != {total}/{active}")
                bad += 1
            continue
        print(e["id"], json.dumps({"total": total, "active": active, "groups": g}))
        for ft in ("bf16", "q8_0", "q6_k", "q4_k_m", "q4_0"):
            b = mixture_bytes(m, ft)
            print(f"   {ft:7s} {sum(b.values()):>16,d}  {b}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
