"""The browser end-to-end test of scripts/e2e: a person's view of the integration.

scripts/e2e starts Home Assistant like `scripts/develop --offline-model` (a fresh config, a
free port) and runs `python -m scripts.e2e_lib` (from the repository root) with a small
Playwright virtualenv on the host: onboarding through Home Assistant's own HTTP API
(ha_api.py), then a real headless Chromium (Debian's package) that logs in through the
login page, opens the Assist dialog, types requests and reads the answers from the page
(browser.py); each step checks what happened through the REST API too (steps.py). The
walks through Home Assistant's own dialogs have modules of their own (reconfigure.py,
name_assign.py; brand.py checks brand images). Runs on the host's Python 3.11 and the
standard library besides Playwright.
"""
