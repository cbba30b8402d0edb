"""What the browser scripts of cli/tests/console.rs share: a headless
Chromium through Selenium and Debian's chromedriver, signing in to
`idem console` with its form, and finding an operation on the page by
its `data-key` (the page's automation contract, docs/console.md)."""

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as seen
from selenium.webdriver.support.ui import WebDriverWait

# A guard against a hang, not a measure of speed.
PATIENCE = 60


def browser():
    options = webdriver.ChromeOptions()
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,900"]:
        options.add_argument(flag)
    options.binary_location = "/usr/bin/chromium"
    service = webdriver.ChromeService(executable_path="/usr/bin/chromedriver")
    return webdriver.Chrome(options=options, service=service)


def sign_in(driver, url, token):
    driver.get(url)
    driver.find_element(By.NAME, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()


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


def status(driver):
    """What the page's status line says (errors, the store's state)."""
    return driver.find_element(By.ID, "status").text
