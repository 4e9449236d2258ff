"""move: turnstate's simple ARC-AGI-3 game, in the toolkit's game format (an arcengine ARCBaseGame).

Each level is an 8 x 8 board (the camera shows it 64 x 64, each cell 8 x 8 pixels) of colour 0 with
the player, one cell of colour 9, and the goal, one cell of colour 3. ACTION1..4 move the player up,
down, left and right (off the board: it stays); ACTION6 x y, a click on the cell next to the player,
steps there. Reaching the goal opens the next level, or wins after the last. The layout of each level
comes from the seed. The toolkit executes this file on its own (one file per game), so it imports
nothing but arcengine and the standard library.
"""

import random

from arcengine import ARCBaseGame, Camera, GameAction, Level, Sprite  # type: ignore[import-not-found, unused-ignore]

SIZE = 8
LEVELS = 2
BACKGROUND, PLAYER, GOAL = 0, 9, 3
MIN_DISTANCE = 3
MOVES = {
    GameAction.ACTION1: (0, -1),
    GameAction.ACTION2: (0, 1),
    GameAction.ACTION3: (-1, 0),
    GameAction.ACTION4: (1, 0),
}


def draw_level(seed, number):
    """The player's and the goal's cells, at least MIN_DISTANCE moves apart."""
    rng = random.Random(f"move:{seed}:{number}")
    cells = [(x, y) for y in range(SIZE) for x in range(SIZE)]
    while True:
        start, goal = rng.sample(cells, 2)
        if abs(start[0] - goal[0]) + abs(start[1] - goal[1]) >= MIN_DISTANCE:
            break
    sprites = [
        Sprite([[GOAL]], name="goal", x=goal[0], y=goal[1], layer=0, collidable=False),
        Sprite([[PLAYER]], name="player", x=start[0], y=start[1], layer=1, collidable=False),
    ]
    return Level(sprites=sprites, grid_size=(SIZE, SIZE), data={}, name=f"level {number}")


class Move(ARCBaseGame):
    def __init__(self, seed=0):
        levels = [draw_level(seed, number) for number in range(1, LEVELS + 1)]
        camera = Camera(background=BACKGROUND, letter_box=BACKGROUND)
        super().__init__(game_id="move", levels=levels, camera=camera, available_actions=[1, 2, 3, 4, 6], seed=seed)

    def step(self):
        player = self.current_level.get_sprites_by_name("player")[0]
        goal = self.current_level.get_sprites_by_name("goal")[0]
        cell = self.destination(player)
        if cell is not None:
            player.set_position(*cell)
            if cell == (goal.x, goal.y):
                self.next_level()
        self.complete_action()

    def destination(self, player):
        """The cell this action moves the player to, or None (a move off the board, RESET, a click
        anywhere but next to the player)."""
        action = self.action.id
        if action in MOVES:
            dx, dy = MOVES[action]
            cell = (player.x + dx, player.y + dy)
            return cell if 0 <= cell[0] < SIZE and 0 <= cell[1] < SIZE else None
        if action == GameAction.ACTION6:
            cell = self.camera.display_to_grid(self.action.data.get("x", -1), self.action.data.get("y", -1))
            if cell is not None and abs(cell[0] - player.x) + abs(cell[1] - player.y) == 1:
                return cell
        return None
