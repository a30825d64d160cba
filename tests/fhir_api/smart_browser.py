"""The browser of the SMART App Launch tests: it keeps the login cookie, logs in when the server sends it to
/auth/login, follows the server's own 303s and stops at the first redirect to the app (302) or at a page."""

from __future__ import annotations

import html
import re

import httpx

PASSWORD = "correct horse battery"


def hidden_fields(page: httpx.Response) -> dict[str, str]:
    fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page.text)
    return {k: html.unescape(v) for k, v in fields}


class Browser:
    def __init__(self, user: str | None = "ana", password: str = PASSWORD) -> None:
        self.user, self.password = user, password
        self.http = httpx.Client(follow_redirects=False, timeout=30)
        self.logins = 0

    def _follow(self, response: httpx.Response) -> httpx.Response:
        while response.status_code == 303:
            location = response.headers["location"]
            if "/auth/login" not in location:
                response = self.http.get(location)
                continue
            if self.user is None:
                return response
            form = hidden_fields(self.http.get(location)) | {"username": self.user, "password": self.password}
            response = self.http.post(location.split("?", 1)[0], data=form)
            self.logins += 1
        return response

    def open(self, url: str) -> httpx.Response:
        """GET `url` (an authorize URL), logging in on the way when asked."""
        return self._follow(self.http.get(url))

    def submit(self, url: str, form: dict[str, str]) -> httpx.Response:
        """POST a form (the consent page's answer)."""
        return self._follow(self.http.post(url, data=form))
