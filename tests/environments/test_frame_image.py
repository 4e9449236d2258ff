"""Frames drawn as PNGs in the ARC-AGI-3 toolkit's palette, and read back strictly."""

from __future__ import annotations

import random
import sys

import pytest

from turnstate.adapters.images import PNG_SIGNATURE, ImageError, ImagePart, decode_png, encode_png, png_bytes
from turnstate.environments.frame_image import DEFAULT_SCALE, PALETTE, frame_from_png, frame_to_png

# arc_agi.rendering.COLOR_MAP of arc-agi 0.9.9 (PyPI), written out as the toolkit writes it.
TOOLKIT_COLOR_MAP = {
    0: "#FFFFFFFF",
    1: "#CCCCCCFF",
    2: "#999999FF",
    3: "#666666FF",
    4: "#333333FF",
    5: "#000000FF",
    6: "#E53AA3FF",
    7: "#FF7BCCFF",
    8: "#F93C31FF",
    9: "#1E93FFFF",
    10: "#88D8F1FF",
    11: "#FFDC00FF",
    12: "#FF851BFF",
    13: "#921231FF",
    14: "#4FCC30FF",
    15: "#A356D6FF",
}


def rgb(hex_colour: str) -> tuple[int, int, int]:
    digits = hex_colour.lstrip("#")
    return int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16)


def random_frame(columns, rows, seed=0):
    rng = random.Random(seed)
    return tuple(tuple(rng.randrange(16) for _ in range(columns)) for _ in range(rows))


@pytest.mark.parametrize(("scale", "side"), [(1, 64), (2, 64), (8, 64), (13, 20), (32, 16)])
def test_a_frame_drawn_and_read_back_is_the_same_frame(scale, side):
    frame = random_frame(side, side, seed=scale)
    assert frame_from_png(frame_to_png(frame, scale), scale) == frame


def test_a_non_square_grid_reads_back_from_its_grid_size():
    frame = random_frame(9, 7)  # beacon_grid's default board is 9 x 7 cells
    data = frame_to_png(frame, 5)
    assert decode_png(data).width == 45 and decode_png(data).height == 35
    assert frame_from_png(data, grid_size=(9, 7)) == frame


def test_a_64_by_64_frame_at_the_default_scale_is_a_512_px_square_image_part():
    part = ImagePart(frame_to_png(random_frame(64, 64)))
    assert DEFAULT_SCALE == 8 and (part.width, part.height) == (512, 512)
    assert frame_from_png(part.data, grid_size=(64, 64)) == random_frame(64, 64)


def test_the_same_frame_gives_the_same_png_bytes_and_another_scale_other_bytes():
    frame = random_frame(64, 64)
    assert frame_to_png(frame) == frame_to_png([list(row) for row in frame])
    assert frame_to_png(frame, 4) != frame_to_png(frame, 8)


def test_a_pixels_palette_index_is_its_cells_colour():
    data = frame_to_png([[15, 0, 7]], 1)
    plte = data.index(b"PLTE")
    assert data[plte - 4 : plte] == (48).to_bytes(4, "big")  # all 16 colours, in order, whatever the frame uses
    assert data[plte + 4 : plte + 52] == bytes(sample for colour in PALETTE for sample in colour)
    assert decode_png(data).rows == ((PALETTE[15], PALETTE[0], PALETTE[7]),)


def test_the_palette_is_the_toolkits_color_map_as_cited():
    assert PALETTE == tuple(rgb(TOOLKIT_COLOR_MAP[colour]) for colour in range(16))


def test_the_palette_is_the_installed_toolkits_color_map():
    rendering = pytest.importorskip(
        "arc_agi.rendering",
        reason=f"the ARC-AGI-3 toolkit (arc-agi, arcengine) is not installed; it needs Python 3.12+, this is "
        f"{sys.version_info.major}.{sys.version_info.minor}: the palette is checked against the cited constants",
    )
    assert PALETTE == tuple(rendering.hex_to_rgb(rendering.COLOR_MAP[colour]) for colour in range(16))
    assert rendering.COLOR_MAP == TOOLKIT_COLOR_MAP


def test_an_opaque_rgba_picture_of_palette_colours_reads_as_a_frame():
    line = bytes(sample for colour in (PALETTE[3], PALETTE[9]) for sample in (*colour, 0xFF))
    assert frame_from_png(png_bytes(2, 1, 6, [line]), 1) == ((3, 9),)


def off_palette_picture():
    return encode_png(2, 2, [[PALETTE[1], PALETTE[1]], [PALETTE[1], (1, 2, 3)]])


def one_odd_pixel(x, y):
    rows = [[PALETTE[5]] * 4 for _ in range(4)]
    rows[y][x] = PALETTE[6]
    return encode_png(4, 4, rows)


NOT_FRAMES = {
    "a_size_that_is_not_a_multiple_of_the_scale_is_refused": (
        frame_to_png(random_frame(4, 4), 8),
        {"scale": 3},
        "a 32 x 32 px picture is not a whole number of 3 px cells",
    ),
    "a_size_that_is_not_the_grid_given_is_refused": (
        frame_to_png(random_frame(4, 4), 8),
        {"grid_size": (5, 5)},
        "a 32 x 32 px picture is not a 5 x 5 grid of square cells",
    ),
    "a_grid_whose_cells_would_not_be_square_is_refused": (
        frame_to_png(random_frame(4, 4), 8),
        {"grid_size": (4, 8)},
        "not a 4 x 8 grid of square cells",
    ),
    "a_pixel_not_in_the_palette_is_refused_naming_it": (
        off_palette_picture(),
        {"scale": 1},
        "pixel (1, 1) is #010203, not an ARC-AGI-3 palette colour",
    ),
    "a_cell_of_two_colours_in_its_first_row_is_refused_naming_the_pixel": (
        one_odd_pixel(1, 0),
        {"scale": 2},
        "cell (0, 0) is not one colour: pixel (1, 0)",
    ),
    "a_cell_of_two_colours_in_a_later_row_is_refused_naming_the_pixel": (
        one_odd_pixel(2, 3),
        {"scale": 2},
        "cell (1, 1) is not one colour: pixel (2, 3)",
    ),
    "bytes_that_are_not_a_png_are_refused": (b"GIF89a" + bytes(40), {"scale": 1}, "not a PNG"),
}


@pytest.mark.parametrize(("data", "how", "problem"), NOT_FRAMES.values(), ids=NOT_FRAMES.keys())
def test_reading_a_picture_that_is_not_such_a_frame(data, how, problem):
    with pytest.raises(ImageError) as refused:
        frame_from_png(data, **how)
    assert problem in str(refused.value)
    assert "; fix: " in str(refused.value)


def test_reading_needs_the_scale_or_the_grid_size_and_they_must_agree():
    data = frame_to_png(random_frame(4, 4), 8)
    with pytest.raises(ValueError, match="needs the scale or the grid size"):
        frame_from_png(data)
    with pytest.raises(ValueError, match="disagree"):
        frame_from_png(data, 4, grid_size=(4, 4))
    assert frame_from_png(data, 8, grid_size=(4, 4)) == random_frame(4, 4)


BAD_DRAWINGS = {
    "a_colour_past_15": ([[0, 16]], 1, "outside 0-15"),
    "a_negative_colour": ([[-1]], 1, "outside 0-15"),
    "rows_of_different_lengths": ([[0, 1], [2]], 1, "all of one length"),
    "no_rows": ([], 1, "one or more rows"),
    "a_scale_of_0": ([[0]], 0, "from 1 to 32"),
    "a_scale_of_33": ([[0]], 33, "from 1 to 32"),
    "a_scale_that_is_a_bool": ([[0]], True, "from 1 to 32"),
}


@pytest.mark.parametrize(("cells", "scale", "problem"), BAD_DRAWINGS.values(), ids=BAD_DRAWINGS.keys())
def test_drawing_refuses(cells, scale, problem):
    with pytest.raises(ValueError, match=problem):
        frame_to_png(cells, scale)


def test_a_drawn_frame_is_a_png_the_strict_reader_accepts():
    assert frame_to_png([[1]]).startswith(PNG_SIGNATURE)
    ImagePart(frame_to_png(random_frame(3, 2), 32))
