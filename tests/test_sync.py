"The generated files must be what the notebooks generate: conslaw_nb/*.py (nbdev_export) and README.md (tools/readme.py)."
import filecmp, os, shutil, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

def test_library_matches_notebooks(tmp_path):
    for name in ('settings.ini', 'pyproject.toml', 'setup.py'): shutil.copy(ROOT/name, tmp_path/name)
    shutil.copytree(ROOT/'nbs', tmp_path/'nbs', ignore=shutil.ignore_patterns('.ipynb_checkpoints', '_*'))
    shutil.copytree(ROOT/'conslaw_nb', tmp_path/'conslaw_nb', ignore=shutil.ignore_patterns('*.py', '__pycache__'))   # the data files, no module
    exe = Path(sys.executable).with_name('nbdev_export')
    env = {k: v for k, v in os.environ.items() if k != 'IN_TEST'}     # nbdev_export writes nothing when IN_TEST is set
    subprocess.run([str(exe)], cwd=tmp_path, check=True, capture_output=True, env=env)
    got = sorted(str(p.relative_to(tmp_path/'conslaw_nb')) for p in (tmp_path/'conslaw_nb').rglob('*.py') if p.name != '__init__.py')
    have = sorted(str(p.relative_to(ROOT/'conslaw_nb')) for p in (ROOT/'conslaw_nb').rglob('*.py') if p.name != '__init__.py')
    assert got == have, f"modules differ: notebooks make {got}, conslaw_nb has {have}: run nbdev_export and commit"
    stale = [n for n in got if not filecmp.cmp(tmp_path/'conslaw_nb'/n, ROOT/'conslaw_nb'/n, shallow=False)]
    assert not stale, f"conslaw_nb/{stale} out of date with the notebooks: run nbdev_export (never edit them by hand)"

def test_readme_matches_index():
    sys.path.insert(0, str(ROOT/'tools'))
    import readme
    assert (ROOT/'README.md').read_text(encoding='utf-8') == readme.render(ROOT/'nbs'/'index.ipynb'), \
        "README.md is out of date with nbs/index.ipynb: run `make readme`"
