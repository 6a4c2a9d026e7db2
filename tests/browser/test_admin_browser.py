"""End to end in headless Chromium: log in, inspect a prepare on the demo data, follow a citation.

Needs Debian's ``chromium`` and ``chromium-driver`` (/usr/bin/chromium, /usr/bin/chromedriver) and the
Python ``selenium`` package; nothing is downloaded at run time. Without them the test is skipped.
Screenshots go to test-artifacts/screenshots/ (git-ignored), or where POWERCONTEXT_SCREENSHOTS says.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from artifacts import services
from artifacts.models import ArtifactRevision, MemoryEntryVersion
from artifacts.services import EntryVersionWrite

pytestmark = pytest.mark.browser

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEMO_FIXTURE = PROJECT_ROOT / "demo" / "demo.json"
# Test artifacts; `POWERCONTEXT_SCREENSHOTS=docs/screenshots` refreshes the README's pictures.
SCREENSHOTS = PROJECT_ROOT / os.environ.get("POWERCONTEXT_SCREENSHOTS", "test-artifacts/screenshots")
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
USERNAME, PASSWORD = "operator", "pw-operator-browser-1"
QUERY = "How do we release the API after a contract change?"
ASSEMBLY = {
    "sections": [
        {"family": "experience", "limit": 2},
        {"family": "memory", "limit": 4},
        {"family": "topic_memory", "limit": 1},
    ],
    "show": ["recall_rank"],
}
MAX_BYTES = 3000
WAIT_SECONDS = 20

if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
    pytest.skip(
        f"headless Chromium needs {CHROMIUM} and {CHROMEDRIVER} (apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )
webdriver = pytest.importorskip("selenium.webdriver", reason="the selenium package is not installed")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

# --- database: the live server needs committed rows ---------------------------------------------------


def _demo_key() -> str:
    """Load the demo fixture (or build equivalent data) and return an API key that reads it."""
    if DEMO_FIXTURE.exists():
        call_command("load_context_fixtures", str(DEMO_FIXTURE), verbosity=0)
        return json.loads(DEMO_FIXTURE.read_text(encoding="utf-8"))["api_keys"][0]["key"]
    scope = services.scope_create(scope_id="project:demo", title="Demo project")
    services.memory_revision_create(
        scope=scope,
        artifact_id="memory",
        writes=[
            EntryVersionWrite("api-contract", "api-contract-v1", "Change the API contract first, then regenerate."),
            EntryVersionWrite("release-process", "release-process-v1", "To release the API run make contract-test."),
        ],
        author="browser-test",
    )
    services.experience_revision_create(
        scope=scope,
        artifact_id="exp-contract-change",
        body="Situation: The API contract changed.\nLesson: Regenerate after every contract change, then release.",
        author="browser-test",
    )
    _, key = services.api_key_create(name="browser-demo", read_scopes=[scope])
    return key


# --- browser -----------------------------------------------------------------------------------------


@pytest.fixture
def browser():
    profile = tempfile.mkdtemp(prefix="powercontext-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1400,1000",
        "--lang=en-US",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(WAIT_SECONDS * 3)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _wait(driver, css: str):
    return WebDriverWait(driver, WAIT_SECONDS).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css))
    )


def _screenshot(driver, name: str) -> Path:
    """A screenshot of the whole page (the window is grown to the page height, up to a limit)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, max(1000, min(int(height) + 40, 5000)))
    path = SCREENSHOTS / name
    assert driver.save_screenshot(str(path)), f"could not save {path}"
    driver.set_window_size(1400, 1000)
    return path


def _text(element) -> str:
    """The element's exact text (textContent: no whitespace collapsing or trimming)."""
    return element.get_attribute("textContent")


def _operator_and_a_prepare() -> dict:
    """A staff login, the demo data, and one prepare through the API (as a host would send it)."""
    get_user_model().objects.create_superuser(USERNAME, "operator@example.com", PASSWORD)
    key = _demo_key()
    body = {"scope_id": "project:demo", "query": QUERY, "max_bytes": MAX_BYTES, "assembly": ASSEMBLY}
    api = (
        Client()
        .post(
            "/v1/context/prepare",
            data=json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )
        .json()
    )
    assert api["status"] == "ready"
    return api


def _log_in(browser, live_server, next_path: str) -> None:
    """Log in through the admin's own form, which then sends the browser on to ``next_path``."""
    browser.get(f"{live_server.url}/admin/login/?next={next_path}")
    browser.find_element(By.NAME, "username").send_keys(USERNAME)
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()


# --- the tests ---------------------------------------------------------------------------------------


def test_operator_inspects_a_prepare_and_follows_a_citation_to_its_exact_revision(live_server, committed_db, browser):
    api = _operator_and_a_prepare()

    # Log in through the admin's own form; it sends us on to the inspector.
    _log_in(browser, live_server, "/admin/powercontext/inspect/")
    _wait(browser, "#inspect-form")
    assert browser.current_url.endswith("/admin/powercontext/inspect/")

    # Fill the inspector form and run it.
    browser.find_element(By.NAME, "scope").send_keys("project:demo")
    browser.find_element(By.NAME, "query").send_keys(QUERY)
    max_bytes = browser.find_element(By.NAME, "max_bytes")
    max_bytes.clear()
    max_bytes.send_keys(str(MAX_BYTES))
    assembly = browser.find_element(By.NAME, "assembly")
    assembly.clear()
    assembly.send_keys(json.dumps(ASSEMBLY, indent=2))
    browser.find_element(By.NAME, "prepare").click()

    content = _wait(browser, "#prepared-content")
    assert _text(content) == api["content"]
    assert _text(browser.find_element(By.ID, "result-bytes")) == str(api["content_bytes"])
    rows = browser.find_elements(By.CSS_SELECTOR, "#candidates tr.candidate")
    assert rows and any(row.get_attribute("data-outcome") == "included" for row in rows)
    browser.execute_script("window.scrollTo(0, 0)")
    _screenshot(browser, "inspector.png")

    # Follow the citation link of the first included experience to its exact revision page.
    experience_rows = [
        row
        for row in rows
        if row.get_attribute("data-family") == "experience" and row.get_attribute("data-outcome") == "included"
    ]
    assert experience_rows, "the demo query includes an experience"
    link = experience_rows[0].find_element(By.CSS_SELECTOR, "a.revision-link")
    link_text = _text(link)
    href = link.get_attribute("href")
    link.click()
    body = _wait(browser, "pre.powercontext-body")
    revision_pk = int(href.rstrip("/").split("/")[-2])
    revision = ArtifactRevision.objects.select_related("artifact").get(pk=revision_pk)
    assert f"revision={revision.revision}" in link_text and revision.artifact.artifact_id in link_text
    assert _text(body) == revision.body
    assert revision.body.split("\n")[0] in api["content"]  # the agent saw this very revision
    _screenshot(browser, "exact-revision.png")

    # The resolver takes the Markdown citation lines of a memory entry and lands on that entry version.
    lines = api["content"].split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith('    Artifact: family="memory"'))
    citation = "\n".join(lines[start - 1 : start + 2])
    browser.get(f"{live_server.url}/admin/powercontext/resolve/")
    browser.find_element(By.NAME, "text-citation").send_keys(citation)
    browser.find_element(By.NAME, "resolve-text").click()
    version_body = _wait(browser, "pre.powercontext-body")
    version_id = json.loads(lines[start + 1].split("version=", 1)[1])
    version = MemoryEntryVersion.objects.get(artifact__scope__scope_id="project:demo", version_id=version_id)
    cited = int(lines[start].rsplit("revision=", 1)[1])
    landing = f"/admin/artifacts/memoryentryversion/{version.pk}/change/?cited_revision={cited}"
    assert browser.current_url.endswith(landing)
    assert _text(version_body) == version.body
    # The landing page names the cited revision and links it: follow the link to that whole revision.
    cited_link = browser.find_element(By.CSS_SELECTOR, "#cited-revision a.cited-revision-link")
    assert _text(cited_link) == f"Open revision {cited}"
    cited_link.click()
    _wait(browser, "pre.powercontext-body, #content-main")
    cited_revision = ArtifactRevision.objects.get(artifact=version.artifact, revision=cited)
    assert browser.current_url.endswith(f"/admin/artifacts/artifactrevision/{cited_revision.pk}/change/")


def test_operator_finds_a_logged_prepare_replays_it_exactly_and_reopens_it_in_the_inspector_as_its_key(
    live_server, committed_db, browser
):
    api = _operator_and_a_prepare()

    _log_in(browser, live_server, "/admin/artifacts/preparelog/")
    _wait(browser, "#result_list")
    rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    assert len(rows) == 1, "exactly the one prepare above is logged"
    _screenshot(browser, "prepare-log-list.png")
    # At 1400 px every column fits beside the sidebar and the filters (no column scrolled out of sight), the
    # count reads as words and the duration is rounded with its unit.
    overflow = browser.execute_script(
        "const r = document.querySelector('#changelist .results'); return r.scrollWidth - r.clientWidth"
    )
    assert overflow <= 0, f"the list is {overflow} px wider than its box"
    assert "1 prepare log entry" in _text(browser.find_element(By.CSS_SELECTOR, ".paginator"))
    duration = _text(rows[0].find_element(By.CSS_SELECTOR, "td.field-duration_column"))
    assert re.fullmatch(r"\d[\d,]*\.\d ms", duration), duration
    rows[0].find_element(By.CSS_SELECTOR, "th a, td a").click()

    # The entry replays the exact content from the immutable revisions and proves it by its hash.
    _wait(browser, ".powercontext-replay-ok")
    assert not browser.find_elements(By.CSS_SELECTOR, ".powercontext-replay-alarm")
    bodies = [_text(pre) for pre in browser.find_elements(By.CSS_SELECTOR, "pre.powercontext-body")]
    assert api["content"] in bodies
    browser.execute_script("window.scrollTo(0, 0)")
    _screenshot(browser, "prepare-log-entry.png")

    # "Open in the prepare inspector": the same request, run as the same key, gives the same content.
    browser.find_element(By.LINK_TEXT, "Open in the prepare inspector with this request").click()
    content = _wait(browser, "#prepared-content")
    assert _text(content) == api["content"]
    assert "API key" in _text(browser.find_element(By.ID, "run-as"))
    scores = [_text(cell) for cell in browser.find_elements(By.CSS_SELECTOR, "#candidates tr.candidate td.score")]
    assert any(score not in ("—", "") for score in scores), "recall scores are shown"
    _screenshot(browser, "inspector-as-key.png")
