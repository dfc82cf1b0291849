"""The Lark grammar of the flow language, shipped as package data."""
from importlib.resources import files


def grammar_text() -> str:
    """Return the text of flow.lark."""
    return files(__name__).joinpath("flow.lark").read_text(encoding="utf-8")
