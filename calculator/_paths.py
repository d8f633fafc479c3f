"""Where the package's data files live: inside the package, so an installed wheel carries them.

The registry users read and edit is ``hardware_registry.yaml`` at the top of the repository; the wheel
carries it as ``calculator/data/hardware_registry.yaml`` (``pyproject.toml``), and a source checkout (or
an editable install) reads the top-level file itself.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

#: ``calculator/data``: the calibration tables (and, in a wheel, the registry).
DATA_DIR = Path(str(files("calculator") / "data"))
_PACKAGED_REGISTRY = DATA_DIR / "hardware_registry.yaml"
#: The registry: the wheel's copy, or the repository's top-level file in a source checkout.
_TOP_LEVEL_REGISTRY = DATA_DIR.parents[1] / "hardware_registry.yaml"
REGISTRY_FILE = _PACKAGED_REGISTRY if _PACKAGED_REGISTRY.is_file() else _TOP_LEVEL_REGISTRY
CALIBRATION_DIR = DATA_DIR / "calibration"
KERNEL_DIR = CALIBRATION_DIR / "kernels"
