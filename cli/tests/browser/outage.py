"""The store goes away under an open `idem console` page, for
cli/tests/console.rs: signs in and finds the operation under KEY, then
says so (`seen`) and waits while the test kills the store; reports what
the page's status line says (`outage: TEXT`) and waits while the test
starts the store again; then sees the status line clear and the
operation still there, and approves it.

Usage: python3 outage.py URL TOKEN KEY
Prints a line as each step is reached, then one JSON object of what it
saw.
"""

import json
import sys

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from page import PATIENCE, browser, gone, operation, sign_in, status


def main(url, token, key):
    report = {}
    driver = browser()
    try:
        sign_in(driver, url, token)
        operation(driver, key)
        print("seen", flush=True)
        said = WebDriverWait(driver, PATIENCE).until(lambda d: status(d) or None)
        report["outage"] = said
        print(f"outage: {said}", flush=True)
        WebDriverWait(driver, PATIENCE).until(lambda d: not status(d))
        shown = operation(driver, key)
        report["recovered"] = True
        shown.find_element(By.XPATH, ".//button[normalize-space()='Approve']").click()
        gone(driver, key)
        report["approved"] = True
    finally:
        driver.quit()
    print(json.dumps(report), flush=True)


main(*sys.argv[1:4])
