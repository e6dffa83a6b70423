"""ctest's entry point for the Python module's tests: exit 77 (skipped) with the reason when Debian's
python3-numpy or libsparsert is missing, else the unittest result (0 passed, 1 failed)."""
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, ".."))
try:
    import numpy  # noqa: F401
except ImportError:
    print(f"SKIP: numpy is not installed for {sys.executable} (Debian: apt-get install python3-numpy)")
    sys.exit(77)
import sparsecal  # noqa: E402

try:
    sparsecal._lib.lib()
except sparsecal.SparsecalError as e:
    print(f"SKIP: {e}")
    sys.exit(77)
suite = unittest.defaultTestLoader.discover(here, pattern="test_*.py")
result = unittest.TextTestRunner(verbosity=2).run(suite)
sys.exit(0 if result.wasSuccessful() else 1)
