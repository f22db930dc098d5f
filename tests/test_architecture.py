"""The package's shape: imports flow one way, rewards stands alone, and grpo-lite speaks from rank 0 only."""

import ast
import logging
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports, at module level or inside functions."""
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        is_package = path.name == "__init__.py"
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".")[: len(module.split(".")) - node.level + is_package]
                    name = ".".join(base + ([node.module] if node.module else []))
                    targets.add(name)
                    targets.update(f"{name}.{alias.name}" for alias in node.names)
                elif node.module:
                    targets.add(node.module)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        graph[module] = {t for t in targets if t.split(".")[0] == package or t.split(".")[0] == "rewards"}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle among the package's modules (``__init__`` re-exports left out), or None."""
    modules = {m for m in graph if "." in m}
    state: dict[str, int] = {}

    def visit(module, path):
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if target not in modules:
                continue
            if state.get(target) == 1:
                return path[path.index(target):] + [target] if target in path else [module, target]
            if target not in state:
                found = visit(target, path + [target])
                if found:
                    return found
        state[module] = 2
        return None

    for module in sorted(modules):
        if module not in state:
            found = visit(module, [module])
            if found:
                return found
    return None


def test_no_import_cycles_in_either_package():
    for package in ("grpo_lite", "rewards"):
        assert _cycle(_imports(package)) is None, f"import cycle in {package}: {' -> '.join(_cycle(_imports(package)))}"


def test_the_cycle_finder_finds_a_planted_cycle():
    assert _cycle({"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}}) == ["p.a", "p.b", "p.c", "p.a"]


def test_rewards_stand_alone():
    for module, targets in _imports("rewards").items():
        assert not any(t.startswith("grpo_lite") for t in targets), f"{module} imports grpo_lite"


def test_the_logger_speaks_on_rank_zero_only(monkeypatch, capsys):
    from grpo_lite.log import logger

    monkeypatch.setenv("RANK", "1")
    logger.info("from rank one")
    monkeypatch.setenv("RANK", "0")
    logger.info("from rank zero")
    logger.warning("careful")
    err = capsys.readouterr().err
    assert "from rank one" not in err
    assert "grpo-lite: from rank zero" in err and "grpo-lite warning: careful" in err
    assert logging.getLogger("grpo_lite").propagate is False
