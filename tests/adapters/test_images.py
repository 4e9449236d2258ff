"""Image parts: PNG bytes read as strictly as the providers read them, written deterministically, and
the providers' published image-cost rules and limits checked against the worked examples they publish."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import random
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnstate.adapters import image_costs, images
from turnstate.adapters.image_costs import (
    ANTHROPIC_IMAGE_LIMITS,
    GEMINI_IMAGE_LIMITS,
    OPENAI_IMAGE_LIMITS,
    anthropic_image_tokens,
    anthropic_resized,
    gemini_resolution_tokens,
    gemini_tile_tokens,
    openai_image_tokens,
)
from turnstate.adapters.images import (
    ImageError,
    ImagePart,
    decode_png,
    encode_indexed_png,
    encode_png,
    parse_data_url,
)

# -- PNGs built here, independently of the module's writer ----------------------------------------------


def chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def ihdr(width, height, bit_depth=8, colour_type=2, interlace=0):
    return chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, bit_depth, colour_type, 0, 0, interlace))


def png(*chunks: bytes) -> bytes:
    return images.PNG_SIGNATURE + b"".join(chunks) + chunk(b"IEND", b"")


def idat(scanlines: bytes) -> bytes:
    return chunk(b"IDAT", zlib.compress(scanlines))


def paeth(left, up, up_left):
    estimate = left + up - up_left
    distances = [abs(estimate - left), abs(estimate - up), abs(estimate - up_left)]
    return (left, up, up_left)[distances.index(min(distances))]


def filtered(kind, line, previous, step):
    """One scanline filtered with `kind` as the PNG specification's section 9.2 defines each filter."""
    out = bytearray([kind])
    for i, sample in enumerate(line):
        left = line[i - step] if i >= step else 0
        up_left = previous[i - step] if i >= step else 0
        predictor = (0, left, previous[i], (left + previous[i]) // 2, paeth(left, previous[i], up_left))[kind]
        out.append((sample - predictor) & 0xFF)
    return bytes(out)


def rgb_png(width=3, height=2):
    """A good 3 x 2 RGB PNG, one IDAT: the base every corruption below starts from."""
    return png(ihdr(width, height), idat(b"".join(b"\x00" + bytes(range(3 * width)) for _ in range(height))))


def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


# -- round trips and determinism -------------------------------------------------------------------------

SAMPLES = st.integers(0, 255)
PIXELS = st.tuples(SAMPLES, SAMPLES, SAMPLES)
PICTURES = st.tuples(st.integers(1, 20), st.integers(1, 20)).flatmap(
    lambda size: st.lists(
        st.lists(PIXELS | st.sampled_from([(0, 0, 0), (255, 255, 255)]), min_size=size[0], max_size=size[0]),
        min_size=size[1],
        max_size=size[1],
    )
)


@settings(derandomize=True, max_examples=150, deadline=None)
@given(PICTURES)
def test_an_image_encoded_and_decoded_is_the_same_pixels(rows):
    picture = decode_png(encode_png(len(rows[0]), len(rows), rows))
    assert (picture.width, picture.height) == (len(rows[0]), len(rows))
    assert [list(row) for row in picture.rows] == rows


def test_encoding_the_same_pixels_twice_gives_the_same_bytes():
    rows = [[(x * 16, y * 16, 7) for x in range(12)] for y in range(9)]
    first, second = encode_png(12, 9, rows), encode_png(12, 9, [list(row) for row in rows])
    assert first == second
    assert ImagePart(first).digest == ImagePart(second).digest


@pytest.mark.parametrize(("colours", "colour_type"), [(256, images.PALETTE), (257, images.TRUECOLOUR)])
def test_at_most_256_colours_are_written_as_a_palette_png_and_more_as_truecolour(colours, colour_type):
    rows = [[(i % 256, i // 256, 0) for i in range(colours)]]
    data = encode_png(colours, 1, rows)
    assert data[25] == colour_type  # IHDR's colour type byte
    assert list(decode_png(data).rows[0]) == rows[0]


def test_an_indexed_png_keeps_its_palette_whole_and_in_order():
    palette = [(9, 9, 9), (1, 2, 3), (200, 100, 50)]
    data = encode_indexed_png(2, 1, palette, [bytes([2, 1])])
    plte = data.index(b"PLTE")
    assert data[plte + 4 : plte + 4 + 9] == bytes([9, 9, 9, 1, 2, 3, 200, 100, 50])
    assert decode_png(data).rows == (((200, 100, 50), (1, 2, 3)),)


COLOUR_TYPES = [(images.GREY, 1), (images.GREY_ALPHA, 2), (images.TRUECOLOUR, 3), (images.TRUECOLOUR_ALPHA, 4)]


def expected_pixel(colour_type, samples):
    if colour_type == images.GREY:
        return (samples[0],) * 3
    if colour_type == images.GREY_ALPHA:
        return (samples[0],) * 3 + (samples[1],)
    return tuple(samples)


ROW_FILTERS = {"none": (0,) * 5, "sub": (1,) * 5, "up": (2,) * 5, "average": (3,) * 5, "paeth": (4,) * 5}
ROW_FILTERS["mixed"] = (4, 0, 3, 1, 2)  # each filter reading a row that another filter wrote


@pytest.mark.parametrize("row_filters", ROW_FILTERS.values(), ids=ROW_FILTERS.keys())
@pytest.mark.parametrize(("colour_type", "channels"), COLOUR_TYPES, ids=["grey", "grey_alpha", "rgb", "rgba"])
def test_every_row_filter_of_every_8_bit_colour_type_decodes_to_the_pixels_it_filtered(
    row_filters, colour_type, channels
):
    rng = random.Random(f"{row_filters}:{colour_type}")
    width, height = 7, len(row_filters)
    lines = [bytes(rng.randrange(256) for _ in range(width * channels)) for _ in range(height)]
    previous = bytes(width * channels)
    scanlines = b""
    for kind, line in zip(row_filters, lines, strict=True):
        scanlines += filtered(kind, line, previous, channels)
        previous = line
    picture = decode_png(png(ihdr(width, height, colour_type=colour_type), idat(scanlines)))
    expected = [
        [expected_pixel(colour_type, line[x * channels : (x + 1) * channels]) for x in range(width)] for line in lines
    ]
    assert [list(row) for row in picture.rows] == expected


@pytest.mark.parametrize("bits", [1, 2, 4])
def test_sub_byte_palette_rows_unpack_most_significant_bits_first(bits):
    colours = 1 << bits
    palette = [(i, 255 - i, i * 3 % 256) for i in range(colours)]
    indices = [i % colours for i in range(11)]
    packed = int("".join(format(i, f"0{bits}b") for i in indices).ljust(-(-11 * bits // 8) * 8, "0"), 2)
    line = packed.to_bytes(-(-11 * bits // 8), "big")
    data = png(ihdr(11, 1, bits, images.PALETTE), chunk(b"PLTE", bytes(sum(palette, ()))), idat(b"\x00" + line))
    assert list(decode_png(data).rows[0]) == [palette[i] for i in indices]


def test_sub_byte_greyscale_is_widened_to_0_255():
    data = png(ihdr(4, 1, 2, images.GREY), idat(b"\x00" + bytes([0b00011011])))
    assert decode_png(data).rows == (((0, 0, 0), (85, 85, 85), (170, 170, 170), (255, 255, 255)),)


def test_an_image_part_reads_its_size_from_the_ihdr_and_is_addressed_by_its_sha256():
    data = rgb_png(3, 2)
    part = ImagePart(data)
    assert (part.width, part.height, part.media_type) == (3, 2, "image/png")
    assert part.digest == images.digest(data) == hashlib.sha256(data).hexdigest()
    assert "data" not in repr(part) and "width=3" in repr(part)


def test_an_image_part_round_trips_through_base64_and_a_data_url():
    part = ImagePart(rgb_png())
    assert part.data_url == "data:image/png;base64," + base64.b64encode(part.data).decode()
    assert ImagePart.from_base64(part.base64) == part
    assert ImagePart.from_data_url(part.data_url) == part
    assert parse_data_url(images.data_url(part.data)) == ("image/png", part.data)


def test_an_image_part_is_never_made_from_bytes_that_do_not_decode():
    with pytest.raises(ImageError, match="bad CRC"):
        ImagePart(flip(rgb_png(), 20))
    with pytest.raises(TypeError, match="holds bytes"):
        ImagePart(bytearray(rgb_png()))  # type: ignore[arg-type]


# -- refusals: each names the problem and the fix ---------------------------------------------------------

GOOD = rgb_png()
IDAT_AT = GOOD.index(b"IDAT")
HALF_STREAM = zlib.compress(b"\x00" + bytes(9) + b"\x00" + bytes(9))[:8]
REFUSED_PNGS = {
    "a_wrong_signature_is_refused_as_not_a_png": (b"GIF89a" + GOOD[6:], "not a PNG: the first 8 bytes"),
    "a_bad_crc_is_refused_naming_the_chunk_idat": (flip(GOOD, IDAT_AT + 6), "bad CRC in chunk IDAT"),
    "a_bad_crc_is_refused_naming_the_chunk_ihdr": (flip(GOOD, 18), "bad CRC in chunk IHDR"),
    "a_file_cut_inside_a_chunk_is_refused_as_truncated": (GOOD[:-5], "truncated"),
    "an_idat_stream_cut_short_is_refused_as_truncated": (png(ihdr(3, 2), chunk(b"IDAT", HALF_STREAM)), "truncated"),
    "a_file_without_iend_is_refused_naming_iend": (GOOD[:-12], "missing IEND"),
    "bytes_after_iend_are_refused": (GOOD + b"\x00", "1 bytes after IEND"),
    "an_interlaced_png_is_refused_as_unsupported": (png(ihdr(3, 2, interlace=1), idat(b"")), "interlaced (Adam7)"),
    "a_zero_width_is_refused": (png(ihdr(0, 2), idat(b"")), "zero width or height (0 x 2)"),
    "a_16_bit_png_is_refused_as_unsupported": (png(ihdr(3, 2, 16), idat(b"")), "16-bit PNG"),
    "an_impossible_bit_depth_is_refused": (png(ihdr(3, 2, 4, images.TRUECOLOUR), idat(b"")), "not a PNG combination"),
    "an_ihdr_that_is_not_first_is_refused": (png(chunk(b"tEXt", b"a\x00b"), ihdr(3, 2), idat(b"")), "IHDR is not"),
    "a_png_without_idat_is_refused": (png(ihdr(3, 2)), "no IDAT chunk"),
    "idat_chunks_apart_are_refused": (
        png(ihdr(3, 2), idat(b"\x00" * 20), chunk(b"tEXt", b"a\x00b"), idat(b"")),
        "IDAT chunks are not consecutive",
    ),
    "a_palette_image_without_plte_is_refused": (png(ihdr(3, 2, 8, images.PALETTE), idat(bytes(8))), "without a PLTE"),
    "a_palette_index_past_the_plte_is_refused": (
        png(ihdr(2, 1, 8, images.PALETTE), chunk(b"PLTE", bytes(6)), idat(b"\x00\x01\x05")),
        "palette index 5 of a 2-colour PLTE",
    ),
    "an_unknown_critical_chunk_is_refused_by_name": (
        png(ihdr(3, 2), chunk(b"ABCD", b""), idat(bytes(20))),
        "unknown critical chunk ABCD",
    ),
    "an_unknown_row_filter_is_refused_naming_the_row": (png(ihdr(3, 2), idat(bytes(10) + b"\x05" + bytes(9))), "row 1"),
    "more_pixel_data_than_the_ihdr_promises_is_refused": (png(ihdr(3, 2), idat(bytes(21))), "more than the 20 bytes"),
    "idat_data_that_does_not_inflate_is_refused": (png(ihdr(3, 2), chunk(b"IDAT", b"not zlib")), "does not inflate"),
    "a_png_too_large_to_decode_here_is_refused": (png(ihdr(5000, 5000), idat(b"")), "over 16777216 pixels"),
}


@pytest.mark.parametrize(("data", "problem"), REFUSED_PNGS.values(), ids=REFUSED_PNGS.keys())
def test_a_bad_png(data, problem):
    with pytest.raises(ImageError) as refused:
        decode_png(data)
    assert problem in str(refused.value)
    assert "; fix: " in str(refused.value)


ONE_PIXEL = base64.b64encode(rgb_png(1, 1)).decode()
REFUSED_URLS = {
    "a_jpeg_media_type_is_refused_naming_it": (f"data:image/jpeg;base64,{ONE_PIXEL}", "media type 'image/jpeg'"),
    "a_url_that_is_not_a_data_url_is_refused": ("https://example.com/frame.png", "not a data URL"),
    "a_data_url_without_base64_is_refused": ("data:image/png,abc", "data:<media type>;base64,<data>"),
    "characters_outside_base64_are_refused": ("data:image/png;base64,@@@@", "not valid base64"),
    "base64_without_its_padding_is_refused": ("data:image/png;base64,YWI", "not valid base64"),  # "YWI=" is b"ab"
    "base64_with_a_line_break_is_refused": (f"data:image/png;base64,{ONE_PIXEL[:8]}\n{ONE_PIXEL[8:]}", "valid base64"),
    "base64_with_stray_bits_is_refused_as_not_canonical": ("data:image/png;base64,QR==", "not canonical base64"),
    "an_empty_payload_is_refused": ("data:image/png;base64,", "empty"),
}


@pytest.mark.parametrize(("url", "problem"), REFUSED_URLS.values(), ids=REFUSED_URLS.keys())
def test_a_bad_data_url(url, problem):
    with pytest.raises(ImageError) as refused:
        parse_data_url(url)
    assert problem in str(refused.value)
    assert "; fix: " in str(refused.value)


def test_a_data_url_whose_bytes_are_not_a_png_is_refused_as_not_a_png():
    with pytest.raises(ImageError, match="not a PNG"):
        ImagePart.from_data_url("data:image/png;base64," + base64.b64encode(b"GIF89a....").decode())


# -- token estimates against the providers' worked examples --------------------------------------------------

# https://platform.openai.com/docs/guides/images-vision#calculating-costs, GPT-4o-class models:
# "A 1024 x 1024 square image in detail: high mode costs 765 tokens", "A 2048 x 4096 image in detail: high
# mode costs 1105 tokens", "A 4096 x 8192 image in detail: low most costs 85 tokens".
OPENAI_EXAMPLES = [(1024, 1024, "high", 765), (2048, 4096, "high", 1105), (4096, 8192, "low", 85)]


@pytest.mark.parametrize(("width", "height", "detail", "tokens"), OPENAI_EXAMPLES)
def test_openai_tile_rule_gives_the_guides_worked_examples(width, height, detail, tokens):
    assert openai_image_tokens(width, height, detail) == tokens


def test_openai_auto_detail_is_counted_as_high():
    assert openai_image_tokens(2048, 4096, "auto") == openai_image_tokens(2048, 4096, "high") == 1105


def test_openai_scaling_only_shrinks_so_a_512_px_frame_is_one_tile():
    assert openai_image_tokens(512, 512, "high") == 85 + 170


def test_openai_tile_rule_takes_another_models_base_and_tile_tokens():
    assert openai_image_tokens(1024, 1024, "high", base_tokens=70, tile_tokens=140) == 70 + 4 * 140


def test_openai_refuses_an_unknown_detail():
    with pytest.raises(ValueError, match="low, high or auto"):
        openai_image_tokens(10, 10, "original")  # type: ignore[arg-type]


# https://platform.claude.com/docs/en/build-with-claude/vision, "Calculate image costs": 200x200 px
# (0.04 megapixels) ~54 tokens, 1000x1000 px (1 megapixel) ~1334, 1092x1092 px (1.19 megapixels) ~1590.
@pytest.mark.parametrize(("side", "tokens"), [(200, 54), (1000, 1334), (1092, 1590)])
def test_anthropic_area_rule_gives_the_guides_worked_examples(side, tokens):
    assert anthropic_image_tokens(side, side) == tokens


# The same guide's table of the largest sizes the API does not resize, for five aspect ratios.
NOT_RESIZED = [(1092, 1092), (951, 1268), (896, 1344), (819, 1456), (784, 1568)]


@pytest.mark.parametrize("size", NOT_RESIZED, ids=[f"{w}x{h}" for w, h in NOT_RESIZED])
def test_anthropic_reads_the_guides_largest_unresized_sizes_as_sent(size):
    assert anthropic_resized(*size) == size


def test_anthropic_resizes_a_larger_image_to_the_largest_size_within_its_limits():
    assert anthropic_resized(1093, 1093) == (1092, 1092)
    assert anthropic_resized(2000, 2000) == (1092, 1092)
    assert anthropic_resized(4000, 1000) == (1568, 392)
    assert anthropic_image_tokens(4000, 4000) == anthropic_image_tokens(1092, 1092) == 1590


@settings(derandomize=True, max_examples=200, deadline=None)
@given(st.integers(1, 9000), st.integers(1, 9000))
def test_anthropics_resize_fits_both_limits_and_no_longer_long_edge_would(width, height):
    resized = anthropic_resized(width, height)
    assert image_costs.fits_claude(*resized)
    assert resized[0] <= width and resized[1] <= height
    if resized != (width, height):
        long_side, short_side = max(width, height), min(width, height)
        longer = max(resized) + 1
        assert longer > long_side or not image_costs.fits_claude(longer, max(1, short_side * longer // long_side))


# https://ai.google.dev/gemini-api/docs/tokens: both sides at most 384 px is 258 tokens; larger images
# are cut into 768 x 768 px tiles of 258 tokens each.
GEMINI_EXAMPLES = [
    (384, 384, 258),
    (300, 20, 258),
    (385, 384, 258),
    (768, 768, 258),
    (769, 768, 516),
    (1536, 1537, 1548),
]


@pytest.mark.parametrize(("width", "height", "tokens"), GEMINI_EXAMPLES)
def test_gemini_tile_rule_counts_258_an_image_up_to_384_px_and_258_a_768_px_tile_beyond(width, height, tokens):
    assert gemini_tile_tokens(width, height) == tokens


@pytest.mark.parametrize(
    ("resolution", "tokens"), [("low", 280), ("medium", 560), ("high", 1120), ("ultra_high", 2240), (None, 1120)]
)
def test_gemini_3_counts_an_image_at_its_media_resolutions_budget_and_high_by_default(resolution, tokens):
    assert gemini_resolution_tokens(resolution) == tokens


def test_gemini_refuses_an_unknown_media_resolution():
    with pytest.raises(ValueError, match="media resolution"):
        gemini_resolution_tokens("extreme")  # type: ignore[arg-type]


# -- limits -------------------------------------------------------------------------------------------------

LIMITS = [OPENAI_IMAGE_LIMITS, ANTHROPIC_IMAGE_LIMITS, GEMINI_IMAGE_LIMITS]


def frame_sized(width, height):
    return ImagePart(encode_indexed_png(width, height, [(0, 0, 0)], [bytes(width)] * height))


@pytest.mark.parametrize("limits", LIMITS, ids=lambda limits: limits.provider)
def test_a_512_px_frame_passes_every_providers_limits_and_each_limit_names_its_source(limits):
    limits.check(frame_sized(512, 512))
    assert "image/png" in limits.media_types
    assert limits.source.startswith("https://")


def test_anthropic_lowers_the_side_limit_to_2000_px_above_20_images():
    tall = frame_sized(1, 2001)
    ANTHROPIC_IMAGE_LIMITS.check(tall, images_in_request=20)
    with pytest.raises(ImageError, match="at most 2000 px a side"):
        ANTHROPIC_IMAGE_LIMITS.check(tall, images_in_request=21)


def test_anthropic_counts_an_images_size_in_base64_characters():
    part = frame_sized(64, 64)
    at_file_size = dataclasses.replace(ANTHROPIC_IMAGE_LIMITS, max_image_bytes=len(part.data))
    with pytest.raises(ImageError, match="base64 characters"):
        at_file_size.check(part)
    dataclasses.replace(at_file_size, counts_base64=False).check(part)


def test_a_request_over_a_providers_image_count_is_refused():
    with pytest.raises(ImageError, match="at most 500 images a request"):
        OPENAI_IMAGE_LIMITS.check(frame_sized(8, 8), images_in_request=501)
