"""The playground: draw points in a browser page and watch an SVM fit them.

``maxmargin playground`` (or :func:`serve`) starts a local web server on
127.0.0.1; :func:`create_app` gives the ASGI application for tests or for
serving it some other way.  Needs the ``playground`` extra
(``pip install maxmargin[playground]``: starlette and uvicorn).
"""

from __future__ import annotations

__all__ = ["create_app", "serve"]


def create_app(**options):
    """The Starlette application; see :func:`maxmargin.playground.server.create_app`."""
    from .server import create_app as _create_app

    return _create_app(**options)


def serve(host="127.0.0.1", port=0, open_browser=True, **options):
    """Serve the playground; see :func:`maxmargin.playground.server.serve`."""
    from .server import serve as _serve

    return _serve(host=host, port=port, open_browser=open_browser, **options)
