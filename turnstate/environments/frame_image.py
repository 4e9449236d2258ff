"""A grid frame drawn as a PNG, and read back: how a frame becomes an image the model sees.

A frame here is any rectangle of cells, each a colour index 0-15: ARC-AGI-3's 64 x 64 frames, or a
smaller game's grid once it maps its cells to colours.

Rules it keeps:
1. A cell is drawn as a `scale` x `scale` square of its colour in the ARC-AGI-3 toolkit's palette, so
   the model sees a frame in the colours the toolkit shows it in. PALETTE is the toolkit's
   `arc_agi.rendering.COLOR_MAP` (arc-agi 0.9.9 on PyPI, the renderer behind its `render_frames`;
   its alpha byte, always FF, dropped); tests/environments/test_frame_image.py compares the two
   whenever the toolkit imports.
2. The PNG is indexed, with all 16 palette colours in that order whatever the frame uses, so a
   pixel's palette index is its cell's colour and the same frame at the same scale is the same bytes
   (images dedupe by digest).
3. The scale is a whole number from 1 to 32 (a 64 x 64 frame at 32 is 2048 px a side, OpenAI's fit
   box); the default, 8, draws a 64 x 64 frame at 512 x 512: one OpenAI 512 px tile (255 tokens at
   high detail), a single 768 px Gemini tile, within Claude's 1568 px without a resize, cells large
   enough to tell apart.
4. Reading back is strict, because the local provider answers from what it reads: the picture must be
   a whole number of square cells, each cell one colour and that colour one of the palette's. Anything
   else is refused with the pixel or cell that breaks the rule, never guessed at.
5. A frame shown as an image comes with its legend, one line of the frame's text (`ImageLegend.line`):
   the grid's size, the cell's size, and what each colour it uses stands for, by the colour's name and
   the symbol the text rendering draws it with. A vision model reads the picture by it; the local
   provider's model, which reads text, reads the picture back into those symbols by it
   (local_provider/vision.py), so it plays an image frame exactly as it plays the text one.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from turnstate.adapters.images import RGB, ImageError, ImagePart, Pixel, decode_png, encode_indexed_png, refuse

PALETTE: tuple[RGB, ...] = (
    (0xFF, 0xFF, 0xFF),  # 0 white
    (0xCC, 0xCC, 0xCC),  # 1 off-white
    (0x99, 0x99, 0x99),  # 2 neutral light
    (0x66, 0x66, 0x66),  # 3 neutral
    (0x33, 0x33, 0x33),  # 4 off-black
    (0x00, 0x00, 0x00),  # 5 black
    (0xE5, 0x3A, 0xA3),  # 6 magenta
    (0xFF, 0x7B, 0xCC),  # 7 magenta light
    (0xF9, 0x3C, 0x31),  # 8 red
    (0x1E, 0x93, 0xFF),  # 9 blue
    (0x88, 0xD8, 0xF1),  # 10 blue light
    (0xFF, 0xDC, 0x00),  # 11 yellow
    (0xFF, 0x85, 0x1B),  # 12 orange
    (0x92, 0x12, 0x31),  # 13 maroon
    (0x4F, 0xCC, 0x30),  # 14 green
    (0xA3, 0x56, 0xD6),  # 15 purple
)
COLOUR_NAMES: tuple[str, ...] = (  # PALETTE's colours, one word each, for a legend line
    "white",
    "off-white",
    "light-grey",
    "grey",
    "off-black",
    "black",
    "magenta",
    "light-magenta",
    "red",
    "blue",
    "light-blue",
    "yellow",
    "orange",
    "maroon",
    "green",
    "purple",
)
DEFAULT_SCALE = 8
MIN_SCALE, MAX_SCALE = 1, 32

Grid = tuple[tuple[int, ...], ...]
CELL_BYTES = tuple(bytes([colour]) for colour in range(len(PALETTE)))
COLOUR_OF: dict[Pixel, int] = {rgb: colour for colour, rgb in enumerate(PALETTE)}
COLOUR_OF.update({(*rgb, 0xFF): colour for colour, rgb in enumerate(PALETTE)})  # an opaque RGBA pixel reads the same
FRAME_FIX = "draw the frame with frame_to_png, and read it back at the scale or grid size it was drawn with"


def checked_scale(scale: int) -> int:
    if isinstance(scale, bool) or not isinstance(scale, int) or not MIN_SCALE <= scale <= MAX_SCALE:
        raise ValueError(f"a frame's scale is a whole number from {MIN_SCALE} to {MAX_SCALE}, not {scale!r}")
    return scale


def checked_grid(cells: Sequence[Sequence[int]]) -> Grid:
    """The cells as a tuple grid: at least one row, rows of one length, each cell a colour index 0-15
    (numpy integers too: a toolkit frame is an array)."""
    grid = tuple(tuple(operator.index(cell) for cell in row) for row in cells)
    if not grid or not grid[0] or any(len(row) != len(grid[0]) for row in grid):
        raise ValueError("a frame is one or more rows of cells, all of one length")
    for y, row in enumerate(grid):
        if min(row) < 0 or max(row) >= len(PALETTE):
            raise ValueError(f"row {y} of the frame holds a colour outside 0-{len(PALETTE) - 1}")
    return grid


def frame_to_png(cells: Sequence[Sequence[int]], scale: int = DEFAULT_SCALE) -> bytes:
    """The frame as PNG bytes, each cell a `scale` x `scale` square (rules 1-3)."""
    grid, scale = checked_grid(cells), checked_scale(scale)
    lines = []
    for row in grid:
        line = b"".join(CELL_BYTES[colour] * scale for colour in row)
        lines.extend([line] * scale)
    return encode_indexed_png(len(grid[0]) * scale, len(grid) * scale, PALETTE, lines)


def reading_scale(width: int, height: int, scale: int | None, grid_size: tuple[int, int] | None) -> int:
    """The scale a `width` x `height` picture was drawn at: the one given, or the one its grid size
    (columns, rows) implies; either must split the picture into whole square cells."""
    if grid_size is not None:
        columns, rows = grid_size
        implied = width // columns if columns > 0 and rows > 0 else 0
        if implied < 1 or (implied * columns, implied * rows) != (width, height):
            raise refuse(f"a {width} x {height} px picture is not a {columns} x {rows} grid of square cells", FRAME_FIX)
        if scale is not None and scale != implied:
            raise ValueError(f"scale {scale} and grid size {columns} x {rows} disagree for {width} x {height} px")
        scale = implied
    if scale is None:
        raise ValueError("frame_from_png needs the scale or the grid size (columns, rows) the frame was drawn with")
    checked_scale(scale)
    if width % scale or height % scale:
        raise refuse(f"a {width} x {height} px picture is not a whole number of {scale} px cells", FRAME_FIX)
    return scale


@lru_cache(maxsize=256)
def frame_from_png(data: bytes, scale: int | None = None, grid_size: tuple[int, int] | None = None) -> Grid:
    """The cells of a PNG that `frame_to_png` drew, read strictly (rule 4); raises ImageError for bytes
    that are not a PNG or a picture that is not such a frame. Kept for the 256 latest pictures (a
    grid is immutable): a conversation replays each frame on every request, and reading a 64 x 64
    frame at scale 8 takes about 17 ms."""
    picture = decode_png(data)
    scale = reading_scale(picture.width, picture.height, scale, grid_size)
    grid = []
    for top in range(0, picture.height, scale):
        first, *others = picture.rows[top : top + scale]
        cells = []
        for left in range(0, picture.width, scale):
            run = first[left : left + scale]
            if run.count(run[0]) != scale:
                x = left + next(i for i, pixel in enumerate(run) if pixel != run[0])
                raise not_a_frame(f"cell ({left // scale}, {top // scale}) is not one colour: pixel ({x}, {top})")
            colour = COLOUR_OF.get(run[0])
            if colour is None:
                raise not_a_frame(f"pixel ({left}, {top}) is {hex_colour(run[0])}, not an ARC-AGI-3 palette colour")
            cells.append(colour)
        for offset, row in enumerate(others, start=1):  # the cells' other pixel rows repeat their first
            if row != first:
                x = next(x for x, (a, b) in enumerate(zip(first, row, strict=True)) if a != b)
                raise not_a_frame(f"cell ({x // scale}, {top // scale}) is not one colour: pixel ({x}, {top + offset})")
        grid.append(tuple(cells))
    return tuple(grid)


def not_a_frame(problem: str) -> ImageError:
    return refuse(f"not a frame image: {problem}", FRAME_FIX)


def hex_colour(pixel: Pixel) -> str:
    return "#" + "".join(f"{sample:02X}" for sample in pixel)


@dataclass(frozen=True)
class ImageLegend:
    """How a frame image reads as the text grid it stands for (rule 5): `columns` x `rows` cells of
    `scale` px, and the symbol (one character) each colour it uses draws in the text rendering."""

    columns: int
    rows: int
    scale: int
    symbols: Mapping[int, str]

    LINE = re.compile(r"^IMAGE: (\d+) x (\d+) cells of (\d+) px; colours: (.+)$", re.MULTILINE)
    ENTRY = re.compile(r"^([a-z-]+) \((\d+)\) (\S)$")

    def line(self) -> str:
        colours = ", ".join(
            f"{COLOUR_NAMES[colour]} ({colour}) {self.symbols[colour]}" for colour in sorted(self.symbols)
        )
        return f"IMAGE: {self.columns} x {self.rows} cells of {self.scale} px; colours: {colours}"

    @classmethod
    def parse(cls, line: str) -> ImageLegend | None:
        """The legend `line` states, or None for a line that is not one (or names a colour wrongly)."""
        found = cls.LINE.fullmatch(line)
        if found is None:
            return None
        symbols: dict[int, str] = {}
        for entry in found[4].split(", "):
            named = cls.ENTRY.fullmatch(entry)
            colour = int(named[2]) if named else len(PALETTE)
            if named is None or colour >= len(PALETTE) or COLOUR_NAMES[colour] != named[1]:
                return None
            symbols[colour] = named[3]
        return cls(int(found[1]), int(found[2]), int(found[3]), symbols)

    def draw(self, rows: Sequence[str]) -> ImagePart:
        """The text grid `rows` (a symbol per cell) as its frame image; ValueError for a grid of
        another size or a symbol the legend does not name."""
        colour_of = {symbol: colour for colour, symbol in self.symbols.items()}
        if len(rows) != self.rows or any(len(row) != self.columns for row in rows):
            raise ValueError(f"the legend is of a {self.columns} x {self.rows} grid")
        unknown = sorted({symbol for row in rows for symbol in row} - colour_of.keys())
        if unknown:
            raise ValueError(f"the legend names no colour for {', '.join(map(repr, unknown))}")
        return ImagePart(frame_to_png([[colour_of[symbol] for symbol in row] for row in rows], self.scale))

    def read(self, image: ImagePart) -> list[str]:
        """The image's grid as text rows, strictly (rule 4): ImageError for a picture that is not this
        legend's grid, or shows a colour the legend does not name."""
        grid = frame_from_png(image.data, grid_size=(self.columns, self.rows))
        if grid and (len(grid[0]), len(grid)) != (self.columns, self.rows):
            raise not_a_frame(f"it is {len(grid[0])} x {len(grid)} cells, not {self.columns} x {self.rows}")
        unnamed = sorted({colour for row in grid for colour in row} - self.symbols.keys())
        if unnamed:
            raise not_a_frame(
                f"it shows {', '.join(COLOUR_NAMES[colour] for colour in unnamed)}, which the legend does not name"
            )
        return ["".join(self.symbols[colour] for colour in row) for row in grid]
