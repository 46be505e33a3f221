"""Home Assistant's HTTP API as the end-to-end test needs it: onboarding, tokens, states."""

from __future__ import annotations

from dataclasses import dataclass
import json
import time
from typing import Any
import urllib.error
import urllib.parse
import urllib.request

USER_NAME = "E2E Owner"
USERNAME = "e2e"
PASSWORD = "e2e-password-not-secret"  # a throwaway instance on 127.0.0.1, deleted afterwards


class ApiError(Exception):
    """An HTTP call that did not give what the test needs."""


@dataclass
class Response:
    status: int
    body: Any


def request(
    url: str,
    *,
    data: dict[str, Any] | None = None,
    form: dict[str, str] | None = None,
    token: str | None = None,
    timeout: float = 30,
) -> Response:
    """One HTTP request; JSON in and out (form-encoded for /auth/token)."""
    headers = {}
    body: bytes | None = None
    if data is not None:
        body = json.dumps(data).encode()
        headers["Content-Type"] = "application/json"
    elif form is not None:
        body = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as err:
        raw = err.read()
        status = err.code
    try:
        parsed: Any = json.loads(raw) if raw else None
    except ValueError:
        parsed = raw.decode("utf-8", "replace")
    return Response(status, parsed)


class HomeAssistant:
    """A Home Assistant on base_url, onboarded by this test."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.client_id = f"{self.base_url}/"
        self.token: str | None = None

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def wait_until_up(self, timeout: float, alive: Any = None) -> float:
        """Seconds until the onboarding API answers (the frontend and API are up then)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if alive is not None and not alive():
                raise ApiError("Home Assistant (scripts/develop) exited while starting")
            try:
                response = request(self.url("/api/onboarding"), timeout=5)
                if response.status == 200:
                    return time.monotonic() - started
            except OSError:
                pass
            time.sleep(1)
        raise ApiError(f"Home Assistant not up on {self.base_url} after {timeout:.0f}s")

    def onboard(self) -> None:
        """The owner, the core config, analytics and the integration step, as the UI does."""
        steps = request(self.url("/api/onboarding")).body
        if any(step["done"] for step in steps):
            raise ApiError(f"not a fresh Home Assistant: onboarding steps {steps}")
        user = request(
            self.url("/api/onboarding/users"),
            data={
                "name": USER_NAME,
                "username": USERNAME,
                "password": PASSWORD,
                "client_id": self.client_id,
                "language": "en",
            },
        )
        if user.status != 200:
            raise ApiError(f"creating the owner: {user.status} {user.body}")
        tokens = request(
            self.url("/auth/token"),
            form={
                "grant_type": "authorization_code",
                "code": user.body["auth_code"],
                "client_id": self.client_id,
            },
        )
        if tokens.status != 200:
            raise ApiError(f"token for the owner: {tokens.status} {tokens.body}")
        self.token = tokens.body["access_token"]
        for step, data in (
            ("core_config", None),
            ("analytics", None),
            (
                "integration",
                {"client_id": self.client_id, "redirect_uri": f"{self.base_url}/?auth_callback=1"},
            ),
        ):
            done = request(self.url(f"/api/onboarding/{step}"), data=data or {}, token=self.token)
            if done.status != 200:
                raise ApiError(f"onboarding step {step}: {done.status} {done.body}")
        steps = request(self.url("/api/onboarding")).body
        if not all(step["done"] for step in steps):
            raise ApiError(f"onboarding not complete: {steps}")

    def wait_until_running(self, entity_ids: tuple[str, ...], timeout: float) -> float:
        """Seconds until Home Assistant has finished starting and these entities exist.

        The HTTP API answers while integrations are still being set up; the demo's entities
        and the agent come a few seconds later.
        """
        started = time.monotonic()
        missing: list[str] = list(entity_ids)
        core_state = "unknown"
        while time.monotonic() - started < timeout:
            config = request(self.url("/api/config"), token=self.token)
            core_state = config.body.get("state", "unknown") if config.status == 200 else "?"
            missing = [
                e
                for e in entity_ids
                if request(self.url(f"/api/states/{e}"), token=self.token).status != 200
            ]
            if core_state == "RUNNING" and not missing:
                return time.monotonic() - started
            time.sleep(0.5)
        raise ApiError(f"Home Assistant {core_state} after {timeout:.0f}s; missing: {missing}")

    def config(self) -> dict[str, Any]:
        response = request(self.url("/api/config"), token=self.token)
        if response.status != 200:
            raise ApiError(f"/api/config: {response.status} {response.body}")
        return response.body

    def state(self, entity_id: str) -> dict[str, Any]:
        response = request(self.url(f"/api/states/{entity_id}"), token=self.token)
        if response.status != 200:
            raise ApiError(f"GET /api/states/{entity_id}: {response.status} {response.body}")
        return response.body

    def request_state(self, entity_id: str) -> dict[str, Any] | None:
        """The entity's state, or None while it does not exist."""
        response = request(self.url(f"/api/states/{entity_id}"), token=self.token)
        return response.body if response.status == 200 else None

    def states(self) -> list[dict[str, Any]]:
        response = request(self.url("/api/states"), token=self.token)
        if response.status != 200:
            raise ApiError(f"GET /api/states: {response.status} {response.body}")
        return response.body

    def call_service(
        self, domain: str, service: str, data: dict[str, Any], *, return_response: bool = False
    ) -> Any:
        path = f"/api/services/{domain}/{service}{'?return_response' if return_response else ''}"
        response = request(self.url(path), data=data, token=self.token)
        if response.status != 200:
            raise ApiError(f"{domain}.{service}: {response.status} {response.body}")
        return response.body

    def flow(self, path: str, handler: Any, user_input: dict[str, Any]) -> dict[str, Any]:
        """A one-form flow (config entry or subentry) through the HTTP API, as the UI does.

        `path` is the flow index, e.g. /api/config/config_entries/flow; the answer must be
        the created entry.
        """
        started = request(
            self.url(path),
            data={"handler": handler, "show_advanced_options": False},
            token=self.token,
        )
        if started.status != 200 or started.body.get("type") != "form":
            raise ApiError(f"starting {path} for {handler}: {started.status} {started.body}")
        done = request(
            self.url(f"{path}/{started.body['flow_id']}"),
            data=user_input,
            token=self.token,
            timeout=180,  # the config flow's check request reaches the model
        )
        if done.status != 200 or done.body.get("type") != "create_entry":
            raise ApiError(f"{path} for {handler}: {done.status} {done.body}")
        return done.body

    def wait_for_state(self, entity_id: str, wanted: str, timeout: float = 15) -> dict[str, Any]:
        """The entity's state once it is `wanted` (demo locks take two seconds)."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.state(entity_id)
            if state["state"] == wanted or time.monotonic() > deadline:
                return state
            time.sleep(0.25)
