# syntax=docker/dockerfile:1
# Build stage: the dependencies into a virtualenv, byte-compiled; pip, setuptools and every
# build tool stay here.
FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
# The project's dependencies only: the runtime stage runs app/ from /srv beside alembic/, so the
# installed copy of the package itself would be a second, unused copy (5 MB of vocabularies); the
# `ctxsvc` command is a three-line script over that tree. Test suites and type stubs that some
# wheels carry are dropped: nothing imports them at run time.
RUN pip install . \
    && pip uninstall -y ctxsvc \
    && printf '#!/opt/venv/bin/python\nimport sys\nfrom app.cli import main\nsys.exit(main())\n' \
         > /opt/venv/bin/ctxsvc && chmod 755 /opt/venv/bin/ctxsvc \
    && pip uninstall -y pip setuptools wheel \
    && find /opt/venv -depth \( -name tests -o -name test \) -type d -path '*/site-packages/*' \
         -exec rm -rf {} + \
    && find /opt/venv -name '*.pyi' -delete \
    && python -m compileall -q /opt/venv/lib

# Runtime stage: the interpreter, the virtualenv and the source tree, as an unprivileged user.
FROM python:3.11-slim
# The base image's own pip and setuptools are not needed to run (nothing installs at run time).
RUN python -m pip uninstall -y -q pip setuptools wheel 2>/dev/null || true; \
    rm -rf /usr/local/lib/python3.11/ensurepip /usr/local/lib/python3.11/idlelib \
           /usr/local/lib/python3.11/lib2to3 /usr/local/lib/python3.11/tkinter \
           /usr/local/lib/python3.11/turtledemo \
    && groupadd --system ctxsvc && useradd --system --gid ctxsvc --home-dir /srv ctxsvc \
    && mkdir -p /data && chown ctxsvc:ctxsvc /data
COPY --from=build /opt/venv /opt/venv
WORKDIR /srv
# The source tree beside its migrations (app.storage.migrate finds alembic/ next to app/); it
# carries the verified tokenizer vocabularies (app/providers/tokenizers/data): nothing is
# downloaded at run time.
COPY alembic.ini ./
COPY alembic ./alembic
COPY app ./app
RUN python -m compileall -q app alembic
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/srv \
    PYTHONUNBUFFERED=1 \
    CTXSVC_DATABASE_URL=sqlite+aiosqlite:////data/ctxsvc.db
USER ctxsvc
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status == 200 else 1)"
CMD ["ctxsvc", "serve", "--host", "0.0.0.0", "--port", "8000"]
