"""Overhead of `ConservationMonitor` at scale (issues 41 and 50): a ~100M-parameter transformers causal LM, float32, random init.
By default three fresh processes, one structure-check cache folder: (0) the build alone with the cache empty (cold: the
structures are checked and their twins counted); (1) a monitor built at initialization (zero biases, laws at 0), and (2) one
built after `--warmup` steps, each with the cache filled. In each process: (a) the one-time cost of building the monitor (time, peak and retained RSS, what the build spent its time in,
how often the engine counted and checked blocks); (b) the median time of a training step (forward + backward + optimizer
step) without the monitor and with `monitor.update()` at `every`, interleaved A/B/B/A to cancel drift, and the monitor's
cost as a fraction of a step with its spread; (c) the memory the monitor holds (RSS, and the tensors reachable from it
that are not the model's or the optimizer's) and what one update allocates for the moment; then a cProfile of one update.
A measurement, not a test: it never fails on a missed target (≤ 2 % of a step, ≤ 1 GB), it says by how much it missed.

Usage: python tools/bench_monitor.py [--arch gpt2|llama|llama-1b] [--layers N] [--batch 4] [--seq 128] [--pairs 8]
                                     [--optimizer adamw|sgd] [--every 1] [--threads 1] [--out bench_monitor.json]
       python tools/bench_monitor.py --arch llama-1b --build-only     (the build of a 1.1B-parameter model, cold then warm)
"""
import argparse, os, sys

ARCHS = {  # ~100M parameters at 12 layers, float32; and a 1.1B one for the build alone
    'gpt2': "GPT-2 small: n_embd 768, 12 heads, vocab 50257, n_positions 1024 (124M at 12 layers; GELU MLP)",
    'llama': "Llama-shaped: hidden 768, 12 heads (MHA), SwiGLU 2048, vocab 32000, tied embeddings (110M at 12 layers)",
    'llama-1b': "TinyLlama-1.1B-shaped: hidden 2048, 22 layers, 32 heads, 4 key/value heads, SwiGLU 5632, vocab 32000 (1.1B)"}

def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--arch', default='gpt2', choices=list(ARCHS), help='model shape (default %(default)s)')
    ap.add_argument('--layers', type=int, default=None, help='transformer layers (default: 12, the ~100M model; 22 for llama-1b)')
    ap.add_argument('--batch', type=int, default=4, help='sequences per step (default %(default)s)')
    ap.add_argument('--seq', type=int, default=128, help='tokens per sequence (default %(default)s)')
    ap.add_argument('--pairs', type=int, default=8, help='A/B pairs timed, A = step, B = step + update (default %(default)s)')
    ap.add_argument('--warmup', type=int, default=2, help='untimed steps before the monitor is built (default %(default)s)')
    ap.add_argument('--optimizer', default='adamw', choices=('adamw', 'sgd'), help='AdamW (lr 1e-4, λ 0.01) or SGD (lr 1e-2)')
    ap.add_argument('--every', type=int, default=1, help='the monitor measures every N-th update (default %(default)s)')
    ap.add_argument('--threads', type=int, default=1, help='torch intra-op threads and OMP_NUM_THREADS (default %(default)s)')
    ap.add_argument('--no-profile', action='store_true', help='skip the cProfile of one update')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--out', default='bench_monitor.json', help='JSON results (default %(default)s)')
    ap.add_argument('--build-only', action='store_true', help='time the build alone (cold, then warm), no training steps')
    ap.add_argument('--cache', default=None, help='structure-check cache folder (default: a new temporary folder, empty at start)')
    ap.add_argument('--one', action='store_true', help=argparse.SUPPRESS)   # one measurement in this process (what the driver runs)
    a = ap.parse_args(argv)
    if a.layers is None: a.layers = 22 if a.arch == 'llama-1b' else 12
    for k in ('layers', 'batch', 'seq', 'pairs', 'every', 'threads'):
        if getattr(a, k) < 1: ap.error(f'--{k} must be >= 1')
    if a.seq < 2: ap.error('--seq must be >= 2')
    return a

# ---------------------------------------------------------------- memory
def _status(field:str)->int:
    "A field of /proc/self/status in bytes (VmRSS: resident now; VmHWM: peak resident since the last reset)"
    for line in open('/proc/self/status'):
        if line.startswith(field + ':'): return int(line.split()[1]) * 1024
    return 0

def rss()->int: return _status('VmRSS')

def settle()->int:
    "RSS after a gc and malloc_trim (freed memory handed back to the system), so deltas count what is held"
    import gc, ctypes
    gc.collect()
    try: ctypes.CDLL('libc.so.6').malloc_trim(0)
    except OSError: pass
    return rss()

def reset_peak()->bool:
    "Reset VmHWM to the current RSS (Linux ≥ 4.0: write 5 to /proc/self/clear_refs)"
    try:
        with open('/proc/self/clear_refs', 'w') as f: f.write('5')
        return True
    except OSError: return False

def peak()->int: return _status('VmHWM')

def held_tensors(root, skip:list, exclude_ptrs:set)->dict:
    "Tensor storages reachable from `root` (closures included, module globals not), less `exclude_ptrs`: bytes by dtype"
    import gc, types, torch
    seen, stack, out = {id(o) for o in skip}, [root], {}
    atoms = (type, types.ModuleType, str, bytes, int, float, bool, complex, type(None), types.BuiltinFunctionType, types.CodeType)
    n = 0
    while stack and n < 3_000_000:
        o = stack.pop()
        if id(o) in seen: continue
        seen.add(id(o)); n += 1
        if isinstance(o, torch.Tensor):
            s = o.untyped_storage(); p = s.data_ptr()
            if p and p not in exclude_ptrs: out.setdefault(p, (s.nbytes(), str(o.dtype).replace('torch.', '')))
            continue
        if isinstance(o, atoms): continue
        if isinstance(o, types.FunctionType):      # its closure and defaults; not its module's globals
            stack += [c.cell_contents for c in (o.__closure__ or ()) if c.cell_contents is not None] if _cells_ok(o) else []
            stack += list(o.__defaults__ or ()) + list((o.__kwdefaults__ or {}).values())
            continue
        stack.extend(gc.get_referents(o))
    by = {}
    for nb, dt in out.values(): by[dt] = by.get(dt, 0) + nb
    return dict(bytes=sum(by.values()), by_dtype=by, storages=len(out), objects_walked=n)

def _cells_ok(f)->bool:
    try: [c.cell_contents for c in (f.__closure__ or ())]; return True
    except ValueError: return False   # an empty cell

def deep_size(o, seen=None)->int:
    "sys.getsizeof over containers (the records of the history: dicts of str/float/int/bool)"
    seen = set() if seen is None else seen
    if id(o) in seen: return 0
    seen.add(id(o)); s = sys.getsizeof(o)
    if isinstance(o, dict): s += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in o.items())
    elif isinstance(o, (list, tuple, set)): s += sum(deep_size(v, seen) for v in o)
    return s

# ---------------------------------------------------------------- timing of the library's build steps
class Calls:
    "Wraps named functions in the modules that call them: calls and seconds (outermost calls only), behaviour unchanged"
    def __init__(self): self.n, self.s, self._depth, self._undo = {}, {}, {}, []
    def wrap(self, mods:list, name:str, label:str=None):
        import time, functools
        label = label or name
        orig = next(getattr(m, name) for m in mods if hasattr(m, name))
        self.n[label], self.s[label], self._depth[label] = 0, 0., 0
        @functools.wraps(orig)
        def w(*a, **k):
            self.n[label] += 1; self._depth[label] += 1
            t = time.perf_counter()
            try: return orig(*a, **k)
            finally:
                self._depth[label] -= 1
                if not self._depth[label]: self.s[label] += time.perf_counter() - t
        for m in mods:
            if getattr(m, name, None) is orig: setattr(m, name, w); self._undo.append((m, name, orig))
    def restore(self):
        for m, name, orig in reversed(self._undo): setattr(m, name, orig)
        self._undo = []

# ---------------------------------------------------------------- model and step
def build_model(arch:str, layers:int, seed:int):
    import torch, transformers
    torch.manual_seed(seed)
    if arch == 'gpt2':
        cfg = transformers.GPT2Config(n_embd=768, n_layer=layers, n_head=12, vocab_size=50257, n_positions=1024)
        m = transformers.GPT2LMHeadModel(cfg)
    elif arch == 'llama':
        cfg = transformers.LlamaConfig(hidden_size=768, num_hidden_layers=layers, num_attention_heads=12, num_key_value_heads=12,
                                       intermediate_size=2048, vocab_size=32000, max_position_embeddings=1024, tie_word_embeddings=True)
        m = transformers.LlamaForCausalLM(cfg)
    else:
        cfg = transformers.LlamaConfig(hidden_size=2048, num_hidden_layers=layers, num_attention_heads=32, num_key_value_heads=4,
                                       intermediate_size=5632, vocab_size=32000, max_position_embeddings=2048)
        m = transformers.LlamaForCausalLM(cfg)
    return m.float().train()

def stats(xs:list)->dict:
    import statistics as st
    xs = sorted(xs)
    q = lambda f: xs[min(len(xs) - 1, max(0, round(f * (len(xs) - 1))))]
    return dict(median=st.median(xs), q25=q(.25), q75=q(.75), min=xs[0], max=xs[-1], n=len(xs))

def fmt_b(b:float)->str: return f'{b / 2**20:,.0f} MiB' if abs(b) < 2**30 else f'{b / 2**30:.2f} GiB'

def run(argv=None):
    "One measurement in this process (the driver `main` runs it in fresh processes)"
    a = parse(argv)
    os.environ['OMP_NUM_THREADS'] = str(a.threads); os.environ['MKL_NUM_THREADS'] = str(a.threads)
    import time, json, warnings, platform, cProfile, pstats, io
    import torch, transformers
    torch.set_num_threads(a.threads)
    warnings.filterwarnings('ignore', message='.*torch.jit.script.*')
    import conslaw_nb, conslaw_nb.monitor as mon_mod, conslaw_nb.hf.adapters as ad_mod, conslaw_nb.discovery.found as disc_mod, conslaw_nb.engine.count as pde_mod
    from conslaw_nb.monitor import ConservationMonitor
    res = dict(config=vars(a), arch=ARCHS[a.arch], torch=torch.__version__, transformers=transformers.__version__,
               python=platform.python_version(), cpu_threads=torch.get_num_threads(), nproc=os.cpu_count(),
               loadavg_start=os.getloadavg())
    say = lambda *s: print(*s, flush=True)

    # ---- model, optimizer, warm-up steps (Adam's state allocated before the baseline RSS)
    t = time.perf_counter()
    model = build_model(a.arch, a.layers, a.seed)
    n_par = sum(p.numel() for p in model.parameters())
    opt = (torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01) if a.optimizer == 'adamw'
           else torch.optim.SGD(model.parameters(), lr=1e-2))
    g = torch.Generator().manual_seed(a.seed)
    V = model.config.vocab_size
    batches = [torch.randint(0, V, (a.batch, a.seq), generator=g) for _ in range(4)]
    def step(i):
        ids = batches[i % len(batches)]
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
        return loss.item()
    for i in range(a.warmup): step(i)
    res['model'] = dict(params=n_par, params_M=n_par / 1e6, layers=a.layers, dtype=str(next(model.parameters()).dtype),
                        tokens_per_step=a.batch * a.seq, seconds_to_build_and_warm=time.perf_counter() - t)
    say(f"model: {a.arch}, {a.layers} layers, {n_par / 1e6:.1f}M parameters, float32; {a.optimizer}; "
        f"batch {a.batch} x {a.seq} tokens; {a.threads} thread(s); load average {os.getloadavg()[0]:.2f}")

    # ---- (a) build the monitor: time, peak and retained RSS, where the time went
    calls = Calls()
    calls.wrap([mon_mod], 'law_blocks')
    calls.wrap([ad_mod, disc_mod, pde_mod], 'count_laws')
    calls.wrap([ad_mod, disc_mod, pde_mod], 'check_laws')
    calls.wrap([ad_mod], '_count_check', 'twin_count (_count_check)')
    calls.wrap([ad_mod, disc_mod], 'adapt')
    calls.wrap([disc_mod], 'adapt_found')
    setup_t = {}
    orig_setup = ConservationMonitor._setup
    def timed_setup(self, *args):
        t0 = time.perf_counter(); orig_setup(self, *args); setup_t['s'] = time.perf_counter() - t0
    ConservationMonitor._setup = timed_setup
    counted0 = len(ad_mod.COUNTED)
    rss0 = settle(); ok_peak = reset_peak()
    say(f"building the monitor (every={a.every}) ...")
    t = time.perf_counter()
    with warnings.catch_warnings(record=True) as wl:
        warnings.simplefilter('always')
        monitor = ConservationMonitor(model, every=a.every, optimizer=opt)
    build_s = time.perf_counter() - t
    peak_b = peak() if ok_peak else None
    ConservationMonitor._setup = orig_setup; calls.restore()
    rss1 = settle()
    warns = sorted({str(w.message)[:400] for w in wl if 'jit.script' not in str(w.message)})
    blocks = monitor.blocks
    structs = {(type(m.module).__qualname__, tuple((n, tuple(p.shape)) for n, p in m.params.items())) for _, m in blocks}
    fam = {}
    for (k, b), v in monitor.h0.items(): fam.setdefault(monitor.family[(k, b)], [0, 0]); fam[monitor.family[(k, b)]][0] += 1; fam[monitor.family[(k, b)]][1] += v.numel()
    res['build'] = dict(
        seconds=build_s, read_blocks_seconds=calls.s['law_blocks'], setup_seconds=setup_t.get('s'),
        check_laws=dict(calls=calls.n['check_laws'], seconds=calls.s['check_laws']),
        count_laws=dict(calls=calls.n['count_laws'], seconds=calls.s['count_laws']),
        twin_counts=dict(calls=calls.n['twin_count (_count_check)'], seconds=calls.s['twin_count (_count_check)']),
        adapt_calls=calls.n['adapt'], adapt_found_calls=calls.n['adapt_found'],
        count_cache_entries_added=len(ad_mod.COUNTED) - counted0,
        blocks=len(blocks), block_structures=len(structs), skipped=len(getattr(blocks, 'skipped', []) or []),
        theories=sorted({f"{type(m.module).__name__}: {m.meta.get('theory', 'stated')}, count {m.checks.get('count') if isinstance(m.checks.get('count'), str) else getattr(m.checks.get('count'), 'n_laws', None)}" for _, m in blocks}),
        keys=len(monitor.h0), families={f: dict(keys=k, entries=e) for f, (k, e) in fam.items()},
        rss_before=rss0, peak_rss_delta=None if peak_b is None else peak_b - rss0, retained_rss_delta=rss1 - rss0, warnings=warns)
    b = res['build']
    say(f"  built in {build_s:.1f} s: {len(blocks)} blocks ({len(structs)} structures), {len(monitor.h0)} law/control keys; "
        f"check_laws {b['check_laws']['calls']}x {b['check_laws']['seconds']:.1f} s, count_laws {b['count_laws']['calls']}x "
        f"{b['count_laws']['seconds']:.1f} s; peak RSS +{fmt_b(b['peak_rss_delta'] or 0)}, retained +{fmt_b(b['retained_rss_delta'])}")

    if a.build_only:
        with open(a.out, 'w') as f: json.dump(res, f, indent=1, default=str)
        return res

    # ---- (c) what the monitor holds: tensors reachable from it that are not the model's or the optimizer's
    own = {t_.untyped_storage().data_ptr() for t_ in list(model.parameters()) + list(model.buffers())}
    held = held_tensors(monitor, [model, opt], own)
    h0_b = sum(v.numel() * v.element_size() for d in (monitor.h0, monitor.scale0) for v in d.values())
    params_b = sum(p.numel() * p.element_size() for _, m in blocks for p in m.params.values())
    res['held'] = dict(reachable_tensors=held, h0_and_scale0_bytes=h0_b, block_param_copies_bytes=params_b,
                       block_params=sum(p.numel() for _, m in blocks for p in m.params.values()))
    say(f"  holds {fmt_b(held['bytes'])} of tensors ({', '.join(f'{k} {fmt_b(v)}' for k, v in held['by_dtype'].items())}): "
        f"h0 + scales {fmt_b(h0_b)}, the blocks' float64 parameter copies (Adapted.params) {fmt_b(params_b)}")

    # ---- (b) step without / with update, interleaved A B B A
    monitor.update(); step(0); monitor.update()         # first updates untimed (allocator warm)
    rec = dict(A=[], B=[], upd=[], pairB_over_A=[], upd_over_A=[])
    say(f"timing {a.pairs} A/B pairs (A: step; B: step + update) ...")
    for i in range(a.pairs):
        order = 'AB' if i % 2 == 0 else 'BA'
        tt = {}
        for kind in order:
            t0 = time.perf_counter(); step(i)
            t1 = time.perf_counter()
            if kind == 'B': monitor.update()
            t2 = time.perf_counter()
            tt[kind] = t2 - t0
            if kind == 'B': tt['upd'] = t2 - t1
        rec['A'].append(tt['A']); rec['B'].append(tt['B']); rec['upd'].append(tt['upd'])
        rec['pairB_over_A'].append(tt['B'] / tt['A'] - 1); rec['upd_over_A'].append(tt['upd'] / tt['A'])
        say(f"  pair {i + 1}/{a.pairs} ({order}): A {tt['A']:.3f} s, B {tt['B']:.3f} s, update {tt['upd']:.3f} s "
            f"({100 * tt['upd'] / tt['A']:.2f} % of A)")
    sA, sB, sU = stats(rec['A']), stats(rec['B']), stats(rec['upd'])
    r_direct, r_ab = stats(rec['upd_over_A']), stats(rec['pairB_over_A'])
    res['timing'] = dict(step=sA, step_with_update=sB, update=sU, update_over_step=r_direct, ab_difference_over_step=r_ab,
                         ratio_median_update_over_median_step=sU['median'] / sA['median'], raw=rec,
                         every=a.every, loadavg_end=os.getloadavg())

    # ---- one update's transient memory, and the history's growth
    n_hist = len(monitor.history)
    rss_u = settle(); ok = reset_peak()
    t0 = time.perf_counter(); recs = monitor.update(); tu = time.perf_counter() - t0
    per_step_b = deep_size(recs) if recs else 0
    res['update_memory'] = dict(peak_rss_delta=(peak() - rss_u) if ok else None, seconds=tu,
                                records_per_measured_step=len(recs or []), history_bytes_per_measured_step=per_step_b,
                                history_records=n_hist, held_after_run_rss_delta=settle() - rss0)
    res['held_after_run'] = held_tensors(monitor, [model, opt], own)

    # ---- cProfile of one update
    if not a.no_profile:
        pr = cProfile.Profile(); pr.enable(); monitor.update(); pr.disable()
        s = io.StringIO(); ps = pstats.Stats(pr, stream=s)
        total = sum(v[2] for v in ps.stats.values())
        top = sorted(((v[2], v[3], v[0], f'{os.path.relpath(k[0]) if k[0].startswith("/") else k[0]}:{k[1]}({k[2]})')
                      for k, v in ps.stats.items()), reverse=True)[:15]
        cum = sorted(((v[3], v[2], v[0], f'{os.path.relpath(k[0]) if k[0].startswith("/") else k[0]}:{k[1]}({k[2]})')
                      for k, v in ps.stats.items()), reverse=True)[:20]
        res['profile'] = dict(total_tottime=total, by_tottime=[dict(tottime=t_, cumtime=c, calls=n, fn=f) for t_, c, n, f in top],
                              by_cumtime=[dict(cumtime=c, tottime=t_, calls=n, fn=f) for c, t_, n, f in cum])

    # ---- table
    T = res['timing']; B = res['build']; U = res['update_memory']
    pct = lambda x: f'{100 * x:.2f} %'
    rows = [
        ('model', f"{a.arch} {a.layers} layers, {n_par / 1e6:.1f}M params, float32, {a.optimizer}, {a.batch}x{a.seq} tokens, {a.threads} thread(s)"),
        ('blocks monitored', f"{B['blocks']} ({B['block_structures']} structures, {B['skipped']} skipped), {B['keys']} law/control keys"),
        ('build: time', f"{B['seconds']:.1f} s (law_blocks {B['read_blocks_seconds']:.1f} s, of it check_laws {B['check_laws']['calls']}x "
                        f"{B['check_laws']['seconds']:.1f} s; count_laws {B['count_laws']['calls']}x {B['count_laws']['seconds']:.1f} s; "
                        f"_setup {B['setup_seconds'] or 0:.1f} s)"),
        ('build: peak RSS', '+' + fmt_b(B['peak_rss_delta']) if B['peak_rss_delta'] is not None else 'n/a'),
        ('build: retained RSS', f"+{fmt_b(B['retained_rss_delta'])}  (target ≤ 1 GiB)"),
        ('held tensors', f"{fmt_b(held['bytes'])}: h0+scales {fmt_b(h0_b)}, block float64 copies {fmt_b(params_b)}"),
        ('step (A), median [IQR]', f"{sA['median']:.3f} s [{sA['q25']:.3f}, {sA['q75']:.3f}]"),
        ('step + update (B)', f"{sB['median']:.3f} s [{sB['q25']:.3f}, {sB['q75']:.3f}]"),
        ('update(), median [IQR]', f"{sU['median']:.3f} s [{sU['q25']:.3f}, {sU['q75']:.3f}]"),
        ('update / step (per pair)', f"{pct(r_direct['median'])} [{pct(r_direct['q25'])}, {pct(r_direct['q75'])}], "
                                     f"min {pct(r_direct['min'])} max {pct(r_direct['max'])}  (target ≤ 2 %)"),
        ('(B − A) / A (per pair)', f"{pct(r_ab['median'])} [{pct(r_ab['q25'])}, {pct(r_ab['q75'])}]"),
        ('update: transient peak', '+' + fmt_b(U['peak_rss_delta']) if U['peak_rss_delta'] is not None else 'n/a'),
        ('history growth', f"{U['records_per_measured_step']} records, {U['history_bytes_per_measured_step'] / 1024:.1f} KiB per measured step"),
    ]
    w = max(len(k) for k, _ in rows)
    say('\n' + '\n'.join(f'{k:<{w}}  {v}' for k, v in rows))
    if 'profile' in res:
        say(f"\nprofile of one update ({res['profile']['total_tottime']:.3f} s), by own time:")
        for r in res['profile']['by_tottime'][:10]: say(f"  {r['tottime']:8.3f} s own {r['cumtime']:8.3f} s cum {r['calls']:6d}x  {r['fn']}")
    if warns: say('\nwarnings while building:\n  ' + '\n  '.join(warns))
    with open(a.out, 'w') as f: json.dump(res, f, indent=1, default=str)
    say(f"\nwrote {a.out}")
    return res

def main(argv=None):
    "Each measurement in a fresh process, one structure-check cache folder: the build cold, then at initialization and after warm-up"
    import json, subprocess, tempfile
    a = parse(argv)
    if a.one: return run(argv)
    cache = a.cache or tempfile.mkdtemp(prefix='conslaw_bench_cache_')
    env = dict(os.environ, CONSLAW_CACHE=cache)
    rest = [x for x in (argv if argv is not None else sys.argv[1:]) if x not in ('--build-only',)]
    plan = [('build, cache empty (cold)', ['--warmup', '0', '--build-only'])]
    plan += ([('build, cache filled (warm)', ['--warmup', '0', '--build-only'])] if a.build_only else
             [('built at initialization', ['--warmup', '0']), (f'built after {a.warmup} warm-up steps', ['--warmup', str(a.warmup)])])
    out = {}
    for i, (what, extra) in enumerate(plan):
        print(f"\n==== {what} (a fresh process; cache {cache})", flush=True)
        o = f"{a.out}.{i}.json"
        subprocess.run([sys.executable, __file__, *rest, '--one', *extra, '--out', o], env=env, check=True)
        out[what] = json.load(open(o))
    print('\n==== summary')
    for what, r in out.items():
        t = r.get('timing', {})
        line = f"{what:<32} build {r['build']['seconds']:6.2f} s"
        if t: line += (f"; update / step {100 * t['update_over_step']['median']:.2f} % (median of {t['update_over_step']['n']} pairs; "
                       f"update {t['update']['median'] * 1e3:.0f} ms, step {t['step']['median']:.2f} s)")
        print(line)
    with open(a.out, 'w') as f: json.dump(out, f, indent=1, default=str)
    return out

if __name__ == '__main__': main()
