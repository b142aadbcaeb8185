"""Laws carried from twins to the width people train: `law_blocks` on a one-layer model at a published config's sizes, whose
blocks have no stated theory (Phi-3-mini: fused qkv_proj and gate_up_proj; BERT-base: post-LayerNorm attention with biases).
Prints per block the carried count, the formula the census fits on twins (`census`), the full-width law check, the time to
carry (twins found, counted and fitted) and to check, and the peak RSS. A benchmark row, not a timed test.
Usage: python tools/bench_carry.py [--config phi-3-mini] [--out bench_carry.json]"""
import argparse, json, resource, time, warnings
import torch
from conslaw_nb.discovery.found import tiny_transformer, law_blocks, CARRIED
from conslaw_nb.survey.published import published, census

def rss_gb(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/2**20

def run(name:str)->list:
    cfg = json.loads(published()[name].read_text())
    keep = {k: v for k, v in cfg.items() if k not in ('architectures', 'torch_dtype', 'transformers_version', 'auto_map', '_name_or_path',
                                                      'model_type', 'vocab_size', 'num_hidden_layers', 'n_layer')}
    t0 = time.perf_counter(); model = tiny_transformer(cfg['model_type'], **keep); t_build = time.perf_counter() - t0
    c = census(cfg)
    t0 = time.perf_counter(); B = law_blocks(model, count_max_D=2048); t_read = time.perf_counter() - t0
    rows = []
    for p, a in B:
        D = sum(v.numel() for v in a.params.values())
        cr = next((r for r in c.rows if r.block.lower().startswith('attention' if a.family == 'attention' else 'mlp')), None)
        rows.append(dict(config=name, block=p, theory=a.meta.get('theory'), D=D, carried=a.n_laws, census=getattr(cr, 'n_laws', None),
                         census_formula=str(getattr(getattr(cr, 'law', None), 'formula', '')), laws_max_rel=a.checks.get('laws'),
                         laws=a.meta.get('laws')))
    for r in rows: r |= dict(build_s=round(t_build, 1), law_blocks_s=round(t_read, 1), peak_rss_gb=round(rss_gb(), 2))
    return rows + [dict(skipped=B.skipped)] if B.skipped else rows

if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('--config', nargs='+', default=['phi-3-mini'])
    ap.add_argument('--out', default='bench_carry.json')
    args = ap.parse_args(); warnings.simplefilter('ignore')
    out = [r for n in args.config for r in run(n)]
    for r in out: print(r)
    json.dump(out, open(args.out, 'w'), indent=1, default=str)
