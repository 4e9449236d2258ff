"""cued: turnstate's ARC-AGI-3 game that needs memory, in the toolkit's game format (an arcengine
ARCBaseGame), the pixel twin of beacon_grid.

Each level is an 8 x 8 board (the camera shows it 64 x 64, each cell 8 x 8 pixels) of colour 0. Its
top row is the cue bar; below it are the player, one cell of colour 9, and two goals, one cell of
colour c (12) and one of colour e (14). Only one goal is right: the bar shows its colour in the first
frame of the level in a game and colour 5 ("dark") in every later frame, including after a RESET.
ACTION1..4 move the player up, down, left and right within the rows below the bar. Reaching the
right goal opens the next level, or wins after the last; reaching the other is GAME_OVER, and RESET
then restarts the level with the bar dark. Which goal is right alternates from level to level, so
no single colour wins every level; the seed decides where it starts and the layout. The toolkit
executes this file on its own (one file per game), so it imports nothing but arcengine and the
standard library.
"""

import random

from arcengine import ARCBaseGame, Camera, GameAction, Level, Sprite  # type: ignore[import-not-found, unused-ignore]

SIZE = 8
LEVELS = 2
BACKGROUND, PLAYER, DARK = 0, 9, 5
GOALS = (12, 14)
MIN_DISTANCE = 3
MOVES = {
    GameAction.ACTION1: (0, -1),
    GameAction.ACTION2: (0, 1),
    GameAction.ACTION3: (-1, 0),
    GameAction.ACTION4: (1, 0),
}


def draw_level(seed, number):
    """The board below the bar: the player's cell and the goals', each goal at least MIN_DISTANCE
    moves from the player; the level's data names the right goal's colour."""
    rng = random.Random(f"cued:{seed}:{number}")
    cells = [(x, y) for y in range(1, SIZE) for x in range(SIZE)]
    while True:
        start, *goals = rng.sample(cells, 3)
        if all(abs(start[0] - x) + abs(start[1] - y) >= MIN_DISTANCE for x, y in goals):
            break
    sprites = [Sprite([[DARK] * SIZE], name="bar", x=0, y=0, layer=0, collidable=False)]
    for colour, (x, y) in zip(GOALS, goals, strict=True):
        sprites.append(Sprite([[colour]], name=f"goal {colour}", x=x, y=y, layer=0, collidable=False))
    sprites.append(Sprite([[PLAYER]], name="player", x=start[0], y=start[1], layer=1, collidable=False))
    right = GOALS[(seed + number) % len(GOALS)]
    return Level(sprites=sprites, grid_size=(SIZE, SIZE), data={"right": right}, name=f"level {number}")


class Cued(ARCBaseGame):
    def __init__(self, seed=0):
        self.spent = set()  # the levels whose cue a later frame of this game has hidden
        levels = [draw_level(seed, number) for number in range(1, LEVELS + 1)]
        camera = Camera(background=BACKGROUND, letter_box=BACKGROUND)
        super().__init__(game_id="cued", levels=levels, camera=camera, available_actions=[1, 2, 3, 4], seed=seed)

    def on_set_level(self, level):
        """The bar shows the right goal's colour until an action is taken on the level."""
        if self.level_index not in self.spent:
            self.bar(level).color_remap(None, level.get_data("right"))

    def step(self):
        level = self.current_level
        if self.action.id != GameAction.RESET:
            self.spent.add(self.level_index)
            self.bar(level).color_remap(None, DARK)
        player = level.get_sprites_by_name("player")[0]
        cell = self.destination(player)
        if cell is not None:
            player.set_position(*cell)
            reached = [
                goal for goal in level.get_sprites() if goal.name.startswith("goal") and (goal.x, goal.y) == cell
            ]
            if reached and reached[0].name == f"goal {level.get_data('right')}":
                self.next_level()
            elif reached:
                self.lose()
        self.complete_action()

    def bar(self, level):
        return level.get_sprites_by_name("bar")[0]

    def destination(self, player):
        """The cell a move takes the player to, or None (into the bar or off the board, RESET)."""
        if self.action.id not in MOVES:
            return None
        dx, dy = MOVES[self.action.id]
        cell = (player.x + dx, player.y + dy)
        return cell if 0 <= cell[0] < SIZE and 1 <= cell[1] < SIZE else None
