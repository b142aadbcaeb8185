"""Published models, surveyed: `formulas` (a block's count as a formula of its sizes, fitted on twins and confirmed),
`atlas` (the blocks of the literature, counted) and `published` (`census`: a published model's laws from its config)."""
from .published import census, Census, CensusRow, whole_law, WholeLaw

__all__ = ['census', 'Census', 'CensusRow', 'whole_law', 'WholeLaw']
