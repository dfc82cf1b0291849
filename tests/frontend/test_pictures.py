"""`dslc explain --physical --format dot|svg`: chains drawn as boxes holding their operators,
shuffle edges between them; svg rendered by Graphviz."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from dslc.compiler.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FRAUD = EXAMPLES / "fraud" / "pipeline.flow"
CHAINED = Path(__file__).resolve().parents[1] / "cases" / "chained_python" / "pipeline.flow"


def _explain(path: Path, fmt: str, capsys) -> str:
    assert main(["explain", str(path), "--physical", "--format", fmt]) == 0
    return capsys.readouterr().out


def test_dot_draws_a_chain_as_a_box_holding_its_operators(capsys):
    dot = _explain(CHAINED, "dot", capsys)
    cluster = re.search(r"subgraph cluster_chain1 \{(.*?)\n  \}", dot, re.S).group(1)
    assert 'label="chain#1 (one mapInArrow)"' in cluster
    assert ['"a"', '"b"', '"c"'] == re.findall(r'^    ("\w+") \[label=', cluster, re.M)
    assert '"a" -> "b";' in cluster and '"b" -> "c";' in cluster
    # the aggregation after the chain reads it through a shuffle
    assert '"c" -> "per_device" [style=dashed, label="shuffle"];' in dot
    # the broadcast state reaches the PROCESS inside the chain without a shuffle
    assert '"limits" -> "c" [style=dotted, label="broadcast"];' in dot


def test_dot_is_deterministic(capsys):
    assert _explain(FRAUD, "dot", capsys) == _explain(FRAUD, "dot", capsys)


def test_svg_is_rendered_by_graphviz(capsys):
    """Needs Graphviz's `dot` (.ci/run installs it): a machine without it fails here, not skips."""
    svg = _explain(FRAUD, "svg", capsys)
    root = ElementTree.fromstring(svg[svg.index("<svg"):])
    assert root.tag.endswith("svg")
    texts = {t.text for t in root.iter() if t.tag.endswith("text")}
    assert {"chain#1 (one mapInArrow)", "enriched", "Enrich", "shuffle", "broadcast"} <= texts


def test_svg_without_graphviz_is_a_clear_error(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))     # forces the one fault a real machine here lacks
    assert main(["explain", str(FRAUD), "--physical", "--format", "svg"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("dslc: error: --format svg needs Graphviz's `dot` program")
    assert "Traceback" not in err
