"""The found-law path (`adapt_found`: the engine's count, `find_laws`, the check) on one attention block of GPT-2, BERT and
OLMo2 at d = 8, 12, 16, and the null-space search inside it against its reference in the same process: every round decided
again on all rows (restrict=False, one C x C SVD a round) versus intersecting the decided null space with the new rows'.
Usage: python tools/bench_found.py [--widths 8 12 16] [--reference-max-d 12] [--out bench_found.json]"""
import argparse, json, time, warnings
import torch
from conslaw_nb.engine.core import as_functional
from conslaw_nb.hf.adapters import capture_calls
from conslaw_nb.discovery.found import tiny_transformer, transformer_blocks, adapt_found
from conslaw_nb.discovery.lawsearch import Ansatz, law_nullspace

CONFIGS = {'gpt2': lambda d: dict(n_embd=d, n_head=2), 'bert': lambda d: dict(hidden_size=d, num_attention_heads=2),
           'olmo2': lambda d: dict(hidden_size=d, num_attention_heads=2, num_key_value_heads=2)}

def attention_block(fam, d):
    "The first attention block of a one-layer model of `fam` at width d, with the call its model makes"
    m = tiny_transformer(fam, **CONFIGS[fam](d))
    path, kind, blk = next(b for b in transformer_blocks(m)[0] if b[1] == 'attention')
    return blk, capture_calls(m, [path], 4)[path]

def timed(f):
    t = time.perf_counter(); out = f(); return out, time.perf_counter() - t

def row(fam, d, reference:bool):
    blk, call = attention_block(fam, d)
    a, t_found = timed(lambda: adapt_found(blk, 4, 'attention', call))
    fn, P = as_functional(a.f, a.params, torch.float64, None)
    A = Ansatz(P, 'blocks')
    ns, t_new = timed(lambda: law_nullspace(fn, P, A, a.inputs, restrict=True))
    r = dict(family=fam, d=d, D=A.D, C=A.C, counted=a.n_laws, found=a.meta['found'], found_s=round(t_found, 1),
             nullspace_s=round(t_new, 1), n0=len(ns.basis), status=ns.status, gap=float(f'{ns.gap:.2g}'))
    if reference:
        ref, t_ref = timed(lambda: law_nullspace(fn, P, A, a.inputs, restrict=False))
        r |= dict(reference_s=round(t_ref, 1), reference_n0=len(ref.basis), reference_status=ref.status, speedup=round(t_ref/t_new, 1))
    return r

if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('--widths', type=int, nargs='+', default=[8, 12, 16])
    ap.add_argument('--reference-max-d', type=int, default=12); ap.add_argument('--out', default='bench_found.json')
    args = ap.parse_args(); warnings.simplefilter('ignore')
    rows = []
    for d in args.widths:
        for fam in CONFIGS:
            rows.append(row(fam, d, d <= args.reference_max_d)); print(rows[-1], flush=True)
    json.dump(rows, open(args.out, 'w'), indent=1)
