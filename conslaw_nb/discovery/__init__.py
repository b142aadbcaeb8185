"""Laws found rather than stated: `lawsearch` (the polynomial ansatz and its null space), `lawtext` (laws as readable
text), `carry` (families of laws carried from small twins to real width) and `found` (`find_laws`, `adapt_found`,
`law_blocks` over any model)."""
from .lawtext import Law, Laws
from .found import find_laws, adapt_found, law_blocks, Blocks, tiny_transformer

__all__ = ['find_laws', 'adapt_found', 'law_blocks', 'Blocks', 'Law', 'Laws', 'tiny_transformer']
