"""How long `idem console`'s page takes to show its first screen, for
cli/examples/console_load.rs: signs in, then opens the page afresh
ROUNDS times (5 unless given), each after the console's copy of the
lists has lapsed, and measures, in the page's own clock,
from navigation to the first operation drawn (polled every 5 ms: an
upper bound by that much).

Usage: python3 first_screen.py URL TOKEN [ROUNDS]
Prints one JSON object: {"p50": MS, "max": MS}.
"""

import json
import sys
import time

from selenium.webdriver.common.by import By

from page import PATIENCE, browser, sign_in


def first_screen(driver, url):
    # No page of the console is open, and what it read for the last
    # round has lapsed.
    driver.get("about:blank")
    time.sleep(6)
    driver.get(url)
    started = time.monotonic()
    while not driver.find_elements(By.CSS_SELECTOR, "article[data-key]"):
        if time.monotonic() - started > PATIENCE:
            raise TimeoutError("no operation was drawn")
        time.sleep(0.005)
    return driver.execute_script("return performance.now()")


def main(url, token, rounds="5"):
    driver = browser()
    try:
        sign_in(driver, url, token)
        took = sorted(first_screen(driver, url) for _ in range(int(rounds)))
    finally:
        driver.quit()
    print(json.dumps({"p50": round(took[len(took) // 2], 1), "max": round(took[-1], 1)}))


main(*sys.argv[1:4])
