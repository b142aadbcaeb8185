"""The paper's chapters: `blocks` (one implementation of each block, in the transformers layout), `ffn` (GELU/SiLU FFNs
and SwiGLU, Thms 4.1-4.2), `attention` (multi-head attention, sinusoidal PE and RoPE, Thms 4.3-4.4) and `moe` (dense and
sparse mixtures of experts, Thms 4.5-4.7). Each module's forward functions share its name (`ffn.ffn`, `moe.moe`): import
them from the module."""
from .blocks import Attention, SwiGLU, MoE, RMSNorm, apply_rope
from .ffn import swiglu_laws, ffn_theory, swiglu_theory
from .attention import mha, mha_laws, rope_laws, mha_theory, rope_theory
from .moe import moe_laws, moe_stated_theory, moe_measured_theory

__all__ = ['Attention', 'SwiGLU', 'MoE', 'RMSNorm', 'apply_rope', 'swiglu_laws', 'ffn_theory', 'swiglu_theory', 'mha',
           'mha_laws', 'rope_laws', 'mha_theory', 'rope_theory', 'moe_laws', 'moe_stated_theory', 'moe_measured_theory']
