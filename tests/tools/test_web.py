"""``web_fetch``'s rules that need no server: which modes offer it, the per-host "always" key, the URL checks, the
address refusal (private, loopback, link-local, IPv4-mapped; allowed networks), the Markdown conversion."""

from __future__ import annotations

import pytest

from acp_server.config._parsers import networks
from acp_server.tools import ToolCallError, WebPolicy, Workspace
from acp_server.tools._web import _refusal, host_of, to_markdown
from acp_server.tools.builtin import builtin_tool_set
from acp_server.tools.builtin.web_fetch import WebFetch, WebFetchArgs

pytestmark = pytest.mark.anyio


def test_offered_in_read_only_only_when_the_server_allows_the_network() -> None:
    assert "web_fetch" not in builtin_tool_set().offered("read-only")
    assert "web_fetch" not in builtin_tool_set(WebPolicy()).offered("read-only")
    assert "web_fetch" in builtin_tool_set(WebPolicy(read_only=True)).offered("read-only")
    assert "web_fetch" in builtin_tool_set().offered("default")


async def test_the_always_rule_is_per_host(tmp_path: object) -> None:
    prepared = await WebFetch().prepare(WebFetchArgs(url="https://Docs.Example.com/a?b"), Workspace("/tmp"), None)
    assert (prepared.rule, prepared.kind, prepared.needs_permission) == ("fetch:docs.example.com", "fetch", True)


@pytest.mark.parametrize("url", ["ftp://x/y", "file:///etc/passwd", "example.com", "http:///nohost", "http://x:99999/"])
def test_only_http_urls_with_a_host(url: str) -> None:
    with pytest.raises(ToolCallError):
        host_of(url)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.1",
        "172.16.0.1",
        "169.254.169.254",
        "::1",
        "fe80::1",
        "::ffff:10.0.0.1",
        "0.0.0.0",
        "100.64.0.1",
    ],
)
def test_non_global_addresses_are_refused_unless_their_network_is_allowed(address: str) -> None:
    assert _refusal("h", address, ()) is not None
    assert _refusal("h", address, networks("private")) is None


def test_allowed_networks_are_exact() -> None:
    assert _refusal("h", "127.0.0.1", networks("127.0.0.1")) is None
    assert _refusal("h", "127.0.0.2", networks("127.0.0.1")) is not None
    assert _refusal("h", "93.184.216.34", ()) is None
    with pytest.raises(ValueError, match="not an IP network"):
        networks("intranet")


def test_html_becomes_markdown_without_scripts() -> None:
    text = to_markdown("<h2>A</h2><script>x()</script><ul><li>one</li></ul><pre>code</pre>")
    assert "## A" in text and "* one" in text and "x()" not in text and "code" in text
