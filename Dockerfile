# Understudy: API (and, with `understudy worker`, the worker) on a slim Python 3.11 image.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    TZ=UTC \
    UNDERSTUDY_HOST=0.0.0.0 \
    UNDERSTUDY_PORT=8000 \
    UNDERSTUDY_DATA_DIR=/data

RUN useradd --create-home --uid 10001 understudy \
    && mkdir -p /data && chown understudy /data
WORKDIR /srv/understudy

COPY clients/python ./clients/python
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY migrations ./migrations
COPY scenarios ./scenarios
RUN pip install ./clients/python .

USER understudy
EXPOSE 8000
# Point UNDERSTUDY_DATABASE_URL and UNDERSTUDY_REDIS_URL at real servers in production;
# without them the container starts embedded ones under /data.
CMD ["understudy", "serve"]
