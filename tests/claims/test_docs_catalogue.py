"""docs/claims.md's claim list is the registry's: regenerated, it is unchanged."""

from __future__ import annotations

from tests.conftest import REPO
from villani.claims.catalogue.registry import CATALOGUE_END, CATALOGUE_START, catalogue, catalogue_markdown


def test_docs_claim_list_is_generated_from_the_registry():
    text = (REPO / "docs" / "claims.md").read_text()
    listed = text.split(CATALOGUE_START, 1)[1].split(CATALOGUE_END, 1)[0].strip("\n") + "\n"
    assert listed == catalogue_markdown(), (
        "docs/claims.md is out of date: python -c \"from villani.claims.catalogue.registry import write_catalogue; "
        "write_catalogue('docs/claims.md')\"")
    assert len(catalogue()) == listed.count("\n| `")
