"""Echo Trap detector over metric series (pure Python: no numpy, no torch, no Django).

    from diagnostics import Detector
    det = Detector(overrides={"grad_spike": {"tolerance": 5.0}})
    events = det.update(step, {"train/success": 0.4, ...})

Rules and their parameters: docs/DETECTOR.md, or `rule_params()`. Every metric key, what it means and
where it is charted: `diagnostics.metrics` (docs/METRICS.md).
"""

from . import aliases, metrics
from .detector import Detector, replay_inputs, rule_params
from .series import load_series

__all__ = ["Detector", "aliases", "load_series", "metrics", "replay_inputs", "rule_params"]
