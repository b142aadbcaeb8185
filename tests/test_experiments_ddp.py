"DDP scale-out: 2 gloo processes on one global batch drift exactly like 1 process on that batch (float64, CPU)."
import json, os, subprocess, sys, textwrap
import pytest

torch = pytest.importorskip('torch')
from conslaw_nb.experiments.training import TrainConfig, train

CFG = dict(task='ptb', optim='gd', lr=0.5, steps=6, batch_size=4, seq_len=8, n_log=6,
           overrides=dict(d_model=8, d_ff=8, n_head=2, n_layer=2, n_experts=2, top_k=2, moe_every=2))

SCRIPT = textwrap.dedent(f"""
    import json, sys
    import torch.distributed as dist
    from conslaw_nb.experiments.training import TrainConfig, train
    dist.init_process_group('gloo')
    recs = train(TrainConfig(**{CFG!r}))
    if dist.get_rank() == 0:
        json.dump(recs, open(sys.argv[1], 'w'))
    dist.barrier()                 # both ranks done before either tears the group down
    dist.destroy_process_group()
""")

@pytest.mark.skipif(not torch.distributed.is_available(), reason='torch built without torch.distributed')
def test_ddp_two_processes_match_one(tmp_path):
    script, out = tmp_path/'ddp_run.py', tmp_path/'ddp.json'
    script.write_text(SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS='1')
    r = subprocess.run([sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', '2', str(script), str(out)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[:2000] + '\n...\n' + r.stderr[-2000:]
    ddp = json.loads(out.read_text())
    one = train(TrainConfig(**CFG))
    assert len(ddp) == len(one) > 0
    key = lambda r: (r['step'], r['kind'], r['block'])
    one = {key(r): r for r in one}
    kinds = set()
    for r in ddp:
        s = one[key(r)]
        kinds.add(r['kind'])
        assert abs(r['loss'] - s['loss']) <= 1e-12 * abs(s['loss'])
        # the drift itself, not just the rounding floor: compare the Eq. 10 errors relative to their size
        assert abs(r['eps'] - s['eps']) <= 1e-7 * abs(s['eps']) + 1e-15, (key(r), r['eps'], s['eps'])
    assert {'qk', 'vo', 'swiglu', 'gate'} <= kinds
