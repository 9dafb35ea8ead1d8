"""Figure 18: what ``read`` of a large image costs the daemon: time, bytes sent, memory.

No daemon: the tool runs in the benchmark's own process, on a trio loop, as the daemon runs
it. A 4000x3000 PNG (a gradient with noise: photo-like, it does not compress to nothing)
is read by the ``read`` tool: checked, decoded, scaled down to the longest side sent and
encoded again (``tools/_media``). Printed: the limits an image is held to, the call's time
(median of ``--reads``), the bytes of the image part the model is sent, and the process's
peak RSS growth (VmHWM, from /proc, reset after the image is made) over the reads: what
one such read adds to the daemon at its peak (the file's bytes, the decoded image and its
scaled copy, freed after).

    uv run python bench/image_read.py [--reads 5]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Figure, parser, prepare, report  # noqa: E402

import trio  # noqa: E402
from PIL import Image  # noqa: E402

from roost.daemon.tools import ToolContext, ToolRegistry  # noqa: E402
from roost.daemon.tools._media import MAX_IMAGE_BYTES, MAX_INPUT_BYTES, MAX_PIXELS, MAX_SIDE  # noqa: E402
from roost.protocol import DISPATCH_IMAGE_BYTES  # noqa: E402

#: The most one read of a 4000x3000 image may add to the daemon's peak memory: the decoded
#: RGB image is 36 MB, and scaling copies a part of it.
RSS_TARGET_MIB = 120.0
#: The time one such read may take (decode, scale, encode) on a 2-core VM.
READ_TARGET_MS = 1500.0


def _status(field: str) -> int:
    """A /proc/self/status figure in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def _photo(path: Path, width: int, height: int) -> int:
    """A photo-like PNG at ``path``: a colour gradient with noise; its size in bytes."""
    noise = Image.effect_noise((width, height), 24)
    gradient = Image.linear_gradient("L").resize((width, height))
    Image.merge("RGB", (gradient, noise, gradient.rotate(90).resize((width, height)))).save(path, "PNG")
    return path.stat().st_size


async def _measure(folder: Path, reads: int) -> tuple[list[float], int, tuple[int, int], float]:
    registry = ToolRegistry()
    ctx = ToolContext(cwd=str(folder))
    # The peak so far (making the image) is not the read's: reset it to the present RSS.
    Path("/proc/self/clear_refs").write_text("5")
    before = _status("VmHWM")
    times, sent, size = [], 0, (0, 0)
    for _ in range(reads):
        started = time.perf_counter()
        result = await registry.call("read", {"path": "photo.png"}, ctx)
        times.append((time.perf_counter() - started) * 1000)
        assert not result.is_error, result.text
        (part,) = result.parts
        sent, size = len(part.data), (part.width or 0, part.height or 0)
    return times, sent, size, (_status("VmHWM") - before) / 1024


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--reads", type=int, default=5)
    args = p.parse_args()
    context = prepare(args)
    context.append(
        f"limits: longest side sent {MAX_SIDE} px, {MAX_IMAGE_BYTES / 1e6:.2f} MB sent at most, "
        f"{MAX_INPUT_BYTES / 2**20:.0f} MiB read at most, {MAX_PIXELS / 1e6:.0f} M pixels decoded at most, "
        f"{DISPATCH_IMAGE_BYTES / 2**20:.0f} MiB of images a dispatch carries"
    )
    with tempfile.TemporaryDirectory(prefix="rb-img-") as temp:
        folder = Path(temp)
        on_disk = _photo(folder / "photo.png", 4000, 3000)
        times, sent, size, grown = trio.run(_measure, folder, args.reads)
    how = f"read of a 4000x3000 PNG ({on_disk / 2**20:.1f} MiB on disk), {args.reads} times"
    figures = [
        Figure(
            "image.read_ms", "read of a 4000x3000 PNG", statistics.median(times), "ms", "lower", READ_TARGET_MS,
            f"{how}; median", [f"min {min(times):.0f} ms, max {max(times):.0f} ms"],
        ),
        Figure(
            "image.rss_growth_mib", "read of a 4000x3000 PNG: peak RSS growth", grown, "MiB", "lower", RSS_TARGET_MIB,
            f"{how}; VmHWM before and after",
        ),
        Figure(
            "image.sent_kb", "read of a 4000x3000 PNG: bytes sent", sent / 1024, "KB", "lower", None,
            f"the image part the model is sent: {size[0]}x{size[1]}", informational=True,
        ),
    ]
    report("image_read", figures, args, context)


if __name__ == "__main__":
    main()
