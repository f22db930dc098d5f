"""The vision demo's data: small drawn pictures with questions about their shapes' colour, count and kind.

A picture is a 2x2 grid of 28-pixel cells on white, one to four of them holding a shape (all of one colour and
one kind, each a little moved and sized at random); a 56-pixel picture is four image tokens for Qwen2.5-VL, one per
cell. Its *scene* names what is drawn ("red square 0 3": the colour, the kind and the cells filled): a fifth of
the scenes (:data:`HELDOUT_SCENES`) are kept for held-out questions, and :func:`picture_questions` never draws
them, so a model trained on it is measured on pictures it has never seen the like of.
"""

from __future__ import annotations

import itertools
import random

COLOURS = {"red": (220, 40, 40), "green": (40, 170, 60), "blue": (50, 80, 220), "yellow": (230, 200, 40)}
SHAPES = ("circle", "square", "triangle")
CELL = 28  # one Qwen2-VL image token: 2x2 patches of 14 pixels
GRID = 2
PICTURE_SIZE = CELL * GRID
QUESTIONS = {
    "colour": "What colour are the shapes?",
    "count": "How many shapes are there?",
    "shape": "What shape are they?",
}


def _all_scenes() -> list[str]:
    layouts = [cells for n in range(1, GRID * GRID + 1) for cells in itertools.combinations(range(GRID * GRID), n)]
    return [" ".join([colour, shape, *map(str, cells)]) for colour in COLOURS for shape in SHAPES for cells in layouts]


SCENES = _all_scenes()
HELDOUT_SCENES = frozenset(random.Random(7).sample(SCENES, len(SCENES) // 5))
TRAINING_SCENES = [scene for scene in SCENES if scene not in HELDOUT_SCENES]


def draw(scene: str, rng: random.Random):
    """The picture of ``scene``: its shape in each of its cells, 14 to 22 pixels wide, placed at random in the cell."""
    from PIL import Image, ImageDraw

    colour, shape, *cells = scene.split()
    image = Image.new("RGB", (PICTURE_SIZE, PICTURE_SIZE), "white")
    pen = ImageDraw.Draw(image)
    for cell in map(int, cells):
        size = rng.randint(14, 22)
        left = (cell % GRID) * CELL + rng.randint(1, CELL - size - 1)
        top = (cell // GRID) * CELL + rng.randint(1, CELL - size - 1)
        box = (left, top, left + size, top + size)
        if shape == "circle":
            pen.ellipse(box, fill=COLOURS[colour])
        elif shape == "square":
            pen.rectangle(box, fill=COLOURS[colour])
        else:
            pen.polygon([(left + size / 2, top), (left, top + size), (left + size, top + size)], fill=COLOURS[colour])
    return image


def answer_of(scene: str, kind: str) -> str:
    """The answer to the ``kind`` question (:data:`QUESTIONS`) about ``scene``: its colour, its number of shapes or its kind.

    >>> answer_of("red square 0 3", "count"), answer_of("red square 0 3", "shape")
    ('2', 'square')
    """
    colour, shape, *cells = scene.split()
    return {"colour": colour, "count": str(len(cells)), "shape": shape}[kind]


def _questions(scenes: list[str], n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        scene, kind = rng.choice(scenes), rng.choice(list(QUESTIONS))
        rows.append({"question": QUESTIONS[kind], "answer": answer_of(scene, kind), "image": draw(scene, rng),
                     "kind": kind, "scene": scene})
    return rows


def picture_questions(n: int = 1000, *, seed: int = 0) -> list[dict]:
    """``n`` questions (``question``, ``answer``, ``image``, ``kind``, ``scene``) about pictures of the training scenes,
    generated from a seed.

    >>> sorted(picture_questions(1)[0])
    ['answer', 'image', 'kind', 'question', 'scene']
    """
    return _questions(TRAINING_SCENES, n, seed)


def heldout_picture_questions(n: int = 200, *, seed: int = 1) -> list[dict]:
    """``n`` questions about pictures of the held-out scenes, which :func:`picture_questions` never draws."""
    return _questions(sorted(HELDOUT_SCENES), n, seed)
