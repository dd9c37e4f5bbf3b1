"""`python -m lossops.ort_ext.aot`: moved to `python -m lossops.ort_ext.machine_code.aot`; this name works for one
release and says so."""

import sys
import warnings

from .machine_code.aot import main

if __name__ == "__main__":
    warnings.warn("python -m lossops.ort_ext.aot is now python -m lossops.ort_ext.machine_code.aot; the old name "
                  "goes in the next release", DeprecationWarning, stacklevel=1)
    sys.exit(main())
