"""sparsecal from Python (ctypes over libsparsert; numpy).

    import sparsecal
    ids = sparsecal.tokenize("m.spk", "Once upon a time")          # through the sparsecal command
    with sparsecal.Model("m.spk") as m:                              # the artifact's router (pack --method)
        out = m.generate(ids, steps=64, temperature=0)              # = sparsecal run -p ... --steps 64 --temp 0
        m.set_method("cats", 0.5)
        print(m.score([out])["ppl"])                                 # = sparsecal run --score
    cal = sparsecal.Calibration("c.scal")
    c = cal.layers("claws", "c")                                     # [n_layers, ffn_dim] float64
    tensors, meta = sparsecal.load_safetensors("routing.safetensors")  # what `sparsecal export` wrote

README.md ("Python") and the docstrings say more."""
from ._lib import SparsecalError
from .cli import detokenize, tokenize
from .container import Calibration, Container, Section
from .model import Model
from .safetensors import load_safetensors

__all__ = ["Calibration", "Container", "Model", "Section", "SparsecalError", "detokenize", "load_safetensors",
           "tokenize"]
