"""An episode's frames as PNG images, within a byte budget (Pillow).

PNG is lossless, so a frame the player shows is the stored frame, pixel for pixel; each
frame is its own image, so the player seeks to any of them at once (an animated WebP or
a video would have to be decoded from its start). Pong's 210x160 frames take about 0.7 kB
each at zlib level 6, in 1.7 ms.

Frames are taken every ``stride`` steps, at most ``max_frames`` of an episode; when the
images taken so far outgrow the budget, every other one is dropped and the stride
doubles, so an episode's frames stay within its budget whatever they hold (noise does
not compress). A frame too large for a sixteenth of the budget shows every other pixel
(then every fourth...), so that an episode keeps 16 frames at least.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["FRAME_GROUP", "EpisodeFrames", "encode_frames", "png_uri"]

FRAME_GROUP = 32
"""Frames read at once."""
_MIN_FRAMES = 16


@dataclass(frozen=True, slots=True)
class EpisodeFrames:
    """The frames of one image leaf over one episode.

    Attributes:
        steps: The step (within the episode) of each frame.
        images: Each frame as a ``data:image/png;base64,...`` URI.
        stride: Steps between two frames.
        pixel_step: Every ``pixel_step``-th stored row and column is shown (1: all).
    """

    steps: tuple[int, ...]
    images: tuple[str, ...]
    stride: int
    pixel_step: int

    @property
    def size(self) -> int:
        """Characters of the images' URIs."""
        return sum(len(image) for image in self.images)


def png_uri(picture: np.ndarray) -> str:
    """A picture ``(H, W)`` or ``(H, W, 1|3|4)`` of uint8 as a PNG data URI."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(picture).save(buffer, "PNG", compress_level=6)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def encode_frames(
    read: Callable[[np.ndarray], np.ndarray],
    length: int,
    *,
    budget: int,
    max_frames: int,
    to_bytes: Callable[[np.ndarray], np.ndarray],
) -> EpisodeFrames:
    """The frames of an episode of ``length`` steps, their URIs within ``budget`` characters.

    Args:
        read: The pictures ``(k, H, W[, C])`` at the given steps of the episode.
        length: Steps of the episode.
        budget: Characters the URIs may take together.
        max_frames: Frames at most.
        to_bytes: Pictures to uint8 (a no-op for uint8 images).
    """
    stride = max(1, -(-length // max(1, max_frames)))
    pixel_step = 1
    kept: list[tuple[int, str]] = []
    total, step = 0, 0
    while step < length:
        group = np.arange(step, length, stride)[:FRAME_GROUP]
        pictures = to_bytes(read(group))
        for at, picture in zip(group.tolist(), pictures, strict=True):
            if at % stride:
                continue  # the stride doubled within this group
            if not kept:
                pixel_step = _pixel_step(picture, budget // _MIN_FRAMES)
            uri = png_uri(np.ascontiguousarray(picture[::pixel_step, ::pixel_step]))
            kept.append((at, uri))
            total += len(uri)
            while total > budget and len(kept) > 1:
                stride *= 2
                kept = [(s, u) for s, u in kept if s % stride == 0]
                total = sum(len(u) for _, u in kept)
        step = (int(group[-1]) // stride + 1) * stride
    return EpisodeFrames(tuple(s for s, _ in kept), tuple(u for _, u in kept), stride, pixel_step)


def _pixel_step(picture: np.ndarray, allowed: int) -> int:
    """The smallest power of two of pixels to skip for a frame's URI to fit ``allowed``."""
    step = 1
    while len(png_uri(np.ascontiguousarray(picture[::step, ::step]))) > allowed:
        if min(picture.shape[0], picture.shape[1]) // (2 * step) < 2:
            break
        step *= 2
    return step
