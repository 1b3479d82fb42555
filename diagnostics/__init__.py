"""Echo Trap detector over metric series (pure Python: no numpy, no torch, no Django).

    from diagnostics import Detector
    det = Detector(overrides={"grad_spike": {"tolerance": 5.0}})
    events = det.update(step, {"train/success": 0.4, ...})

Rules and their parameters: docs/DETECTOR.md, or `rule_params()`.
"""

from . import aliases
from .detector import Detector, rule_params
from .series import load_series

__all__ = ["Detector", "aliases", "load_series", "rule_params"]
