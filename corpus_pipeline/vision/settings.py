"""Vision settings: kb.yaml's ``vision:`` section over the environment, resolved once.

==================  ===========================  =========================================
setting             kb.yaml key                  environment fallback
==================  ===========================  =========================================
base URL            ``vision.base_url``          ``OPENAI_BASE_URL``
API key             (never in kb.yaml)           the variable named by ``vision.api_key_env``
                                                 (default ``OPENAI_API_KEY``)
model               ``vision.model``             ``CORPUS_VISION_MODEL``
timeout, retries    ``vision.timeout_s``,        -
                    ``vision.max_retries``
OCR fallback        ``vision.ocr``,              -
                    ``vision.ocr_languages``
==================  ===========================  =========================================

No model means OCR only; ``ocr: false`` and no model means every image is skipped (with the
reason). The key is held in a field excluded from ``repr`` and is never written anywhere;
it is registered as a secret when resolved (masked in every error stored or printed).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from corpus_pipeline.kbconfig import VisionConfig
from corpus_pipeline.secrets import secret_from_env


@dataclass(frozen=True)
class VisionSettings:
    """Everything ``describe_images`` needs; build it with ``vision_settings``."""

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False, compare=False)
    timeout_s: float = 60.0
    max_retries: int = 2
    ocr: bool = True
    ocr_languages: str = "eng+chi_sim"
    min_side_px: int = 16
    enabled: bool = True

    @property
    def has_vision_model(self) -> bool:
        return self.enabled and bool(self.model)


def vision_settings(config: VisionConfig | None = None, env: Mapping[str, str] | None = None) -> VisionSettings:
    """Resolve kb.yaml's ``vision:`` section (or its defaults) against the environment."""
    cfg = config or VisionConfig()
    env = os.environ if env is None else env
    return VisionSettings(
        model=cfg.model or env.get("CORPUS_VISION_MODEL") or None,
        base_url=cfg.base_url or env.get("OPENAI_BASE_URL") or None,
        api_key=secret_from_env(cfg.api_key_env, env),
        timeout_s=float(cfg.timeout_s),
        max_retries=int(cfg.max_retries),
        ocr=cfg.ocr,
        ocr_languages=cfg.ocr_languages,
        min_side_px=cfg.min_side_px,
        enabled=cfg.enabled,
    )
