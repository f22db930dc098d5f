"""Harnesses that play the 2048 game of Unsloth's 2048 notebook (tests/ports/unsloth_2048_cells.py, CELLS[10]) with a
strategy, as source to append to the game's for rewards.games.GameReward. ``play`` is the notebook's game and scores:
_execute_strategy on a 6x6 board to 2048 (cells 23, 47), 20.0 for a win, 2.0 for a game played to its end. One change:
a move other than W, A, S or D raises, so junk earns the reward's floor, not the 2.0 the notebook gives a game a bad
move ends. ``play_to_8`` is the small game of its cell 12 (5x5, to 8), which a simple strategy wins."""

HARNESS = '''

def play(strategy, seed, size=6, target=2048):
    game = GameBoard(size=size, seed=seed, target=target, probability_fours=0.10)
    while game.state() == "ongoing":
        action = strategy(list(game.board()))
        if type(action) is not str or action.strip().lower() not in ("w", "a", "s", "d"):
            raise ValueError(f"not a move: {action!r:.40}")
        game.do_action(action)
    return 20.0 if game.state() == "success" else 2.0


def play_to_8(strategy, seed):
    return play(strategy, seed, size=5, target=8)
'''

# A strategy that always makes a move that changes the board, so every game ends: it wins small games, and loses the
# notebook's to a full board.
FIRST_MOVE_THAT_CHANGES = '''
def strategy(board):
    def shifts_left(rows):
        for row in rows:
            tiles = [x for x in row if x]
            if tiles != row[:len(tiles)] or any(a == b for a, b in zip(tiles, tiles[1:])):
                return True
        return False
    columns = [list(column) for column in zip(*board)]
    options = {"A": board, "D": [row[::-1] for row in board], "W": columns, "S": [column[::-1] for column in columns]}
    for key, rows in options.items():
        if shifts_left(rows):
            return key
    return "A"
'''
