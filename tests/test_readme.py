"""The README and the manual (docs/, an mkdocs site) are part of the interface: the option and route tables are
generated from the code, the test command is CI's, the manual is built strictly in CI, and no link leads nowhere."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from acp_server.config import OPTIONS, option_table

from .docs_pages import DOCS, hook, page, rendered

ROOT = Path(__file__).resolve().parent.parent


def test_configuration_table_matches_the_options() -> None:
    assert page("configuration.md").count("<!-- generated: options -->") == 1
    assert option_table() in rendered("configuration.md")
    assert f"| `{OPTIONS[0].flag}` |" not in page("configuration.md")  # generated, never a copy to keep in step


def test_an_unknown_generated_table_is_an_error_not_a_blank() -> None:
    with pytest.raises(ValueError, match="no-such-table"):
        hook().render("<!-- generated: no-such-table -->")


def test_the_route_reference_lists_every_operation_of_the_openapi_document() -> None:
    document = json.loads((ROOT / "schemas" / "openapi.json").read_text())
    operations = [(m.upper(), p) for p, item in document["paths"].items() for m in item if m != "parameters"]
    text = rendered("daemon.md")
    for method, path in operations:
        assert f"| `{method}` | `{path}` |" in text, (method, path)


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("Run the tests", 1)[1]
    command = re.search(r"```sh\n(.*?)\n```", section, re.S)
    assert command is not None
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert ci_lines[-1] == command.group(1).strip()


def test_ci_builds_the_manual_strictly() -> None:
    lines = [line.split("#", 1)[0] for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    builds = [line for line in lines if "mkdocs " in line]
    assert len(builds) == 1 and "mkdocs build --strict" in builds[0], builds
    assert not re.search(r"\s(-q|--quiet)\b", builds[0])  # --quiet hides the warnings --strict counts: nothing fails


def test_the_readme_stays_an_introduction() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, "the manual is docs/: a new topic gets a page (or a section of one), not README lines"
    assert "<!-- generated:" not in "\n".join(lines)  # the generated tables live in the site, where the hook fills them


def test_readme_links_stay_inside_the_repository() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "../" not in readme  # a path outside the clone is dead for every reader
    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        if not re.match(r"[a-z]+:", target):
            assert (ROOT / target).exists(), target


def test_every_page_of_the_manual_is_in_its_navigation_and_every_link_lands() -> None:
    nav = (ROOT / "mkdocs.yml").read_text().split("\nnav:\n", 1)[1]
    listed = set(re.findall(r":\s+(\S+\.md)\s*$", nav, re.M))
    added_by_the_hook = {"CHANGELOG.md", "openapi.json"}
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages | {"CHANGELOG.md"} == listed
    for name in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page(name)):
            if not re.match(r"[a-z]+:", target):
                assert target in added_by_the_hook or (DOCS / Path(name).parent / target).exists(), (name, target)


def test_the_license_file_matches_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "Copyright (c) acp-server contributors" in text
