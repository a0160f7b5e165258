"""The evidence bundle (an A/B with its logs, ``--format html``) in a real headless Chromium:
it opens with no console message (no script, nothing refused by the page's policy), the
browser's DOM has the acceptance verdict first and the five sections in the seeds' order, and
hostile log text stays text.

Skips, saying why, when no Chromium is installed, except under CI=true, where it fails."""

from __future__ import annotations

import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

from nsysmoe import api
from nsysmoe.acceptance import Acceptance, AcceptedComparison
from nsysmoe.renderers import render
from nsysmoe.renderers.report.acceptance import SECTIONS
from tests.renderers.test_acceptance import AB, HOSTILE, LINK, OFF, R1, VERDICT, side


def open_page(browser: str, tmp: Path, page: str) -> tuple[str, list[str]]:
    """The DOM Chromium built from ``page``, and every console message it logged."""
    path = tmp / "bundle.html"
    path.write_text(page, encoding="utf-8")
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
           "--v=0", f"--user-data-dir={tmp / 'profile'}", "--no-first-run",
           "--disable-extensions", "--disable-background-networking",
           "--proxy-server=127.0.0.1:9", "--dump-dom", path.as_uri()]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, re.findall(r"CONSOLE[^\]]*\] .*", proc.stderr)


HEADINGS = tuple(f"h{n}" for n in range(1, 7))


def headings(dom: str) -> list[str]:
    """The text of every heading (h1–h6), in document order."""
    out: list[str] = []

    class Collect(HTMLParser):
        inside = False

        def handle_starttag(self, tag: str, attrs) -> None:  # noqa: ANN001
            if tag in HEADINGS:
                self.inside = True
                out.append("")

        def handle_endtag(self, tag: str) -> None:
            self.inside = self.inside and tag not in HEADINGS

        def handle_data(self, data: str) -> None:
            if self.inside:
                out[-1] += data

    Collect().feed(dom)
    return out


def test_bundle_opens_in_chromium_verdict_first_no_console_message(browser: str,
                                                                   tmp_path: Path) -> None:
    ac = AcceptedComparison(api.compare(*api.example_paths("nsys")), AB, LINK)
    dom, console = open_page(browser, tmp_path, render(ac, "html", page=True))
    assert console == []
    want = [VERDICT, *SECTIONS, "nsysmoe A/B: overlap off vs on"]
    assert headings(dom)[: len(want)] == want


def test_console_messages_are_seen(browser: str, tmp_path: Path) -> None:
    """The check above can fail: a page with a script the policy refuses logs a message."""
    page = render(AB, "html", page=True).replace("</body>", "<script>alert(1)</script></body>")
    _, console = open_page(browser, tmp_path, page)
    assert console and "Content Security Policy" in console[0]


def test_hostile_log_text_stays_text_in_the_browser(browser: str, tmp_path: Path) -> None:
    bad = side(HOSTILE, 1.2, 1.2, (1.1, 1.3), 1.0, {"--overlap": HOSTILE}, notes=(HOSTILE,))
    acc = Acceptance((OFF, bad), (R1,), (R1,), False, 0.01, 0, 2000)
    dom, console = open_page(browser, tmp_path, render(acc, "html", page=True))
    assert console == []
    assert "<script" not in dom and "x&lt;script&gt;alert(1)&lt;/script&gt;" in dom
