"""conslaw_nb: the conservation laws of gradient flows for modern neural architectures — count them, check them, find them,
read them off the blocks people train, and watch them while training.

Count, check and find the laws of any model `f(params, x)`
    count_laws            how many independent laws: D − dim Lie(W)(θ), with the singular-value gap it rests on -> `LawCount`
    check_laws            whether functions h(θ) are laws of f: the largest relative ⟨∇h, ∇f⟩ -> `LawCheck`
    find_laws             the polynomial laws of f, solved for and checked -> `Laws`

Read the blocks people train (ours, PyTorch's, Hugging Face transformers')
    adapt                 one block, with the laws the theory states for exactly its configuration, checked -> `Adapted`
    law_blocks            every attention, MLP, MoE and mixer block of a model, stated or found laws -> `Blocks`
    census                the laws of a published model from its config alone, per layer and block -> `Census`

Watch them while training
    ConservationMonitor   the paper's Eq. 10 and the drift of every law beside its control, one `update()` per step
    ConservationCallback  the same under the transformers `Trainer` (a `TrainerCallback`; needs transformers)

Check the paper
    verify                every architecture of the paper: the laws it states against the engine's count, one `ArchCheck` each

Housekeeping
    clear_caches          forget what was established once per structure or family (checks, twin counts, formulas)

Each name is imported from its module when first used, so `import conslaw_nb` stays light (transformers is imported only by
what needs it). The modules hold the rest; their pages are the documentation.
"""
__version__ = "0.1.0"

_WHERE = {  # the front door: name -> the module that defines it
    'count_laws': 'engine.count', 'LawCount': 'engine.count', 'check_laws': 'engine.checks', 'LawCheck': 'engine.checks',
    'find_laws': 'discovery.found', 'Laws': 'discovery.lawtext', 'law_blocks': 'discovery.found', 'Blocks': 'discovery.found',
    'adapt': 'hf.adapters', 'Adapted': 'hf.adapters', 'census': 'survey.published', 'Census': 'survey.published',
    'ConservationMonitor': 'monitor', 'ConservationCallback': 'monitor', 'verify': 'theorems', 'ArchCheck': 'theorems'}
__all__ = list(_WHERE) + ['clear_caches']

def __getattr__(name):
    if name not in _WHERE: raise AttributeError(f"module 'conslaw_nb' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f'.{_WHERE[name]}', __name__), name)
    globals()[name] = value
    return value

def __dir__(): return sorted(set(globals()) | set(__all__))

def clear_caches(disk:bool=False):
    """Forget what this process established once per block structure or model family — structure checks and twin counts
    (`hf.adapters.STRUCTURES`, `COUNTED`), carried laws (`discovery.found.CARRIED`), the families read off configs
    (`survey.families.PROBED`), census formulas and whole-model laws (`survey.published.FORMULAS`, `WHOLE_LAWS`) — and, with `disk`, the structure-check file of this version of the code"""
    import importlib
    for mod, names in (('hf.adapters', ('STRUCTURES', 'COUNTED')), ('discovery.found', ('CARRIED',)),
                       ('survey.families', ('PROBED',)), ('survey.published', ('FORMULAS', 'WHOLE_LAWS'))):
        m = importlib.import_module(f'.{mod}', __name__)
        for n in names: getattr(m, n).clear()
    if disk: importlib.import_module('.hf.adapters', __name__).STRUCTURES.clear(disk=True)
