"""Write README.md from nbs/index.ipynb without Quarto: markdown cells as they are, code cells as python blocks with
their stored text outputs. Cells marked `#| hide` are left out and directive lines are dropped, as nbdev does.
Usage: python tools/readme.py nbs/index.ipynb README.md   (or --check to fail when README.md differs)"""
import json, re, sys
from pathlib import Path

def _src(c): return ''.join(c['source']) if isinstance(c['source'], list) else c['source']

def render(nb_path):
    "The README text rendered from the notebook at `nb_path`"
    nb = json.loads(Path(nb_path).read_text(encoding='utf-8'))
    out = ["<!-- generated from nbs/index.ipynb by tools/readme.py: edit the notebook, then `make readme` -->"]
    for c in nb['cells']:
        src = _src(c)
        lines = src.split('\n')
        directives = [l for l in lines if re.match(r'\s*#\|', l)]
        if any(re.match(r'\s*#\|\s*hide\b', l) for l in directives): continue
        body = '\n'.join(l for l in lines if not re.match(r'\s*#\|', l)).strip('\n')
        if c['cell_type'] == 'markdown': out.append(body)
        elif c['cell_type'] == 'code' and body:
            out.append(f"```python\n{body}\n```")
            texts = []
            for o in c.get('outputs', []):
                if o.get('output_type') == 'stream': texts.append(''.join(o['text']))
                elif 'data' in o and 'text/plain' in o['data']: texts.append(''.join(o['data']['text/plain']))
            if texts: out.append("```\n" + '\n'.join(t.rstrip('\n') for t in texts) + "\n```")
    return '\n\n'.join(out) + '\n'

if __name__ == '__main__':
    args = [a for a in sys.argv[1:] if a != '--check']
    nb, dest = (args + ['nbs/index.ipynb', 'README.md'][len(args):])[:2]
    text = render(nb)
    if '--check' in sys.argv:
        if Path(dest).read_text(encoding='utf-8') != text: sys.exit(f"{dest} is out of date with {nb}: run `make readme`")
    else: Path(dest).write_text(text, encoding='utf-8')
