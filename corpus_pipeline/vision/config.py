"""kb.yaml's ``vision:`` section, its own typed settings, and how they resolve over the environment.

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
reason). ``vision_settings`` returns the same type with the environment's values filled in
(there is no second settings type). The key is never a field: the client reads it from the
variable ``api_key_env`` names when it opens, and registers it as a secret (masked in every
error stored or printed).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import ConfigDict, Field

from corpus_pipeline.endpoints import Endpoint
from corpus_pipeline.secrets import secret_from_env

ENV_MODEL = "CORPUS_VISION_MODEL"
ENV_BASE_URL = "OPENAI_BASE_URL"


class VisionConfig(Endpoint):
    """Image description: a vision model behind an OpenAI-compatible endpoint, OCR fallback.

    Unset ``base_url`` / ``model`` come from ``OPENAI_BASE_URL`` / ``CORPUS_VISION_MODEL``.
    The API key is never written here: ``api_key_env`` names the variable that holds it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    model: str | None = None
    ocr: bool = True
    ocr_languages: str = Field("eng+chi_sim", pattern=r"^[a-z_]+(\+[a-z_]+)*$")
    min_side_px: int = Field(16, ge=1, le=4096)

    @property
    def has_vision_model(self) -> bool:
        return self.enabled and bool(self.model)

    def api_key(self, env: Mapping[str, str] | None = None) -> str | None:
        """The key, from the variable ``api_key_env`` names (registered as a secret)."""
        return secret_from_env(self.api_key_env, os.environ if env is None else env) or None


def vision_settings(config: VisionConfig | None = None, env: Mapping[str, str] | None = None) -> VisionConfig:
    """kb.yaml's ``vision:`` section (or its defaults) with the model and base URL it leaves
    unset taken from the environment."""
    cfg = config or VisionConfig()
    env = os.environ if env is None else env
    return cfg.model_copy(
        update={
            "model": cfg.model or env.get(ENV_MODEL) or None,
            "base_url": cfg.base_url or env.get(ENV_BASE_URL) or None,
        }
    )
