# syntax=docker/dockerfile:1
# Build stage: dependencies into a virtualenv, tokenizer data verified and baked in.
FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
RUN pip install .
COPY scripts/bake_encodings.py ./scripts/bake_encodings.py
# Verified against the published SHA-256 of each encoding; the build fails if they do not match.
RUN python scripts/bake_encodings.py /opt/tokenizers

# Runtime stage: the same app, as an unprivileged user.
FROM python:3.11-slim
RUN groupadd --system ctxsvc && useradd --system --gid ctxsvc --home-dir /srv ctxsvc \
    && mkdir -p /data && chown ctxsvc:ctxsvc /data
COPY --from=build /opt/venv /opt/venv
COPY --from=build /opt/tokenizers /opt/tokenizers
WORKDIR /srv
# The source tree beside its migrations (app.storage.migrate finds alembic/ next to app/).
COPY alembic.ini ./
COPY alembic ./alembic
COPY app ./app
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/srv \
    PYTHONUNBUFFERED=1 \
    CTXSVC_DATABASE_URL=sqlite+aiosqlite:////data/ctxsvc.db \
    CTXSVC_TOKENIZER_DIR=/opt/tokenizers
USER ctxsvc
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status == 200 else 1)"
CMD ["ctxsvc", "serve", "--host", "0.0.0.0", "--port", "8000"]
