"""The docs site builds with warnings as errors, and every page renders in a real browser.

`mkdocs build --strict` builds the site into a temporary folder (as ``make docs`` does into
``site/``); the site is then served over HTTP from that folder and each page is opened in
Debian's headless Chromium, driven through its chromedriver with the WebDriver protocol (plain
HTTP and JSON, no client library). Each page must show its title and an article with a heading,
load its images, log no browser error of its own (a missing stylesheet or script is one; the
repository link's call to api.github.com is not the site's), and every link
it holds into the site must reach a built file (and the heading its ``#fragment`` names).

Outside CI a machine without mkdocs (the ``docs`` extra) or without ``chromium`` and
``chromedriver`` (``apt-get install chromium chromium-driver``) skips, saying which; under CI
(``CI`` set: ``.ci/run`` installs them) it fails instead.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _missing(what: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{what} (CI is set: .ci/run installs it)")
    pytest.skip(what)


def _benchmark_pages() -> list[str]:
    """The pages the site's hook adds from benchmarks/ (scripts/docs_hooks.py), as site paths."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    if spec is None or spec.loader is None or importlib.util.find_spec("mkdocs") is None:
        return ["benchmarks/index.md"]
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [uri for uri in module.benchmark_pages() if uri.endswith(".md")]


def _url_path(source: str) -> str:
    """A page's path in the built site (mkdocs' directory URLs): ``a/b.md`` -> ``a/b/``."""
    stem = source.removesuffix(".md")
    if stem == "index":
        return ""
    return stem.removesuffix("index") if stem.endswith("/index") else stem + "/"


PAGES = sorted(
    {_url_path(p.relative_to(DOCS).as_posix()) for p in DOCS.rglob("*.md")}
    | {_url_path(uri) for uri in _benchmark_pages()}
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        _missing("mkdocs is not installed: pip install -e '.[docs]'")
    folder = tmp_path_factory.mktemp("site") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(folder),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, (
        f"mkdocs build --strict failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    )
    assert "WARNING" not in done.stderr, done.stderr
    return folder


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1, as a host would serve it (directory URLs)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class Browser:
    """A headless Chromium session through chromedriver's WebDriver endpoint."""

    def __init__(self, endpoint: str, session: str) -> None:
        self.endpoint, self.session = endpoint, session

    @staticmethod
    def call(url: str, method: str = "GET", body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            url, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.load(response)["value"]
        except urllib.error.HTTPError as error:
            raise AssertionError(f"{method} {url}: {error.code} {error.read()[:500]!r}") from None

    def open(self, url: str) -> None:
        self.call(f"{self.endpoint}/session/{self.session}/url", "POST", {"url": url})

    def run(self, script: str) -> Any:
        return self.call(
            f"{self.endpoint}/session/{self.session}/execute/sync", "POST", {"script": script, "args": []}
        )

    def errors(self) -> list[str]:
        """The browser console's errors since the last call (a resource that failed to load is one)."""
        entries = self.call(f"{self.endpoint}/session/{self.session}/se/log", "POST", {"type": "browser"})
        return [entry["message"] for entry in entries if entry.get("level") == "SEVERE"]


@pytest.fixture(scope="module")
def browser(served: str) -> Iterator[Browser]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        _missing("chromium and chromedriver are not installed: apt-get install chromium chromium-driver")
    assert chromium is not None and driver is not None
    port = _free_port()
    process = subprocess.Popen(
        [driver, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            with contextlib.suppress(OSError):
                if Browser.call(f"{endpoint}/status").get("ready"):
                    break
            time.sleep(0.1)
        options = {
            "binary": chromium,
            "args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                # Offline by construction: a name other than the local server's fails at once.
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            ],
        }
        capabilities = {
            "browserName": "chrome",
            "goog:chromeOptions": options,
            "goog:loggingPrefs": {"browser": "ALL"},
        }
        created = Browser.call(f"{endpoint}/session", "POST", {"capabilities": {"alwaysMatch": capabilities}})
        browser = Browser(endpoint, created["sessionId"])
        try:
            yield browser
        finally:
            Browser.call(f"{endpoint}/session/{browser.session}", "DELETE")
    finally:
        process.terminate()
        process.wait(timeout=30)


_PAGE = """
const article = document.querySelector("article");
const heading = article && article.querySelector("h1");
return {
  title: document.title,
  heading: heading ? heading.textContent.replace("¶", "").trim() : null,
  text: article ? article.innerText.length : 0,
  links: Array.from(document.querySelectorAll("a[href]"), (a) => a.href),
  assets: Array.from(document.querySelectorAll("link[href], script[src], img[src]"), (e) => e.href || e.src),
  broken_images: Array.from(document.images).filter((i) => !(i.complete && i.naturalWidth > 0)).map((i) => i.src),
};
"""


def _target(site: Path, base: str, url: str) -> Path | None:
    """The built file an internal URL reaches (None: the URL leaves the site)."""
    if not url.startswith(base):
        return None
    path = unquote(urlsplit(url).path)
    file = site / path.lstrip("/")
    return file / "index.html" if path.endswith("/") else file


@functools.cache
def _ids(file: Path) -> frozenset[str]:
    return frozenset(re.findall(r'\sid="([^"]+)"', file.read_text(encoding="utf-8")))


def test_every_source_page_is_built(site: Path) -> None:
    missing = [page for page in PAGES if not (site / page / "index.html").is_file()]
    assert missing == [], f"pages not built: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page or "index")
def test_the_page_renders_in_chromium_and_its_links_resolve(
    site: Path, served: str, browser: Browser, page: str
) -> None:
    browser.open(served + page)
    shown = browser.run(_PAGE)
    assert shown["heading"], f"{page}: no article heading (h1) rendered"
    assert re.fullmatch(r".+ - langchain-rolling-memory|langchain-rolling-memory", shown["title"]), shown[
        "title"
    ]
    assert shown["text"] > 200, f"{page}: the article shows {shown['text']} characters"
    assert shown["broken_images"] == [], f"{page}: images that did not load: {shown['broken_images']}"
    broken = []
    for url in [*shown["links"], *shown["assets"]]:
        file = _target(site, served, url)
        if file is None:
            continue
        if not file.is_file():
            broken.append(f"{url} (no {file.relative_to(site)})")
        elif (
            (fragment := urlsplit(url).fragment)
            and file.suffix == ".html"
            and unquote(fragment) not in _ids(file)
        ):
            broken.append(f"{url} (no id {fragment!r} in {file.relative_to(site)})")
    assert broken == [], f"{page}: links that reach no built file or heading:\n" + "\n".join(broken)
    # The repository link's star count is fetched from api.github.com: offline, that one fails.
    errors = [e for e in browser.errors() if e.startswith(served) or not re.match(r"https?://", e)]
    assert errors == [], f"{page}: the browser logged errors: {errors}"
