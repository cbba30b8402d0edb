"""A person at `idem console` in a real browser (headless Chromium through
Selenium and Debian's chromedriver), for cli/tests/console.rs: signs in
with the form, finds each operation by its `data-key`, approves one,
denies one with a reason typed and sent with Enter, resolves an unknown
outcome as done with a result, approves one more from the keyboard
and revokes that approval from the decisions, looks at the page on a
phone's width in a dark theme, and, from a page of another origin in
the same signed-in browser, submits a form that would approve a fourth
operation (a cross-site request). Takes a screenshot of the page with
operations on it.

Usage: python3 console.py URL TOKEN APPROVE_KEY DENY_KEY KEEP_KEY UNKNOWN_KEY REVOKE_KEY SCREENSHOT
Prints one JSON object: what it saw and what each step came to.
"""

import json
import sys

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as seen
from selenium.webdriver.support.ui import Select, WebDriverWait

from page import PATIENCE, browser, gone, operation, sign_in


def main(url, token, approve_key, deny_key, keep_key, unknown_key, revoke_key, screenshot):
    report = {}
    driver = browser()
    try:
        sign_in(driver, url, token)
        shown = operation(driver, approve_key)
        report["arguments"] = shown.text
        operation(driver, unknown_key)
        driver.save_screenshot(screenshot)

        shown.find_element(By.XPATH, ".//button[normalize-space()='Approve']").click()
        gone(driver, approve_key)
        report["approved"] = True

        denied = operation(driver, deny_key)
        reason = denied.find_element(By.NAME, "reason")
        reason.send_keys("not this one", Keys.ENTER)
        gone(driver, deny_key)
        report["denied"] = True

        unknown = operation(driver, unknown_key)
        Select(unknown.find_element(By.NAME, "outcome")).select_by_value("done")
        unknown.find_element(By.NAME, "given").send_keys('{"sent_to": "ann@example.com", "by": "page"}')
        unknown.find_element(By.XPATH, ".//button[normalize-space()='Resolve']").click()
        gone(driver, unknown_key)
        report["resolved"] = True

        # Approved, then taken back from the decisions before it was used:
        # it awaits a decision again.
        # From the keyboard: the button focused, Enter pressed.
        approving = operation(driver, revoke_key)
        approving.find_element(By.XPATH, ".//button[normalize-space()='Approve']").send_keys(Keys.ENTER)
        gone(driver, revoke_key)
        row = f'#decided tr[data-key="{revoke_key}"]'
        revoke = WebDriverWait(driver, PATIENCE).until(
            seen.element_to_be_clickable((By.CSS_SELECTOR, f"{row} button"))
        )
        report["revoke_label"] = revoke.text
        revoke.click()
        operation(driver, revoke_key)
        report["revoked"] = True

        decided = WebDriverWait(driver, PATIENCE).until(
            lambda d: d.find_element(By.ID, "decided").text if "refused" in d.find_element(By.ID, "decided").text else None
        )
        report["decisions"] = decided

        # On a phone's width, in a dark theme: nothing wider than the
        # screen, and the page dark.
        driver.set_window_size(390, 844)
        dark = {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", dark)
        report["phone_overflow"] = driver.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        # What sticks out, if anything: for the test's message.
        report["wider_than_phone"] = driver.execute_script(
            "const w = document.documentElement.clientWidth; return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > w).slice(0, 8).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right) + ' ' + (e.textContent || '').slice(0, 30))"
        )
        report["dark_background"] = driver.execute_script(
            "return getComputedStyle(document.body).backgroundColor"
        )

        # Another site's page, in the same signed-in browser, submits a
        # form that would approve KEEP_KEY: what the console answers.
        action = f"{url.rstrip('/')}/api/approvals/{keep_key}/approve"
        page = (
            "data:text/html,<form id=f method=post enctype=text/plain "
            f"action='{action}'><input name=x value=y></form>"
            "<script>document.getElementById('f').submit()</script>"
        )
        driver.get(page)
        WebDriverWait(driver, PATIENCE).until(lambda d: d.current_url.startswith("http"))
        report["cross_site"] = driver.find_element(By.TAG_NAME, "body").text
    finally:
        driver.quit()
    print(json.dumps(report))


main(*sys.argv[1:9])
