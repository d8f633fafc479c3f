"""Where the package's data files live: inside the package, so an installed wheel carries them."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

#: ``calculator/data``: the registry and the calibration tables.
DATA_DIR = Path(str(files("calculator") / "data"))
REGISTRY_FILE = DATA_DIR / "hardware_registry.yaml"
CALIBRATION_DIR = DATA_DIR / "calibration"
KERNEL_DIR = CALIBRATION_DIR / "kernels"
