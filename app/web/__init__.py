"""The context map: HTML pages for people (``GET /ui``, ``GET /ui/sessions/{id}``).

Server-rendered with Jinja2 from the same services as the JSON API; a little plain JavaScript
(``static/ui.js``) keeps an API key in session storage, loads the pages' parts with it and
follows the session's event stream. No build step, nothing loaded from elsewhere.
"""

from app.web.routes import install_web

__all__ = ["install_web"]
