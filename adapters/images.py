"""Image parts: PNG bytes checked as strictly as the providers check them, and the providers' image facts.

The harness sends frames as PNG images and the embedded local provider reads them back; both sides use
this module, so an image the harness builds is exactly an image the local provider accepts, and the
token estimate of an image is the same number on both sides of the wire.

Rules it keeps:
1. An `ImagePart` is only ever made from bytes that decode: the PNG signature, every chunk's length and
   CRC, IHDR first with sane fields, PLTE where a palette needs one, consecutive IDATs that inflate to
   exactly the rows IHDR promises, valid row filters, palette indices in range, IEND last with nothing
   after it. A half-checked image would fail later, at a real provider, far from its cause.
2. Decoded are non-interlaced greyscale, grey+alpha, RGB, RGBA and palette images of 8 bits a sample,
   and greyscale and palette ones of 1, 2 or 4 (Pillow writes a 16-colour palette image at 4 bits):
   everything this harness draws and every common encoder's default. Interlaced (Adam7) and 16-bit
   images and images over MAX_DECODE_PIXELS are refused by name (code nobody here needs, or pure-Python
   decoding too slow to be worth it), never misread. Ancillary chunks (tRNS, gAMA, text) are ignored:
   pixels read as stored.
3. Every refusal is an `ImageError` whose message names the problem and the fix ("...; fix: ...").
4. `encode_png` is deterministic: the same pixels give the same bytes (no timestamps, one fixed
   compression level, palette in order of first appearance), so images dedupe by `digest`.
5. Base64 and data URLs are parsed strictly (canonical base64 only, the media type named exactly), as
   a strict counterpart of the real APIs must.
6. The providers' published image-cost rules and limits are adapters/image_costs.py's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
import zlib
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

PNG_MEDIA_TYPE = "image/png"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_DECODE_PIXELS = 4096 * 4096  # pure-Python decoding is linear in pixels: beyond this it takes seconds
COMPRESSION_LEVEL = 9  # fixed, so encode_png's bytes depend on the pixels alone

RGB = tuple[int, int, int]
Pixel = tuple[int, ...]  # (r, g, b) for an opaque image, (r, g, b, a) for one with an alpha channel

GREY, TRUECOLOUR, PALETTE, GREY_ALPHA, TRUECOLOUR_ALPHA = 0, 2, 3, 4, 6
CHANNELS = {GREY: 1, TRUECOLOUR: 3, PALETTE: 1, GREY_ALPHA: 2, TRUECOLOUR_ALPHA: 4}
BIT_DEPTHS = {  # the PNG specification's table 11.1
    GREY: (1, 2, 4, 8, 16),
    TRUECOLOUR: (8, 16),
    PALETTE: (1, 2, 4, 8),
    GREY_ALPHA: (8, 16),
    TRUECOLOUR_ALPHA: (8, 16),
}
CRITICAL_CHUNKS = frozenset({b"IHDR", b"PLTE", b"IDAT", b"IEND"})
MAX_CHUNK_LENGTH = 2**31 - 1


class ImageError(ValueError):
    """An image (or its base64, or its data URL) that cannot be sent or read; the message names the
    problem and the fix."""


def refuse(problem: str, fix: str) -> ImageError:
    return ImageError(f"{problem}; fix: {fix}")


CORRUPT_FIX = "send the PNG bytes exactly as the encoder wrote them (re-encode the image if they were damaged)"


def corrupt(problem: str) -> ImageError:
    return refuse(f"a corrupt PNG: {problem}", CORRUPT_FIX)


# -- reading -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Header:
    """The IHDR fields this module decodes by."""

    width: int
    height: int
    bit_depth: int
    colour_type: int

    @property
    def stride(self) -> int:
        """Bytes per row (the filter byte not counted); rows of sub-byte samples end on a whole byte."""
        return -(-self.width * CHANNELS[self.colour_type] * self.bit_depth // 8)

    @property
    def filter_step(self) -> int:
        """The bytes a filter looks back: one pixel, or one byte when a pixel is smaller."""
        return max(1, CHANNELS[self.colour_type] * self.bit_depth // 8)


@dataclass(frozen=True)
class DecodedPng:
    """A PNG after inflate and unfilter: its header, its palette (colour type 3) and its rows of samples."""

    header: Header
    palette: tuple[RGB, ...]
    rows: tuple[bytes, ...]


def chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """The (type, body) of every chunk up to IEND, each length and CRC checked."""
    if not data.startswith(PNG_SIGNATURE):
        raise refuse("not a PNG: the first 8 bytes are not the PNG signature", f"send PNG bytes ({PNG_MEDIA_TYPE})")
    found: list[tuple[bytes, bytes]] = []
    position = len(PNG_SIGNATURE)
    while position < len(data):
        if position + 12 > len(data):
            raise corrupt(f"truncated: {len(data) - position} bytes after the last chunk are not a whole chunk")
        length = int.from_bytes(data[position : position + 4], "big")
        kind = data[position + 4 : position + 8]
        if not kind.isalpha():
            raise corrupt(f"chunk type {kind!r} at byte {position + 4} is not four ASCII letters")
        name = kind.decode("ascii")
        end = position + 12 + length
        if length > MAX_CHUNK_LENGTH:
            raise corrupt(f"chunk {name} declares {length} bytes, over the 2^31 - 1 a chunk may hold")
        if end > len(data):
            raise corrupt(f"truncated: chunk {name} declares {length} bytes but {len(data) - position - 12} remain")
        body = data[position + 8 : end - 4]
        if zlib.crc32(kind + body) != int.from_bytes(data[end - 4 : end], "big"):
            raise corrupt(f"bad CRC in chunk {name}")
        found.append((kind, body))
        position = end
        if kind == b"IEND":
            if position != len(data):
                raise corrupt(f"{len(data) - position} bytes after IEND")
            return found
    raise corrupt("missing IEND (the file ends before its last chunk)")


def read_header(body: bytes) -> Header:
    if len(body) != 13:
        raise corrupt(f"IHDR holds {len(body)} bytes, not 13")
    width, height, bit_depth, colour_type, compression, filter_method, interlace = struct.unpack(">IIBBBBB", body)
    if width == 0 or height == 0:
        raise corrupt(f"zero width or height ({width} x {height})")
    if width > MAX_CHUNK_LENGTH or height > MAX_CHUNK_LENGTH:
        raise corrupt(f"width or height over 2^31 - 1 ({width} x {height})")
    if bit_depth not in BIT_DEPTHS.get(colour_type, ()):
        raise corrupt(f"colour type {colour_type} with bit depth {bit_depth} is not a PNG combination")
    if compression != 0 or filter_method != 0 or interlace not in (0, 1):
        raise corrupt(f"unknown compression {compression}, filter method {filter_method} or interlace {interlace}")
    if interlace == 1:
        raise refuse("an interlaced (Adam7) PNG is not supported", "save the image non-interlaced")
    if bit_depth == 16:
        raise refuse(f"a 16-bit PNG (colour type {colour_type}) is not supported", "save it with 8 bits a sample")
    if width * height > MAX_DECODE_PIXELS:
        raise refuse(f"a {width} x {height} PNG is over {MAX_DECODE_PIXELS} pixels", "send a smaller image")
    return Header(width, height, bit_depth, colour_type)


def read_palette(body: bytes, header: Header) -> tuple[RGB, ...]:
    if header.colour_type in (GREY, GREY_ALPHA):
        raise corrupt(f"a PLTE chunk in a greyscale image (colour type {header.colour_type})")
    if len(body) % 3 or not 1 <= len(body) // 3 <= 256:
        raise corrupt(f"PLTE holds {len(body)} bytes, not 1 to 256 entries of 3")
    return tuple((body[i], body[i + 1], body[i + 2]) for i in range(0, len(body), 3))


def read_png(data: bytes) -> DecodedPng:
    """Check `data` as rule 1 says and return its rows of samples; raises ImageError."""
    found = chunks(data)
    kinds = [kind for kind, _ in found]
    if kinds[0] != b"IHDR" or kinds.count(b"IHDR") != 1:
        raise corrupt("IHDR is not the first and only header chunk")
    header = read_header(found[0][1])
    unknown = sorted({kind.decode() for kind in kinds if kind[:1].isupper() and kind not in CRITICAL_CHUNKS})
    if unknown:
        raise corrupt(f"unknown critical chunk {', '.join(unknown)}")
    if b"IDAT" not in kinds:
        raise corrupt("no IDAT chunk (the image has no pixel data)")
    first_data = kinds.index(b"IDAT")
    data_run = kinds[first_data : len(kinds) - kinds[::-1].index(b"IDAT")]
    if set(data_run) != {b"IDAT"}:
        raise corrupt("IDAT chunks are not consecutive")
    palette: tuple[RGB, ...] = ()
    if b"PLTE" in kinds:
        if kinds.count(b"PLTE") != 1 or kinds.index(b"PLTE") > first_data:
            raise corrupt("PLTE is repeated or comes after IDAT")
        palette = read_palette(found[kinds.index(b"PLTE")][1], header)
    elif header.colour_type == PALETTE:
        raise corrupt("a palette image (colour type 3) without a PLTE chunk")
    raw = inflate(b"".join(body for kind, body in found if kind == b"IDAT"), header.height * (header.stride + 1))
    rows = tuple(samples(row, header) for row in unfilter(raw, header))
    if palette and header.colour_type == PALETTE:
        for y, row in enumerate(rows):
            if max(row) >= len(palette):
                raise corrupt(f"row {y} uses palette index {max(row)} of a {len(palette)}-colour PLTE")
    return DecodedPng(header, palette, rows)


def inflate(compressed: bytes, expected: int) -> bytes:
    """The IDAT stream inflated, exactly `expected` bytes long (never more is inflated: no zip bomb)."""
    stream = zlib.decompressobj()
    try:
        raw = stream.decompress(compressed, expected + 1)
    except zlib.error as error:
        raise corrupt(f"the IDAT data does not inflate ({error})") from None
    if len(raw) > expected:
        raise corrupt(f"the IDAT data inflates to more than the {expected} bytes IHDR promises")
    if not stream.eof:
        raise corrupt(f"truncated: the IDAT zlib stream ends unfinished, {len(raw)} of {expected} bytes inflated")
    if len(raw) < expected or stream.unused_data:
        raise corrupt(f"the IDAT data holds {len(raw)} bytes, not the {expected} IHDR promises, or trails bytes")
    return raw


def paeth(left: int, up: int, up_left: int) -> int:
    estimate = left + up - up_left
    to_left, to_up, to_up_left = abs(estimate - left), abs(estimate - up), abs(estimate - up_left)
    if to_left <= to_up and to_left <= to_up_left:
        return left
    return up if to_up <= to_up_left else up_left


def unfilter(raw: bytes, header: Header) -> tuple[bytes, ...]:
    """Undo each row's filter (None, Sub, Up, Average, Paeth: PNG specification section 9)."""
    stride, step = header.stride, header.filter_step
    previous = bytes(stride)
    rows = []
    for y in range(header.height):
        start = y * (stride + 1)
        kind, line = raw[start], raw[start + 1 : start + 1 + stride]
        if kind == 0:
            row = line
        elif kind == 2:
            row = bytes((a + b) & 0xFF for a, b in zip(line, previous, strict=True))
        elif kind in (1, 3, 4):
            current = bytearray(line)
            for i in range(stride):
                left = current[i - step] if i >= step else 0
                up_left = previous[i - step] if i >= step else 0
                if kind == 1:
                    predictor = left
                elif kind == 3:
                    predictor = (left + previous[i]) >> 1
                else:
                    predictor = paeth(left, previous[i], up_left)
                current[i] = (current[i] + predictor) & 0xFF
            row = bytes(current)
        else:
            raise corrupt(f"row {y} has filter type {kind} (0 to 4 exist)")
        rows.append(row)
        previous = row
    return tuple(rows)


def samples(row: bytes, header: Header) -> bytes:
    """A row's samples one byte each: sub-byte samples (1, 2 or 4 bits, greyscale or palette) unpacked,
    most significant bits first, and greyscale ones widened to 0-255."""
    bits = header.bit_depth
    if bits == 8:
        return row
    mask = (1 << bits) - 1
    shifts = range(8 - bits, -1, -bits)
    unpacked = bytes((byte >> shift) & mask for byte in row for shift in shifts)[: header.width]
    if header.colour_type == GREY:
        return bytes(value * 255 // mask for value in unpacked)
    return unpacked


@dataclass(frozen=True)
class Picture:
    """A decoded image: its size and its rows of pixels, RGB tuples, or RGBA where the PNG has alpha."""

    width: int
    height: int
    rows: tuple[tuple[Pixel, ...], ...]


def decode_png(data: bytes) -> Picture:
    """The pixels of a PNG (the local provider reads a frame back with this); raises ImageError."""
    png = read_png(data)
    kind = png.header.colour_type
    pixel_rows: list[tuple[Pixel, ...]] = []
    for row in png.rows:
        if kind == PALETTE:
            pixel_rows.append(tuple(png.palette[index] for index in row))
        elif kind == GREY:
            pixel_rows.append(tuple((grey, grey, grey) for grey in row))
        elif kind == GREY_ALPHA:
            pixel_rows.append(tuple(zip(row[0::2], row[0::2], row[0::2], row[1::2], strict=True)))
        elif kind == TRUECOLOUR:
            pixel_rows.append(tuple(zip(row[0::3], row[1::3], row[2::3], strict=True)))
        else:
            pixel_rows.append(tuple(zip(row[0::4], row[1::4], row[2::4], row[3::4], strict=True)))
    return Picture(png.header.width, png.header.height, tuple(pixel_rows))


# -- writing -------------------------------------------------------------------------------------------


def chunk(kind: bytes, body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")


def png_bytes(width: int, height: int, colour_type: int, scanlines: Iterable[bytes], palette: bytes = b"") -> bytes:
    """A PNG of 8-bit rows, each written with filter None (the choice the PNG book gives for palette
    images; repeated rows, as a scaled frame's are, compress to almost nothing anyway)."""
    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    pixels = zlib.compress(b"".join(b"\x00" + line for line in scanlines), COMPRESSION_LEVEL)
    body = chunk(b"IHDR", header) + (chunk(b"PLTE", palette) if palette else b"") + chunk(b"IDAT", pixels)
    return PNG_SIGNATURE + body + chunk(b"IEND", b"")


def check_size(width: int, height: int, rows: Sequence[Sequence[object]]) -> None:
    if width < 1 or height < 1 or width * height > MAX_DECODE_PIXELS:
        raise ValueError(f"an image is 1 to {MAX_DECODE_PIXELS} pixels, not {width} x {height}")
    if len(rows) != height or any(len(row) != width for row in rows):
        raise ValueError(f"the rows are not {height} rows of {width} pixels")


def encode_indexed_png(width: int, height: int, palette: Sequence[RGB], index_rows: Sequence[bytes]) -> bytes:
    """A palette PNG: `index_rows` are rows of palette indices, one byte a pixel. The palette is written
    whole and in the order given, so a fixed palette makes a pixel's index its colour's index."""
    check_size(width, height, index_rows)
    if not 1 <= len(palette) <= 256 or any(not 0 <= sample <= 255 for colour in palette for sample in colour):
        raise ValueError(f"a palette is 1 to 256 colours of 0-255 samples, not {len(palette)} colours")
    if any(max(row) >= len(palette) for row in index_rows):
        raise ValueError(f"an index is beyond the {len(palette)}-colour palette")
    return png_bytes(width, height, PALETTE, index_rows, bytes(sample for colour in palette for sample in colour))


def encode_png(width: int, height: int, rgb_rows: Sequence[Sequence[RGB]]) -> bytes:
    """A PNG of RGB pixels, indexed when it has at most 256 colours (palette in order of first
    appearance), else truecolour; the same pixels always give the same bytes (rule 4)."""
    check_size(width, height, rgb_rows)
    if any(len(pixel) != 3 or not all(0 <= sample <= 255 for sample in pixel) for row in rgb_rows for pixel in row):
        raise ValueError("a pixel is an (r, g, b) of three 0-255 samples")
    index: dict[RGB, int] = {}
    for row in rgb_rows:
        for red, green, blue in row:
            index.setdefault((red, green, blue), len(index))
    if len(index) <= 256:
        index_rows = [bytes(index[(red, green, blue)] for red, green, blue in row) for row in rgb_rows]
        return encode_indexed_png(width, height, list(index), index_rows)
    return png_bytes(
        width, height, TRUECOLOUR, (bytes(sample for pixel in row for sample in pixel) for row in rgb_rows)
    )


# -- content addressing, base64 and data URLs ------------------------------------------------------------


def digest(data: bytes) -> str:
    """The sha256 of the bytes, in hex: an image's content address."""
    return hashlib.sha256(data).hexdigest()


BASE64_FIX = "send standard base64 (A-Z a-z 0-9 + /, '=' padding, no whitespace) of the image bytes"


def decode_base64(text: str) -> bytes:
    """Canonical base64 only: what encoding the bytes again gives back exactly."""
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise refuse(f"the image data is not valid base64 ({error})", BASE64_FIX) from None
    if not data:
        raise refuse("the image data is empty", "send the image's base64")
    if base64.b64encode(data).decode("ascii") != text:
        raise refuse("the image data is not canonical base64 (stray bits in its last character)", BASE64_FIX)
    return data


def data_url(data: bytes, media_type: str = PNG_MEDIA_TYPE) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def parse_data_url(url: str, accepted: Collection[str] = (PNG_MEDIA_TYPE,)) -> tuple[str, bytes]:
    """(media type, bytes) of a `data:<media type>;base64,<data>` URL whose media type is one of
    `accepted`, named exactly; raises ImageError."""
    if not url.startswith("data:"):
        raise refuse("the image URL is not a data URL", f"send data:{PNG_MEDIA_TYPE};base64,<the image's base64>")
    header, comma, payload = url[len("data:") :].partition(",")
    media_type, _, encoding = header.partition(";")
    if not comma or encoding != "base64":
        raise refuse(f"the data URL does not read data:<media type>;base64,<data> ({header[:40]!r})", BASE64_FIX)
    if media_type not in accepted:
        allowed = ", ".join(sorted(accepted))
        raise refuse(f"the data URL's media type {media_type!r} is not accepted here", f"send one of: {allowed}")
    return media_type, decode_base64(payload)


PNG_HEAD_BASE64_CHARS = 32  # 24 bytes: the signature, IHDR's length and type, then its width and height


def png_size(base64_text: str) -> tuple[int, int]:
    """The width and height a PNG's header declares, read from the first 32 characters of its base64
    without decoding the rest: what a token estimate needs of an image already checked (rule 1)."""
    try:
        head = base64.b64decode(base64_text[:PNG_HEAD_BASE64_CHARS], validate=True)
    except (binascii.Error, ValueError):
        head = b""
    if len(head) < 24 or head[:8] != PNG_SIGNATURE or head[12:16] != b"IHDR":
        raise corrupt("the base64 does not open with a PNG signature and IHDR")
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def data_url_payload(url: str) -> str:
    """The base64 of a `data:<media type>;base64,<data>` URL (everything after its first comma)."""
    return url.partition(",")[2]


@dataclass(frozen=True)
class ImagePart:
    """A checked PNG: made only from bytes that decode (rule 1), so anything holding one can send it.
    Equal images are equal bytes; `digest` addresses them."""

    data: bytes = field(repr=False)
    width: int = field(init=False, compare=False)
    height: int = field(init=False, compare=False)
    media_type: str = field(init=False, default=PNG_MEDIA_TYPE)

    def __post_init__(self) -> None:
        if not isinstance(self.data, bytes):
            raise TypeError(f"an ImagePart holds bytes, not {type(self.data).__name__}")
        header = read_png(self.data).header
        object.__setattr__(self, "width", header.width)
        object.__setattr__(self, "height", header.height)

    @classmethod
    def from_base64(cls, text: str) -> ImagePart:
        return cls(decode_base64(text))

    @classmethod
    def from_data_url(cls, url: str) -> ImagePart:
        return cls(parse_data_url(url)[1])

    @cached_property
    def digest(self) -> str:
        return digest(self.data)

    @cached_property
    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    @property
    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.base64}"
