"""The documentation site: `tools/docs/build.py` builds it offline from the notebooks, and headless Chromium reads it.

One build (into a temporary folder, so `docs/` is left alone) serves every test here. The browser test needs Debian's
`chromium` (`make test` installs it when run as root); it is skipped, saying so, only where no Chromium exists at all.
"""
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/'tools'/'docs'))
import build as docs_build  # noqa: E402
import check_site  # noqa: E402
# one worker runs this module (pytest-xdist builds a fixture once per worker, and it is costly here), its costly fixture
# session-scoped: a worker runs other modules' tests between this module's, which tore a module-scoped one down (built twice)
pytestmark = pytest.mark.xdist_group('docs')

NBS = docs_build.list_notebooks(ROOT/'nbs')
PAGES = [docs_build.page_name(nb) + '.html' for nb in NBS]


@pytest.fixture(scope='session')
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp('site')
    r = subprocess.run([sys.executable, str(ROOT/'tools'/'docs'/'build.py'), '--out', str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=900, env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert r.returncode == 0, f"the docs build failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return out


def test_page_names_follow_nbdev():
    "Pages are named as nbdev names them, so nbdev's doc links (`pde.html#count_laws`) hold; index comes first"
    test = [docs_build.page_name(Path(n)) for n in ('02_engine.count.ipynb', '04a_data.ipynb', 'index.ipynb', '21_cli.ipynb', 'explain/performance.ipynb')]
    assert test == ['engine.count', 'data', 'index', 'cli', 'performance']
    names = [str(p.relative_to(ROOT/'nbs')) for p in NBS]
    assert NBS[0].name == 'index.ipynb' and len(names) == len(set(names))   # index first, each page once
    # the reading order: the paper's setting and chapters, its theorem table and proofs before anything beyond the paper,
    # and the engine's internals (numbered first: everything imports them) last
    at = {n: i for i, n in enumerate(names)}
    assert at['03_paper.pde.ipynb'] < at['04_paper.ffn.ipynb'] < at['05_paper.attention.ipynb'] < at['06_paper.moe.ipynb'] < at['08a_theorems.ipynb'] \
        < at['explain/proofs.ipynb'] < at['12c_experiments.ipynb'] < at['07_hf.calls.ipynb'] < at['07a_hf.readers.ipynb'] < at['09c_discovery.found.ipynb'] \
        < at['13a_survey.atlas.ipynb'] < at['00_engine.core.ipynb'] < at['01c_engine.solvers.ipynb'] < at['explain/performance.ipynb']
    assert docs_build.slugify('Flat.flatten') == 'flat.flatten' and docs_build.slugify('count_laws') == 'count_laws'
    assert docs_build.slugify('Deciding a rank, honestly') == 'deciding-a-rank-honestly'


def test_markdown_helpers():
    md = 'the flow\n$$\\dot x = 1.$$\nA function $h$.\n\n```\n$$ kept $$\n```\n'
    assert docs_build.display_math_blocks(md) == 'the flow\n\n$$\n\\dot x = 1.\n$$\n\nA function $h$.\n\n```\n$$ kept $$\n```'
    pages = {'engine.count.html': 'engine.count.md', '02_engine.count.ipynb': 'engine.count.md'}
    got = docs_build.rewrite_links('[a](https://h/b/engine.count.html#x) [b](02_engine.count.ipynb) <a href="engine.count.html#y">', pages, 'https://h/b/')
    assert got == '[a](engine.count.md#x) [b](engine.count.md) <a href="engine.count.html#y">'
    got = docs_build.rewrite_links('[m](https://h/b/engine.count.html#problem.check)', pages, 'https://h/b/')
    assert got == '[m](engine.count.md#problem)'                  # a method links to its class's section
    assert docs_build._cell_options('#| echo: false\n#| code-fold: show\nx = 1')[0] == {'echo': False, 'code-fold': 'show'}


def test_every_notebook_is_a_page_in_order(site):
    for p in PAGES: assert (site/p).exists(), f"no page {p}"
    html = (site/'index.html').read_text()
    nav = html[html.index('md-nav--primary'):html.index('md-sidebar--secondary')]   # the left sidebar
    hrefs = [h for h in re.findall(r'href="([^"#]+\.html)"', nav)]
    order = list(dict.fromkeys(h.split('/')[-1] for h in hrefs))
    assert order == PAGES, f"sidebar order {order} != notebook order {PAGES}"
    assert (site/'search'/'search_index.json').exists()


def test_nothing_loads_from_off_site(site):
    "No script, stylesheet, image or frame comes from another host: the site works with no network"
    bad = []
    for f in site.rglob('*.html'):
        for tag in re.findall(r'<(?:script|link|img|iframe|source|embed|object)\b[^>]*>', f.read_text(errors='replace')):
            if re.search(r'\b(?:src|href|data)\s*=\s*["\']?(?:https?:)?//', tag) and 'rel="canonical"' not in tag:
                bad.append(f'{f.name}: {tag[:160]}')
    assert not bad, '\n'.join(bad)
    assert (site/'mathjax'/'tex-chtml-full.js').exists() and any((site/'mathjax'/'output'/'chtml'/'fonts').rglob('*.woff'))


def _exports():
    "(page, name) of every function and class in `__all__` of the generated modules, on its notebook's page"
    out = []
    for py in sorted((ROOT/'conslaw_nb').rglob('*.py')):
        src = py.read_text()
        m = re.search(r'File to edit: (?:\.\./)+nbs/(\S+?\.ipynb)', src)
        if not m or not (ROOT/'nbs'/m.group(1)).exists(): continue
        body = ast.parse(src).body
        defs = {n.name for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        for node in body:   # nbdev's show_doc documents functions and classes (not constants), so do we
            if isinstance(node, ast.Assign) and any(getattr(t, 'id', '') == '__all__' for t in node.targets):
                page = docs_build.page_name(Path(m.group(1))) + '.html'
                out += [(page, n) for n in ast.literal_eval(node.value) if n in defs]
    return out


def test_api_docs_for_every_export(site):
    "Every exported symbol has its show_doc section (heading with nbdev's anchor, signature) on its notebook's page"
    exports = _exports()
    assert exports, "no exported symbol found"
    missing = []
    for page, name in exports:
        html = (site/page).read_text()
        if not re.search(rf'<h[2-4] id="{re.escape(docs_build.slugify(name))}"', html): missing.append(f'{page}: {name}')
    assert not missing, "no API docs for: " + ', '.join(missing)
    pde = (site/'engine.count.html').read_text()
    assert 'def count_laws' in re.sub(r'<[^>]+>', '', pde)


def test_content_page_has_prose_code_outputs_figures(site):
    "The engine page carries its prose, math, code, stored outputs and figures; #| hide and export cells are gone"
    pde = (site/'engine.count.html').read_text()
    assert 'class="arithmatex"' in pde and 'nb-input' in pde and 'nb-output' in pde
    assert re.search(r'<img[^>]+src="engine\.flow_files/[^"]+\.png"', (site/'engine.flow.html').read_text())
    assert 'from fastcore.test import' not in pde and 'nbdev_export()' not in pde and '#| export' not in pde


def test_pages_in_headless_chromium(site):
    "Every page loads with no console error, its math typeset, images loaded, links resolving, nothing off-site"
    if not check_site.find_chromium():
        pytest.skip("chromium is not installed: `apt-get install chromium` (`make test` does it when run as root)")
    r = check_site.check_site(site, pages=PAGES)
    assert not r['problems'], '\n'.join(r['problems'])
    assert set(r['pages']) == set(PAGES)
    assert sum(p['math'] for p in r['pages'].values()) > 0 and r['internal_links'] > len(PAGES)
    assert r['search_results'] > 0
    assert sum(len(p['images']) for p in r['pages'].values()) > 0, "no figure on any page"
