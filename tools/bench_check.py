"""Benchmark row (not a test): `adapt(block, check=True)` at full width, time and peak memory, streamed check against the old one.

    OMP_NUM_THREADS=2 .venv/bin/python tools/bench_check.py                  # full width: Llama-3-8B attention and MLP, Qwen3-MoE d = 1024
    OMP_NUM_THREADS=2 .venv/bin/python tools/bench_check.py --old            # also the old check (HEAD's pde.py) where it fits
    .venv/bin/python tools/bench_check.py --blocks mlp --widths small        # the narrower blocks the old check fits
    OMP_NUM_THREADS=2 .venv/bin/python tools/bench_check.py --census llama-3-8b  # the census row: from the config alone, then with
                                                                              # every stated block built at its own sizes and checked

Each block is built in float64 from its transformers config (no download), put at a generic point (`init_generic`) and read
by `adapt(block, check=True)`: the forward check, `check_laws` at full width, and past `COUNT_MAX_D` the count on a small twin.
Peak memory is the process's resident high-water mark (VmHWM) over that call alone: /proc/self/clear_refs resets it to the
current resident size before each call, so it includes the block's own weights and `adapt`'s float64 copy of them.
The old check is HEAD's `conslaw_nb/engine/count.py` loaded beside the new one, swapped into `adapters.check_laws` for its row; a row
whose old check would pass `--max-gb` (its n_dirs·D float64 gradients alone, 8 of them) is skipped and says so."""
import argparse, importlib, io, os, resource, subprocess, sys, tarfile, tempfile, time
from pathlib import Path
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import conslaw_nb.hf.adapters as ad
import conslaw_nb.engine.count as pde

def hwm_gb()->float:
    for l in open('/proc/self/status'):
        if l.startswith('VmHWM'): return int(l.split()[1]) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20

def rss_gb()->float:
    for l in open('/proc/self/status'):
        if l.startswith('VmRSS'): return int(l.split()[1]) / 2**20

def reset_hwm():
    try: open('/proc/self/clear_refs', 'w').write('5')
    except OSError: pass

def old_pde():
    """HEAD's engine/count.py: HEAD's whole package, extracted beside this one as `conslaw_nb_head` (its relative imports resolve
    inside it, so HEAD's pde reads HEAD's rows, solvers and checks, whatever their names are now)"""
    tmp = Path(tempfile.mkdtemp())
    tar = subprocess.run(['git', 'archive', 'HEAD', 'conslaw_nb'], cwd=ROOT, capture_output=True, check=True).stdout
    tarfile.open(fileobj=io.BytesIO(tar)).extractall(tmp); (tmp/'conslaw_nb').rename(tmp/'conslaw_nb_head')
    sys.path.insert(0, str(tmp))
    return importlib.import_module('conslaw_nb_head.engine.count')

def blocks(widths):
    import transformers as tf
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaMLP
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock
    full = widths == 'full'
    ll = tf.LlamaConfig(hidden_size=4096 if full else 1024, num_attention_heads=32 if full else 8, num_key_value_heads=8 if full else 2,
                        head_dim=128, intermediate_size=14336 if full else 3584)
    qm = tf.Qwen3MoeConfig(hidden_size=1024 if full else 256, num_attention_heads=16, num_key_value_heads=4, head_dim=128,
                           moe_intermediate_size=768 if full else 192, num_experts=8, num_experts_per_tok=2)
    return {'attention': (f"LlamaAttention d {ll.hidden_size}, {ll.num_attention_heads} heads, {ll.num_key_value_heads} kv heads, head_dim 128",
                          lambda: LlamaAttention(ll, 0)),
            'mlp': (f"LlamaMLP d {ll.hidden_size}, d_ff {ll.intermediate_size}", lambda: LlamaMLP(ll)),
            'moe': (f"Qwen3MoeSparseMoeBlock d {qm.hidden_size}, 8 experts of d_ff {qm.moe_intermediate_size}, top-2",
                    lambda: Qwen3MoeSparseMoeBlock(qm))}

def run(make, check_laws):
    torch.set_default_dtype(torch.float64)
    m = make().eval(); ad.init_generic(m); torch.set_default_dtype(torch.float32)
    D = sum(p.numel() for p in m.parameters())
    ad.check_laws = check_laws; ad.COUNTED.clear()          # each row counts its twin itself
    try:
        reset_hwm(); base = rss_gb(); t = time.perf_counter()
        a = ad.adapt(m, check=True)
        dt, peak = time.perf_counter() - t, hwm_gb()
    finally: ad.check_laws = pde.check_laws
    del a, m
    return D, dt, peak, base

if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--blocks', default='attention,mlp,moe')
    ap.add_argument('--widths', default='full', choices=('full', 'small'))
    ap.add_argument('--old', action='store_true', help="also HEAD's check, where it fits --max-gb")
    ap.add_argument('--max-gb', type=float, default=9.)
    ap.add_argument('--census', default=None, metavar='NAME', help='a published config: time and peak of census(NAME), then census(NAME, check=True)')
    a = ap.parse_args()
    if a.census:
        import warnings; warnings.simplefilter('ignore')
        from conslaw_nb.survey.published import census, published
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
        import conslaw_nb.survey.published as CE
        cache = tempfile.mkdtemp()
        for what, check in (('formulas computed (first census of the family)', False), ('formulas read from the cache', False),
                            ('with every stated block checked at its own sizes', True)):
            if what.startswith('formulas read'): CE.FORMULAS.clear()           # a new process: only the cache file remains
            reset_hwm(); base = rss_gb(); t = time.perf_counter()
            c = census(published()[a.census], name=a.census, check=check, cache=cache)
            dt, peak = time.perf_counter() - t, hwm_gb()
            print(f"census {a.census}, {what}: {dt:.1f} s, peak {peak:.2f} GB (at start {base:.2f} GB)")
            for r in c.rows: print(f"  {r.block} ({r.cls}): {r.n_laws} laws; {r.check or 'not checked'}")
        sys.exit(0)
    old = old_pde() if a.old else None
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    print(f"{'block':72s} {'check':6s} {'D':>11s} {'seconds':>8s} {'peak GB':>8s} {'at start':>8s} {'weights':>8s}")
    for name in a.blocks.split(','):
        what, make = blocks(a.widths)[name]
        paths = [('new', pde.check_laws)] + ([('old', old.check_laws)] if old else [])
        for tag, cl in paths:
            if tag == 'old':
                D = sum(p.numel() for p in make().parameters())
                need = 8*8*D*2/2**30 + 3*8*D/2**30                     # its 8 gradients and their batched copy, beside 3 copies of θ
                if need > a.max_gb:
                    print(f"{what:72s} {tag:6s} {D:11,d} {'skipped':>8s}: needs about {need:.1f} GB (8·D float64 gradients twice + θ), over --max-gb {a.max_gb:g}")
                    continue
            D, dt, peak, base = run(make, cl)
            print(f"{what:72s} {tag:6s} {D:11,d} {dt:8.1f} {peak:8.2f} {base:8.2f} {8*D/2**30:8.2f}", flush=True)
