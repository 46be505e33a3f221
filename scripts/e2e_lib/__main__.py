"""python -m scripts.e2e_lib: onboard a fresh Home Assistant, then run the browser steps.

Run by scripts/e2e (which starts Home Assistant and cleans up). Writes the results as JSON
(--results) for scripts/e2e's final line; exit status 0 when every step passed.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
import shutil
import signal
import sys
import time
from typing import Any, NamedTuple

from .browser import VIEWPORT, chromium
from .ha_api import HomeAssistant
from .steps import AGENT_ENTITY, MUST_BE_EXPOSED, Steps

STARTUP_TIMEOUT = 600.0
RUNNING_TIMEOUT = 180.0
REQUIRED_ENTITIES = (*MUST_BE_EXPOSED, AGENT_ENTITY)


class Step(NamedTuple):
    name: str
    slug: str  # screenshot file name
    method: str  # of Steps
    # A failed login or dialog leaves nothing to click: the steps after it do not run.
    required: bool = False


STEPS = [
    Step("log in through Home Assistant's login page", "login", "login", required=True),
    Step(
        "--offline-model setup: demo entities exposed, pipeline uses the agent",
        "setup",
        "configured",
    ),
    Step("open the Assist dialog", "assist-dialog", "open_assist", required=True),
    Step("(a) 'Turn on the kitchen lights' turns the demo light on (REST)", "light", "light"),
    Step("(b) weather and forecast answers match the demo weather (REST)", "weather", "weather"),
    Step(
        "(c) two turns: remember a fact, recall it in the same conversation", "remember", "remember"
    ),
    Step("(d) 'Unlock the front door' asks first; 'Yes' unlocks it (REST)", "confirm", "confirm"),
    Step("(e) anything else: says it is a scripted stand-in", "stand-in", "stand_in_says_so"),
    Step("(f) phone-sized screen: new conversation, light, weather, unlock", "phone", "phone"),
    Step(
        "(g) real local model (llama-server): streamed answer, prompt cache, window sentence",
        "local-model",
        "local_model",
    ),
    Step(
        "(h) entry menu → Reconfigure: another model from the server's list; stored, answers",
        "reconfigure",
        "reconfigure",
    ),
    Step(
        "(i) the brand icon is served and loads in the integration list and page", "brand", "brand"
    ),
    Step(
        "(j) Add integration → our form → 'Name and assign': each device's brand icon loads",
        "name-assign",
        "name_assign",
    ),
    Step(
        "(k) profile language German: the agent form's labels and section names in German, "
        "every section closed at first; closed again without an agent",
        "agent-form-de",
        "agent_form_de",
    ),
]
# LGC_E2E_ONLY=slug,slug runs only those steps (and the required ones), to work on a step.
if only := {s for s in os.environ.get("LGC_E2E_ONLY", "").split(",") if s}:
    STEPS = [step for step in STEPS if step.required or step.slug in only]
# The README's chat picture: the phone step's screenshot.
DOCS_STEP = "phone"
DOCS_CHAT = "chat-panel.png"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--artifacts", required=True, type=Path)
    parser.add_argument("--results", required=True, type=Path)
    parser.add_argument("--ha-log", type=Path, help="Home Assistant's log, checked at the end")
    parser.add_argument("--marker", required=True, help="extra Chromium switch marking this run")
    parser.add_argument("--develop-pid", type=int, help="scripts/develop, to notice it dying")
    parser.add_argument(
        "--docs-dir", type=Path, help="copy the pictures for the docs here (chat, German form)"
    )
    parser.add_argument(
        "--local-model-port-file",
        type=Path,
        help="where scripts/develop --local-model writes llama-server's port",
    )
    args = parser.parse_args()
    # SIGTERM from scripts/e2e's cleanup: unwind, so Chromium is closed properly.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.artifacts.mkdir(parents=True, exist_ok=True)

    timings: dict[str, float] = {}
    steps: Steps | None = None
    setup_error = ""
    try:
        ha = HomeAssistant(args.base_url)
        started = time.monotonic()

        def alive() -> bool:
            if not args.develop_pid:
                return True
            try:
                os.kill(args.develop_pid, 0)
            except ProcessLookupError:
                return False
            return True

        ha.wait_until_up(STARTUP_TIMEOUT, alive)
        timings["home_assistant_up"] = time.monotonic() - started
        print(f"  Home Assistant up on {args.base_url} after {timings['home_assistant_up']:.0f}s")
        onboarding = time.monotonic()
        ha.onboard()
        timings["onboarding"] = time.monotonic() - onboarding
        print(f"  onboarded through the API in {timings['onboarding']:.1f}s (owner 'e2e')")
        running = ha.wait_until_running(REQUIRED_ENTITIES, RUNNING_TIMEOUT)
        print(f"  running, with the demo entities and the agent, {running:.1f}s later")

        browser_started = time.monotonic()
        with chromium(args.marker) as browser:
            page = browser.new_page(viewport=VIEWPORT)
            steps = Steps(ha, browser, page, args.artifacts, args.local_model_port_file)
            for index, step in enumerate(STEPS):
                if (
                    not steps.run(step.name, step.slug, getattr(steps, step.method))
                    and step.required
                ):
                    steps.skip_rest([s.name for s in STEPS[index + 1 :]], f"{step.name} failed")
                    break
            steps.run(
                "no warnings or errors of langgraph_conversation in Home Assistant's log",
                "log",
                lambda: steps.log_clean(args.ha_log),  # type: ignore[union-attr]
            )
            page.close()
        timings["browser_steps"] = time.monotonic() - browser_started
    except Exception as err:  # noqa: BLE001  reported as a failed setup, then cleaned up
        setup_error = f"{type(err).__name__}: {err}"
        print(f"  FAIL setup: {setup_error}", flush=True)

    results: list[dict[str, Any]] = [vars(r) for r in steps.results] if steps else []
    if setup_error:
        results.append(
            {
                "name": "setup (Home Assistant, onboarding, Chromium)",
                "passed": False,
                "detail": setup_error,
                "seconds": 0.0,
            }
        )
    passed = sum(r["passed"] for r in results)
    failed = len(results) - passed
    if steps is not None:
        (args.artifacts / "transcript.txt").write_text(
            "\n".join(steps.transcript) + "\n", encoding="utf-8"
        )
        shots = {DOCS_CHAT: steps.screenshots.get(DOCS_STEP), **steps.docs_shots}
        for name, shot in shots.items():
            if args.docs_dir and shot and not failed:
                shutil.copyfile(shot, args.docs_dir / name)
                print(f"  copied {shot.name} to {args.docs_dir / name}")
    args.results.write_text(
        json.dumps(
            {"passed": passed, "failed": failed, "results": results, "timings": timings},
            indent=2,
        ),
        encoding="utf-8",
    )
    return 0 if failed == 0 and results else 1


if __name__ == "__main__":
    sys.exit(main())
