"""One bounded HTTP(S) GET for ``web_fetch``: time, size and redirects bounded, every address checked.

Invariants: no connection is made to a private, loopback, link-local or otherwise non-global address unless the
policy allows it — the check is on the resolved addresses aiohttp then connects to (its resolver is ours), so a name
that resolves to a public address for the check and a private one for the connection cannot slip through, and it is
made again for every redirect. A body is read up to ``max_bytes`` (the rest is never read); HTML is turned into
Markdown (markdownify), other text is kept as is, anything else is refused naming its type.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.request
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import aiohttp
import anyio
from aiohttp.abc import AbstractResolver, ResolveResult

from ._exceptions import ToolCallError

__all__ = ["DEFAULT_WEB_POLICY", "Page", "WebPolicy", "fetch_page", "host_of", "to_markdown"]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_TEXT_TYPES = frozenset(
    {"application/json", "application/xml", "application/javascript", "application/x-javascript", "application/yaml"}
)
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


@dataclass(frozen=True, slots=True)
class WebPolicy:
    """How ``web_fetch`` may reach the network. ``allowed``: the networks (``10.0.0.0/8``) whose private, loopback
    or link-local addresses may be fetched (none by default); ``read_only``: the tool is offered in ``read-only``
    mode too;
    ``timeout_s``: one call's whole time, redirects included; ``max_bytes``: the body read at most;
    ``max_redirects``: redirects followed at most."""

    allowed: tuple[str, ...] = ()
    read_only: bool = False
    timeout_s: float = 30.0
    max_bytes: int = 2 * 1024 * 1024
    max_redirects: int = 5


DEFAULT_WEB_POLICY = WebPolicy()


@dataclass(frozen=True, slots=True)
class Page:
    """What a fetch brought back: the URL it ended at (after redirects), its status and content type, its text
    (Markdown for HTML) and whether the body was cut at the size bound."""

    url: str
    status: int
    content_type: str
    text: str
    truncated: bool


def host_of(url: str) -> str:
    """The host of an http(s) ``url`` (lower case); ``ToolCallError`` for anything else."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - an invalid port raises here
    except ValueError as exc:
        raise ToolCallError(f"not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise ToolCallError(f"only http and https URLs are fetched, not {parts.scheme or 'a URL without a scheme'}")
    if not host:
        raise ToolCallError("the URL has no host")
    return host.lower()


def _refusal(host: str, address: str, allowed: tuple[str, ...]) -> str | None:
    """Why ``address`` (of ``host``) may not be fetched (None: it may): not a global unicast address, nor in one
    of the ``allowed`` networks."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{host} resolved to {address!r}, which is not an IP address"
    mapped = getattr(ip, "ipv4_mapped", None)
    if mapped is not None:
        ip = mapped
    if ip.is_global and not ip.is_multicast:
        return None
    for network in allowed:
        net = ipaddress.ip_network(network)
        if ip.version == net.version and ip in net:
            return None
    return (
        f"{host} is a private, loopback or link-local address ({ip}); such addresses are not fetched unless the "
        "server allows their network (--web-fetch-allow)"
    )


class _CheckedResolver(AbstractResolver):
    """Resolves with the system's resolver and refuses a name any of whose addresses is not global (``exempt``:
    the proxies' hosts, which are the user's own choice); the refusal is kept for the message."""

    def __init__(self, allowed: tuple[str, ...], exempt: frozenset[str]) -> None:
        self._inner = aiohttp.ThreadedResolver()
        self._allowed = allowed
        self._exempt = exempt
        self.refused: str | None = None

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        if host.lower() in self._exempt:
            return results
        for result in results:
            problem = _refusal(host, result["host"], self._allowed)
            if problem is not None:
                self.refused = problem
                raise OSError(problem)
        return results

    async def close(self) -> None:
        await self._inner.close()


def _proxy_hosts() -> frozenset[str]:
    """The hosts of the proxies the environment names (``HTTP_PROXY``…, as aiohttp's ``trust_env`` reads them)."""
    hosts = set()
    for proxy in urllib.request.getproxies().values():
        host = urlsplit(proxy if "://" in proxy else f"http://{proxy}").hostname
        if host:
            hosts.add(host.lower())
    return frozenset(hosts)


def _check_literal(host: str, allowed: tuple[str, ...]) -> None:
    """An IP literal is connected to without resolving: check it here."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return
    problem = _refusal(host, host.strip("[]"), allowed)
    if problem is not None:
        raise ToolCallError(problem, what="address refused")


async def _check_proxied(host: str, allowed: tuple[str, ...]) -> None:
    """A request through a proxy is resolved by the proxy: resolve and check the host here first (the proxy's own
    resolution is the proxy's)."""
    _check_literal(host, allowed)
    try:
        infos = await anyio.getaddrinfo(host, None)
    except OSError as exc:
        raise ToolCallError(f"cannot resolve {host}: {exc}") from None
    for info in infos:
        problem = _refusal(host, str(info[4][0]), allowed)
        if problem is not None:
            raise ToolCallError(problem, what="address refused")


def _kind(content_type: str, head: bytes) -> str:
    """``html``, ``text`` or ``binary`` for a body of ``content_type`` (no type: sniffed from its first bytes)."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media in _HTML_TYPES:
        return "html"
    if media.startswith("text/") or media in _TEXT_TYPES or media.endswith(("+json", "+xml")):
        return "text"
    if not media:
        if b"\0" in head:
            return "binary"
        return "html" if head.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")) else "text"
    return "binary"


def to_markdown(html: str) -> str:
    """``html`` as Markdown (ATX headings; scripts, styles and the like dropped)."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    for element in soup(["script", "style", "noscript", "iframe", "svg", "template", "head"]):
        element.decompose()
    text: str = MarkdownConverter(heading_style="ATX").convert_soup(soup)
    lines = [line.rstrip() for line in text.splitlines()]
    out: list[str] = []
    for line in lines:  # at most one blank line in a row
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip() + "\n"


async def _read(response: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of the body, and whether there was more (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = await response.content.read(min(64 * 1024, limit + 1 - size))
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)[:limit], True


async def fetch_page(url: str, policy: WebPolicy) -> Page:
    """GET ``url`` under ``policy`` (see the module's invariants); ``ToolCallError`` says why it could not."""
    proxies = _proxy_hosts()
    resolver = _CheckedResolver(policy.allowed, proxies)
    connector = aiohttp.TCPConnector(resolver=resolver, limit=4, force_close=True)
    headers = {"User-Agent": "acp-server web_fetch", "Accept": "text/html,text/*;q=0.9,*/*;q=0.5"}
    try:
        with anyio.fail_after(policy.timeout_s):
            async with aiohttp.ClientSession(connector=connector, trust_env=True, headers=headers) as session:
                return await _follow(session, resolver, url, policy, proxies)
    except TimeoutError:
        raise ToolCallError(f"the fetch took longer than {policy.timeout_s:g} s", what="timed out") from None
    except aiohttp.ClientError as exc:
        if resolver.refused is not None:
            raise ToolCallError(resolver.refused, what="address refused") from None
        raise ToolCallError(f"the fetch failed: {exc}", what="failed") from None


async def _follow(
    session: aiohttp.ClientSession, resolver: _CheckedResolver, url: str, policy: WebPolicy, proxies: frozenset[str]
) -> Page:
    for _ in range(policy.max_redirects + 1):
        host = host_of(url)
        _check_literal(host, policy.allowed)
        if proxies and urllib.request.getproxies() and not urllib.request.proxy_bypass(host):
            await _check_proxied(host, policy.allowed)
        async with session.get(url, allow_redirects=False) as response:
            location = response.headers.get("Location")
            if response.status in _REDIRECTS and location:
                url = urljoin(url, location)
                continue
            return await _page(response, url, policy)
    raise ToolCallError(f"more than {policy.max_redirects} redirects; last to {url}", what="too many redirects")


async def _page(response: aiohttp.ClientResponse, url: str, policy: WebPolicy) -> Page:
    content_type = response.headers.get("Content-Type", "")
    body, truncated = await _read(response, policy.max_bytes)
    kind = _kind(content_type, body[:512])
    if kind == "binary":
        shown = content_type.split(";", 1)[0].strip() or "no content type, binary data"
        raise ToolCallError(f"{url} is binary ({shown}): only text and HTML are fetched", what="binary content")
    charset = response.charset or "utf-8"
    try:
        text = body.decode(charset, errors="replace")
    except LookupError:
        text = body.decode("utf-8", errors="replace")
    if kind == "html":
        text = await anyio.to_thread.run_sync(to_markdown, text, abandon_on_cancel=True)
    return Page(url, response.status, content_type.split(";", 1)[0].strip(), text, truncated)
