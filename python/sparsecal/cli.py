"""Text <-> ids through the `sparsecal` command (the tokenizers live in the toolchain, not in libsparsert):
an artifact carries its tokenizer, so `tokenize(artifact, text)` gives the ids `sparsecal run -p text`
feeds the decoder. The command is found as SPARSECAL_CLI, else beside an installed package (_where.py),
else in a build tree (SPARSECAL_BUILD), else on PATH."""
import json
import os
import shutil
import subprocess

from ._lib import SparsecalError


def executable():
    env = os.environ.get("SPARSECAL_CLI")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from . import _where
        p = os.path.normpath(os.path.join(here, _where.BINDIR, "sparsecal"))
        if os.access(p, os.X_OK):
            return p
    except ImportError:
        pass
    build = os.environ.get("SPARSECAL_BUILD")
    if build and os.access(os.path.join(build, "sparsecal"), os.X_OK):
        return os.path.join(build, "sparsecal")
    p = shutil.which("sparsecal")
    if not p:
        raise SparsecalError("the sparsecal command was not found: set SPARSECAL_CLI=/path/to/sparsecal")
    return p


def run(*args):
    """Runs `sparsecal ARGS...` and returns its stdout; a failure raises with the command's one-line error."""
    r = subprocess.run([executable(), *map(str, args)], capture_output=True, text=True)
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines()
        raise SparsecalError(lines[-1] if lines else f"sparsecal {args[0]}: exit status {r.returncode}")
    return r.stdout


def tokenize(model, text, bos=True, tokenizer=None):
    """The ids of text with the tokenizer of model (an artifact, or any model sparsecal reads; `tokenizer`
    overrides it), BOS first when bos."""
    args = ["tokenize", "-m", model, "-p", text, "--json"] + (["--bos"] if bos else [])
    if tokenizer:
        args += ["--tokenizer", tokenizer]
    return json.loads(run(*args))["ids"]


def detokenize(model, ids, tokenizer=None):
    """The text of ids (BOS/EOS print as nothing)."""
    args = ["tokenize", "-m", model, "--decode", " ".join(str(int(i)) for i in ids), "--json"]
    if tokenizer:
        args += ["--tokenizer", tokenizer]
    return json.loads(run(*args))["text"]
