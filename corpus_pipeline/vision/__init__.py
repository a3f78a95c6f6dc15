"""Image description: a vision model through an OpenAI-compatible endpoint, OCR fallback,
and the IMAGE / TABLE_IMAGE pieces that join a document's text chunks (seed 000 §6)."""

from corpus_pipeline.vision.client import OpenAIVisionClient, VisionAnswer, VisionClient, parse_answer
from corpus_pipeline.vision.config import VisionConfig, vision_settings
from corpus_pipeline.vision.describe import OCR_ONLY_NO_VLM, VLM_FAILED_WITH_OCR, describe_images
from corpus_pipeline.vision.ocr import clean_ocr_text, ocr_image, tesseract_available
from corpus_pipeline.vision.pieces import image_pieces

__all__ = [
    "OCR_ONLY_NO_VLM",
    "VLM_FAILED_WITH_OCR",
    "OpenAIVisionClient",
    "VisionAnswer",
    "VisionClient",
    "VisionConfig",
    "clean_ocr_text",
    "describe_images",
    "image_pieces",
    "ocr_image",
    "parse_answer",
    "tesseract_available",
    "vision_settings",
]
