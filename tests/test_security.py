"""Nothing in the library executes user-supplied pickles or strings: every torch.load passes weights_only=True, the only
pickle.load is the CIFAR-10 reader's restricted unpickler, and there is no eval/exec of data."""
import re
from pathlib import Path

LIB = Path(__file__).resolve().parents[1]/'conslaw_nb'
SOURCES = {p.name: p.read_text(encoding='utf-8') for p in LIB.rglob('*.py') if p.name != '_modidx.py'}

def lines(pattern):
    return [(n, i+1, l.strip()) for n, s in SOURCES.items() for i, l in enumerate(s.splitlines()) if re.search(pattern, l)]

def test_torch_load_is_weights_only():
    bad = [x for x in lines(r'torch\.load\(') if 'weights_only=True' not in x[2]]
    assert not bad, f"torch.load without weights_only=True: {bad}"

def test_no_plain_unpickling():
    bad = [x for x in lines(r'pickle\.loads?\(|pickle\.Unpickler\(') if 'class _SafeUnpickler' not in x[2]]
    assert not bad, f"unrestricted unpickling: {bad}"

def test_no_eval_or_exec():
    bad = lines(r'(?<![\w.])(eval|exec)\(')
    assert not bad, f"eval/exec in the library: {bad}"
