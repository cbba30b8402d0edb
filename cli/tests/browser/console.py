"""A person at `idem console` in a real browser (headless Chromium through
Selenium and Debian's chromedriver), for cli/tests/console.rs: signs in
with the form, finds each operation by its `data-key`, approves one,
denies one with a reason typed and sent with Enter, resolves an unknown
outcome as done with a result, and, from a page of another origin in
the same signed-in browser, submits a form that would approve a fourth
operation (a cross-site request). Takes a screenshot of the page with
operations on it.

Usage: python3 console.py URL TOKEN APPROVE_KEY DENY_KEY KEEP_KEY UNKNOWN_KEY SCREENSHOT
Prints one JSON object: what it saw and what each step came to.
"""

import json
import sys

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as seen
from selenium.webdriver.support.ui import Select, WebDriverWait

# A guard against a hang, not a measure of speed.
PATIENCE = 60


def browser():
    options = webdriver.ChromeOptions()
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,900"]:
        options.add_argument(flag)
    options.binary_location = "/usr/bin/chromium"
    service = webdriver.ChromeService(executable_path="/usr/bin/chromedriver")
    return webdriver.Chrome(options=options, service=service)


def operation(driver, key):
    """The element of the operation under `key`, once it is on the page."""
    selector = f'[data-key="{key}"]'
    return WebDriverWait(driver, PATIENCE).until(
        seen.presence_of_element_located((By.CSS_SELECTOR, f"article{selector}"))
    )


def gone(driver, key):
    WebDriverWait(driver, PATIENCE).until(
        lambda d: not d.find_elements(By.CSS_SELECTOR, f'article[data-key="{key}"]')
    )


def main(url, token, approve_key, deny_key, keep_key, unknown_key, screenshot):
    report = {}
    driver = browser()
    try:
        driver.get(url)
        driver.find_element(By.NAME, "token").send_keys(token)
        driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
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

        decided = WebDriverWait(driver, PATIENCE).until(
            lambda d: d.find_element(By.ID, "decided").text if "refused" in d.find_element(By.ID, "decided").text else None
        )
        report["decisions"] = decided

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


main(*sys.argv[1:8])
